"""``--engine ray --address``: a batch on a real multi-node Ray cluster started on this machine (a head and
two worker nodes, ``ray.cluster_utils.Cluster``), reading traces from folders and from a local S3 server
(moto's server mode); per-trace rows come to the driver, the combined view and the collectives are reduced
in the cluster and equal the process engine's; a task over its memory budget is named as such; a worker
node killed mid-batch fails only its traces (issue #45 item 4).

One cluster for the whole module (each Ray start costs seconds); the test that removes a node runs last.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import SAMPLES, shared

from nongemm_trace.cli import main

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'nongemm-trace[ray]')")

OBJECT_STORE = 80 << 20
BUDGET = str(1 << 30)
ZOO = [SAMPLES / "zoo" / "bert_base__bs1_fp16_eager.json.gz", SAMPLES / "zoo" / "vit_b_16__bs1_fp16_eager.json.gz"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3():
    """A local S3 server (moto), its endpoint in the environment the cluster's nodes inherit."""
    pytest.importorskip("s3fs", reason="s3fs is not installed (pip install 'nongemm-trace[cloud]')")
    server = shutil.which("moto_server")
    if server is None:
        pytest.skip("moto's server is not installed (pip install 'moto[server]')")
    port = _free_port()
    proc = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
           "FSSPEC_S3_ENDPOINT_URL": endpoint, "AWS_ENDPOINT_URL_S3": endpoint}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.skip("moto's S3 server did not start")
                time.sleep(0.2)
        import fsspec
        import s3fs

        fsspec.config.conf.setdefault("s3", {})["endpoint_url"] = endpoint  # fsspec read the environment at import
        fs = s3fs.S3FileSystem()
        fs.mkdir("traces")
        yield fs
    finally:
        proc.kill()
        proc.wait()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _agent_ports() -> dict[str, int]:
    """A node's agent ports, chosen here: with a port of 0 the raylet waits for its agent to write the port it
    took, and on a loaded host the agent's start outlasts that wait (the raylet aborts, the node never comes)."""
    return {k: _free_port() for k in ("metrics_agent_port", "runtime_env_agent_port", "dashboard_agent_listen_port",
                                      "metrics_export_port")}


@pytest.fixture(scope="module")
def cluster(s3):
    """A head and two worker nodes of one CPU and an 80 MB object store each (started after the S3 server: the
    nodes' workers read it with the endpoint in their environment)."""
    from ray.cluster_utils import Cluster

    # a shared, loaded host: a raylet or a worker may take minutes to register (Ray's defaults: 30 and 60 s)
    for key, value in {"RAY_USAGE_STATS_ENABLED": "0", "RAY_raylet_start_wait_time_s": "300",
                       "RAY_worker_register_timeout_seconds": "600",
                       "RAY_agent_register_timeout_ms": "600000"}.items():
        os.environ.setdefault(key, value)
    for attempt in range(3):  # Ray waits 30 s (fixed) for a node to register: a busy host may need another go
        c = Cluster(initialize_head=False)
        try:
            c.add_node(num_cpus=1, object_store_memory=OBJECT_STORE, include_dashboard=False, **_agent_ports())
            workers = [c.add_node(num_cpus=1, object_store_memory=OBJECT_STORE, **_agent_ports()) for _ in range(2)]
            c.wait_for_nodes()
            break
        except Exception as exc:
            c.shutdown()
            if attempt < 2:
                continue
            if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
                raise
            pytest.skip(f"a Ray node did not come up on this machine (3 tries): {exc}")
    yield c, workers
    c.shutdown()


def _run(capsys, *args, env: dict | None = None) -> tuple[int, str, str]:
    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        code = main(["analyze", *map(str, args), "--quiet"])
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out, err = capsys.readouterr()
    return code, out, err


