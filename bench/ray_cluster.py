"""A batch of many rank traces on a local three-node Ray cluster, from a folder and from a local S3 server,
beside the process engine on the same files: wall time and peak memory per node (docs/benchmarks.md).

The ranks are copies of one real trace, each with its own ``distributedInfo.rank``. The cluster is
``ray.cluster_utils.Cluster`` on this machine: a head and two worker nodes of one CPU each, an 80 MB
object store each. A node's memory is the resident set of its raylet and every process below it (its
workers), sampled every 0.2 s; the driver's (the ``analyze`` process) is its own, as for the process
engine, whose figure is the parent and its workers together. The load average is printed beside each
figure: the machine is shared.

usage: PYTHONPATH=$PWD python3 bench/ray_cluster.py [--ranks 1000] [--source TRACE] [--skip-s3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

SOURCE = "/work/shared/traces/external2/kineto/hta__timeline_analysis__sampled_rank-0.json.gz"
OBJECT_STORE = 80 << 20


def make_ranks(source: str, ranks: int, folder: Path) -> None:
    """``ranks`` copies of ``source``, rank i in ``rank-i.json.gz`` with ``distributedInfo.rank = i``."""
    if folder.exists() and len(list(folder.glob("rank-*.json.gz"))) == ranks:
        return
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    with gzip.open(source, "rt") as fh:
        trace = json.load(fh)
    info = trace.setdefault("distributedInfo", {})
    info["world_size"] = ranks
    for i in range(ranks):
        info["rank"] = i
        with gzip.open(folder / f"rank-{i:04d}.json.gz", "wt", compresslevel=1) as out:
            json.dump(trace, out)


def _tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and every process below it."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/statm") as fh:
                total += int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError):
            pass
        stack += children.get(p, [])
    return total


class Peaks:
    """The peak resident set of each named process tree, sampled in a thread."""

    def __init__(self, roots: dict[str, int]) -> None:
        self.roots, self.peak = roots, dict.fromkeys(roots, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for name, pid in self.roots.items():
                self.peak[name] = max(self.peak[name], _tree_rss(pid))
            self._stop.wait(0.2)

    def __enter__(self) -> Peaks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run(label: str, argv: list[str], roots: dict[str, int], env: dict[str, str]) -> dict:
    """One ``analyze`` batch as a subprocess: wall time, peaks, the load average before it, its outcome."""
    load = os.getloadavg()
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "nongemm_trace", "analyze", *argv, "--format", "json",
                             "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    with Peaks({"driver": proc.pid, **roots}) as peaks:
        out, err = proc.communicate()
    wall = time.monotonic() - t0
    d = json.loads(out) if out else {}
    row = {"run": label, "wall_s": round(wall, 1), "load_before": [round(x, 2) for x in load],
           "load_after": [round(x, 2) for x in os.getloadavg()], "exit": proc.returncode,
           "traces": len(d.get("traces", [])), "failed": len(d.get("failed", [])),
           "peak_mb": {k: round(v / 2**20) for k, v in peaks.peak.items()},
           "gpu_time_us": (d.get("combined") or {}).get("gpu_time_us"),
           # the calls matched across the ranks, and on how many ranks each was (the collectives' reduction)
           "collectives": len(d.get("collectives") or []),
           "ranks_per_collective": sorted({len(c["ranks"]) for c in d.get("collectives") or []})}
    if proc.returncode:
        row["stderr"] = err.decode()[-500:]
    print(json.dumps(row), flush=True)
    return row


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ports() -> dict[str, int]:
    """A node's agent ports chosen here (with 0 the raylet waits for its agent's port file, which a loaded
    host can outlast)."""
    return {k: _free_port() for k in ("metrics_agent_port", "runtime_env_agent_port", "dashboard_agent_listen_port",
                                      "metrics_export_port")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=1000)
    ap.add_argument("--source", default=SOURCE)
    ap.add_argument("--folder", default="/tmp/nongemm-bench-ranks")
    ap.add_argument("--skip-s3", action="store_true")
    args = ap.parse_args()
    folder = Path(args.folder)
    make_ranks(args.source, args.ranks, folder)
    env = dict(os.environ, NONGEMM_MAX_MEMORY=str(1 << 30), RAY_USAGE_STATS_ENABLED="0",
               RAY_raylet_start_wait_time_s="300", RAY_worker_register_timeout_seconds="600")
    rows = [run("process engine, 2 workers", [str(folder), "--workers", "2"], {}, env)]

    moto = None
    if not args.skip_s3:
        port = _free_port()
        moto = subprocess.Popen([shutil.which("moto_server") or "moto_server", "-H", "127.0.0.1", "-p", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        endpoint = f"http://127.0.0.1:{port}"
        env.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
                   FSSPEC_S3_ENDPOINT_URL=endpoint, AWS_ENDPOINT_URL_S3=endpoint)
        os.environ.update({k: env[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
                                               "FSSPEC_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")})
        time.sleep(3)
        import s3fs

        fs = s3fs.S3FileSystem(endpoint_url=endpoint)
        fs.mkdir("ranks")
        fs.put(str(folder) + "/", "ranks/run/", recursive=True)
    os.environ.update({k: v for k, v in env.items() if k.startswith("RAY_")})
    from ray import ray_constants
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=False)
    nodes = [cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE, include_dashboard=False, **_ports())]
    nodes += [cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE, **_ports()) for _ in range(2)]
    cluster.wait_for_nodes()
    try:
        roots = {f"node{i}": n.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid
                 for i, n in enumerate(nodes)}
        cl = ["--engine", "ray", "--address", cluster.address]
        rows.append(run("Ray cluster, 3 nodes x 1 CPU, folder", [str(folder), *cl], roots, env))
        if moto is not None:
            rows.append(run("Ray cluster, 3 nodes x 1 CPU, S3 (moto)", ["s3://ranks/run/", *cl], roots, env))
            rows.append(run("process engine, 2 workers, S3 (moto)", ["s3://ranks/run/", "--workers", "2"], {}, env))
    finally:
        cluster.shutdown()
        if moto is not None:
            moto.kill()
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