def test_a_batch_on_the_cluster_equals_the_process_engine(cluster, capsys):
    """Two DDP ranks and two single traces on the cluster: each trace's row, the combined view, the ranks and
    every collective equal the process engine's (the reductions ran in the cluster); rows carry no op tables."""
    c, _ = cluster
    traces = [*ZOO, *sorted(shared("h200x2").glob("*.json.gz"))]
    code, out, err = _run(capsys, *traces, "--format", "json", "--workers", "2")
    assert code == 0, err
    local = json.loads(out)
    code, out, err = _run(capsys, *traces, "--format", "json", "--engine", "ray", "--address", c.address,
                          "--workers", "7", env={"NONGEMM_MAX_MEMORY": BUDGET})
    assert code == 0, err
    d = json.loads(out)
    assert d["combined"] == local["combined"] and d["combined"]["traces"] == 4
    assert d["ranks"] == local["ranks"] and d["collectives"] == local["collectives"] and d["collectives"]
    assert [t["trace"] for t in d["traces"]] == [str(t) for t in traces]
    for row, full in zip(d["traces"], local["traces"]):
        assert "ops" not in row and "ops" in full
        for k in ("gpu_time_us", "gpu_activities", "classes", "rank", "step_times_us", "timeline"):
            assert row.get(k) == full.get(k), k
    from nongemm_trace.runs.summary import row_of
    assert d["traces"] == [row_of(t) for t in local["traces"]]


def test_traces_read_from_s3_on_the_cluster(cluster, s3, capsys, tmp_path):
    """A prefix of an S3 bucket is listed like a folder and every node reads its objects; the rows name the
    URLs and equal a local run's; a missing object is one line naming its URL, exit 2."""
    c, _ = cluster
    for i, t in enumerate(ZOO):
        s3.put(str(t), f"traces/run/rank-{i}/{t.name}")
    s3.pipe("traces/run/notes.txt", b"not a trace")
    code, out, err = _run(capsys, "s3://traces/run/", "--format", "csv", "--engine", "ray", "--address",
                          c.address, env={"NONGEMM_MAX_MEMORY": BUDGET})
    assert code == 0, err
    code, local, err = _run(capsys, *ZOO, "--format", "csv", "--workers", "1")
    assert code == 0, err
    names = [f"s3://traces/run/rank-{i}/{t.name}" for i, t in enumerate(ZOO)]
    got = out.splitlines()
    assert [r.split(",")[0] for r in got[1:]] == names
    assert [r.split(",", 1)[1] for r in got[1:]] == [r.split(",", 1)[1] for r in local.splitlines()[1:]]
    code, out, err = _run(capsys, "s3://traces/run/missing.json.gz")
    assert code == 2 and err.strip() == "nongemm-trace: error: s3://traces/run/missing.json.gz: no such object", err


def test_a_remote_object_over_the_read_cap_is_refused_before_reading(s3, capsys):
    """NONGEMM_MAX_TRACE_BYTES bounds a URL as it bounds a file: its size from the store, one line, exit 2."""
    s3.put(str(ZOO[0]), "traces/big/one.json.gz")
    code, out, err = _run(capsys, "s3://traces/big/one.json.gz", env={"NONGEMM_MAX_TRACE_BYTES": "1000"})
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "s3://traces/big/one.json.gz: is more than 0.0 GB of JSON" in err and "NONGEMM_MAX_TRACE_BYTES" in err


def test_contradictions_are_refused_in_one_line(capsys):
    code, _, err = _run(capsys, *ZOO, "--address", "127.0.0.1:1")
    assert code == 2 and err.strip() == ("nongemm-trace: error: --address names a Ray cluster: it needs "
                                         "--engine ray, not --engine process")
    code, _, err = _run(capsys, *ZOO, "--engine", "ray", "--address", "127.0.0.1:1", "--workers", "0")
    assert code == 2 and err.strip() == "nongemm-trace: error: --workers must be a whole number of at least 1, not 0"


def test_an_address_where_nothing_listens_is_one_line_in_seconds(capsys):
    """Ray waits minutes, silently, for a head that is not there: the address is tried first."""
    port = _free_port()
    start = time.monotonic()
    code, out, err = _run(capsys, *ZOO, "--engine", "ray", "--address", f"127.0.0.1:{port}", "--format", "json")
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith(f"nongemm-trace: error: Ray at 127.0.0.1:{port} did not answer")
    assert time.monotonic() - start < 30


def test_a_ray_task_over_its_memory_fails_only_its_trace(cluster, tmp_path):
    """A Ray worker whose trace takes it past NONGEMM_MAX_MEMORY is ended by its own memory guard: that
    trace fails in one line, the batch goes on (the other trace reports), exit 2 (the command line in a
    process of its own, as a user runs it; tests/test_untried_surfaces.py's before it shared this cluster)."""
    from test_hostile_t4 import run_measured as run_cli

    c, _ = cluster
    small = tmp_path / "small.json"
    small.write_text('{"traceEvents":[{"ph":"X","cat":"kernel","name":"sgemm","pid":0,"tid":7,"ts":1,"dur":2,'
                     '"args":{}}]}')
    big = tmp_path / "big.json"
    # a trace whose load needs far more than the budget below (the table budget or the guard refuses it)
    big.write_text('{"traceEvents":[' + ",".join(
        f'{{"ph":"X","cat":"kernel","name":"k{i % 997}","pid":0,"tid":7,"ts":{i},"dur":1,"args":{{}}}}'
        for i in range(100_000)) + "]}")
    env = {"NONGEMM_MAX_MEMORY": str(4 << 20), "RAY_DISABLE_DOCKER_CPU_WARNING": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    code, out, err, _ = run_cli(["analyze", str(small), str(big), "--engine", "ray", "--address", c.address,
                                 "--format", "json"], env, timeout=300)
    assert code == 2, err[-2000:]
    failed = [line for line in err.strip().splitlines() if str(big) in line]
    # the worker's guard or the loader's table budget ended it: either way named as memory, not as a death
    assert len(failed) == 1 and "memory" in failed[0] and "died" not in failed[0], err[-2000:]
    assert str(small) in out and not any(str(small) in line for line in err.splitlines())


def _hungry(megabytes: int) -> int:
    """A job that takes ``megabytes`` of memory, a few at a time (the watchdog sees it grow)."""
    held = []
    for _ in range(megabytes // 16):
        held.append(bytearray(16 << 20))
        time.sleep(0.002)
    return len(held)


def _guarded() -> None:
    from nongemm_trace.core import memory_guard

    memory_guard.start(64 << 20)


def test_a_task_over_its_memory_budget_is_named_as_such(cluster):
    """A task its worker's memory guard ends is a memory failure (the line it left in Ray's store), not a worker
    that died; its neighbour reports, and the task declared its memory to Ray."""
    from nongemm_trace.runs.batch_workers import Failure
    from nongemm_trace.runs.ray_engine import ray_session, run_ray

    c, _ = cluster
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # by value: the nodes cannot import tests
    with ray_session(c.address, None):
        got = run_ray([(8,), (3000,)], _hungry, workers=2, prepare=_guarded, memory=1 << 30)
    assert got[0] == 0
    assert isinstance(got[1], Failure) and got[1].kind == "memory", got[1]
    assert "needs more than" in got[1].how and "NONGEMM_MAX_MEMORY" in got[1].how


def _feed(fifo: Path, data: bytes, opened: threading.Event, release: threading.Event) -> None:
    """Open ``fifo`` for writing once its reader is there, then write ``data`` when released."""
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:
            time.sleep(0.05)
    os.set_blocking(fd, True)
    opened.set()
    release.wait()
    try:
        os.write(fd, data)
    except BrokenPipeError:  # its reader ended with its node
        pass
    finally:
        os.close(fd)


def test_a_killed_worker_node_fails_only_its_traces(cluster, tmp_path, capsys):
    """Three traces held by the three nodes' tasks (FIFOs whose writer waits), a node removed while they wait:
    the trace its task held fails in one line naming it and its node, the batch goes on, and every other
    trace reports; exit 2 (a failed trace)."""
    c, workers = cluster
    data = ZOO[0].read_bytes()
    fifos = [tmp_path / f"rank-{i}.json.gz" for i in range(3)]
    opened, release = [threading.Event() for _ in fifos], threading.Event()
    for f, o in zip(fifos, opened):
        os.mkfifo(f)
        threading.Thread(target=_feed, args=(f, data, o, release), daemon=True).start()

    def kill_when_held() -> None:
        for o in opened:
            o.wait(120)
        c.remove_node(workers[0], allow_graceful=False)
        time.sleep(1)
        release.set()
    threading.Thread(target=kill_when_held, daemon=True).start()
    code, out, err = _run(capsys, *fifos, ZOO[1], "--format", "json", "--engine", "ray", "--address", c.address,
                          "--workers", "3", env={"NONGEMM_MAX_MEMORY": BUDGET})
    release.set()
    d = json.loads(out)
    assert code == 2, err
    assert len(d["failed"]) == 1, d["failed"]
    bad = d["failed"][0]
    assert bad["trace"] in map(str, fifos) and "Ray node ended" in bad["error"], bad
    assert [line for line in err.splitlines() if "error" in line] == [f"nongemm-trace: error: {bad['error']}"]
    assert sorted(t["trace"] for t in d["traces"]) == sorted({*map(str, fifos), str(ZOO[1])} - {bad["trace"]})
    assert d["combined"]["traces"] == 3


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip("FIFOs and the memory guard are Linux's")
