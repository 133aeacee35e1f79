"""The structure-aware tier of bench/fuzz.py: inputs built to defeat a bound, not a parser.

The byte-level tiers mutate small slices of real traces; what made time and memory grow without
bound (issue #42) was structure at scale: ops nested thousands deep, step ranges that all overlap,
a gzip file of many members, a device or FIFO as the input. Each input here is drawn from those
shapes at a random size and analysed by the command line (C path and Python path, each in a
process of its own) under a memory budget, and judged:

* it ends within a time linear in its size (``LIMIT_S + PER_UNIT_S`` per op, step or member: the
  1 ms a nesting level of the old code fails it at a few thousand levels), and its peak RSS stays
  under the budget plus the process's fixed floor;
* the outcome is a report whose categories sum to its total and which counts what the generator
  put in (every kernel, the outermost step holding all of them), or one line naming the file that
  is not an "unexpected failure".

    python3 bench/fuzz.py --tier structure --seconds 30 --out /tmp/nongemm-fuzz-structure
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from nongemm_trace.core.memory_guard import SANITIZER_FACTOR

ROOT = Path(__file__).resolve().parent.parent
#: a run's budget (NONGEMM_MAX_MEMORY) and what its peak may reach (the budget plus the floor; on a
#: sanitizer build, whose shadow memory and quarantine the watchdog allows for, that times its factor)
BUDGET = 256 << 20
PEAK_BYTES = (BUDGET + (400 << 20)) * (SANITIZER_FACTOR if os.environ.get("NONGEMM_EXT_DIR") else 1)
#: the time an input may take: a start-up share plus a linear share per unit of its size
LIMIT_S, PER_UNIT_S = 20.0, 300e-6
PATHS = {"C": {}, "Python": {"NONGEMM_NATIVE": "off"}}


def _event(cat: str, name: str, ts: float, dur: float, tid: int = 1, **args) -> str:
    return json.dumps({"ph": "X", "cat": cat, "name": name, "pid": 0 if cat == "kernel" else 1, "tid": tid,
                       "ts": ts, "dur": dur, "args": args}, separators=(",", ":"))


def nested(rng: random.Random) -> tuple[bytes, int, dict]:
    """Ops nested ``n`` deep (a name of three, so names recur on the path), a kernel at the bottom."""
    n = rng.choice((100, 2_000, 10_000, 30_000))
    ev = [_event("cpu_op", f"aten::op{i % 3}", 1000 + i, 10 * n - 2 * i) for i in range(n)]
    ev += [_event("cuda_runtime", "cudaLaunchKernel", 1000 + n, 1, correlation=5),
           _event("kernel", "sgemm_kernel", 2000 + 10 * n, 5, correlation=5, stream=7)]
    return _doc(ev), n, {"gpu_activities": 1}


def overlapping(rng: random.Random) -> tuple[bytes, int, dict]:
    """``n`` step ranges that all overlap, over ``n`` op / launch / kernel triples."""
    n = rng.choice((100, 1_000, 5_000, 15_000))
    ev = [_event("user_annotation", f"ProfilerStep#{i}", 1000 + i, 10**7 - 2 * i) for i in range(n)]
    for i in range(n):
        ev += [_event("cpu_op", "aten::add", 2000 + i * 100, 50), _event("cuda_runtime", "cudaLaunchKernel",
                                                                          2001 + i * 100, 1, correlation=i + 1),
               _event("kernel", "elementwise_kernel", 3000 + i * 100, 40, correlation=i + 1, stream=7)]
    # the step ranges are one op, ProfilerStep* (the loader keeps their numbers apart): it holds the outermost
    # range's time, every kernel, the nested ranges of the same name not counted again
    return _doc(ev), n, {"gpu_activities": n, "outermost": ("ProfilerStep*", 40.0 * n)}


def members(rng: random.Random) -> tuple[bytes, int, dict]:
    """A trace behind ``n`` empty gzip members, or cut into one-byte members; sometimes zero padding or
    other bytes after the last member (padding is read, other bytes refused)."""
    n = rng.choice((10, 1_000, 20_000, 100_000))
    body = _doc([_event("cuda_runtime", "cudaLaunchKernel", 1000, 1, correlation=1),
                 _event("kernel", "sgemm_kernel", 1010, 5, correlation=1, stream=7)])
    if rng.random() < 0.5:
        data = gzip.compress(b"", mtime=0) * n + gzip.compress(body, mtime=0)
    else:
        data = b"".join(gzip.compress(body[i:i + 1], mtime=0) for i in range(len(body)))
        n = len(body)
    tail = rng.choice((b"", b"", b"\x00" * rng.randint(1, 5000), b"garbage"))
    return data + tail, n, ({"gpu_activities": 1} if not tail.strip(b"\x00") else {"refused": True})


def _doc(events: list[str]) -> bytes:
    return ('{"traceEvents":[' + ",".join(events) + "]}").encode()


SHAPES = {"nesting depth": nested, "overlapping ranges": overlapping, "gzip members": members}


def _run(args: list[str], env: dict[str, str], timeout: float) -> tuple[int, str, str, int, float]:
    """The command in a process of its own: (exit code, stdout, stderr, peak RSS, seconds); -9 past ``timeout``."""
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "nongemm_trace", *args], cwd=ROOT, stdout=fo, stderr=fe,
                                env=env)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > timeout:
                proc.kill()
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        code = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        return (code, fo.read().decode("utf-8", "replace"), fe.read().decode("utf-8", "replace"),
                usage.ru_maxrss * 1024, time.monotonic() - start)


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {**os.environ, **extra, "NONGEMM_MAX_MEMORY": str(BUDGET)}
    path = [p for p in (os.environ.get("NONGEMM_EXT_DIR"), str(ROOT), os.environ.get("PYTHONPATH")) if p]
    env["PYTHONPATH"] = os.pathsep.join(path)  # the sanitizer build where one is asked for
    return env


def judge(path: Path, result: tuple[int, str, str, int, float], limit: float, want: dict) -> str | None:
    """None when the run ended well, else why not."""
    code, out, err, peak, secs = result
    if code == -9:
        return f"did not end within {limit:.0f} s"
    if peak > PEAK_BYTES:
        return f"peak RSS {peak >> 20} MiB over {PEAK_BYTES >> 20} MiB"
    if code == 2:
        lines = err.strip().splitlines()
        if len(lines) != 1 or str(path) not in lines[0] or "unexpected failure" in lines[0]:
            return f"not one line naming the file: {err[-300:]!r}"
        if "timed out" in lines[0]:
            return f"did not end within {limit:.0f} s (--timeout)"
        return None if want.get("refused") else f"refused: {lines[0][-200:]}"
    if code != 0:
        return f"exit {code}: {err[-300:]!r}"
    if want.get("refused"):
        return "a report where bytes after the data must be refused"
    d = json.loads(out)
    if abs(sum(c["gpu_time_us"] for c in d["categories"]) - d["gpu_time_us"]) > 1e-3:
        return "categories do not sum to the total"
    if d["gpu_activities"] != want.get("gpu_activities", d["gpu_activities"]):
        return f"{d['gpu_activities']} activities, not {want['gpu_activities']}"
    if "outermost" in want:
        name, us = want["outermost"]
        got = next((o["gpu_time_us"] for o in d["ops"] if o["op"] == name), None)
        if got is None or abs(got - us) > 1e-3:
            return f"{name} holds {got} us, not {us}"
    return None


def _non_regular(rng: random.Random, folder: Path) -> tuple[Path, int, dict, threading.Thread | None]:
    """A link to /dev/zero, a FIFO fed one document, or a FIFO fed events forever."""
    kind = rng.choice(("zero", "fifo-doc", "fifo-forever"))
    path = folder / f"{kind}.json"
    if kind == "zero":
        path.symlink_to("/dev/zero")
        return path, 1, {"refused": True}, None
    os.mkfifo(path)
    body = _doc([_event("kernel", "sgemm_kernel", i, 1, stream=7) for i in range(1000)])

    def feed() -> None:
        try:
            with open(path, "wb") as fh:
                if kind == "fifo-doc":
                    fh.write(body)
                    return
                fh.write(b'{"traceEvents":[')
                one = (_event("kernel", "k", 1, 1, stream=7) + ",").encode() * 1000
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    fh.write(one)
        except OSError:
            pass
    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    return path, 1, ({"gpu_activities": 1000} if kind == "fifo-doc" else {"refused": True}), writer


def main(seconds: float, out: str, seed: int) -> int:
    """Structured inputs until ``seconds`` pass; failures kept under OUT/failures/; one JSON line of totals."""
    rng = random.Random(seed)
    keep = Path(out) / "failures"
    keep.mkdir(parents=True, exist_ok=True)
    totals = {"tier": "structure", "inputs": 0, "runs": 0, "failures": 0, "by_shape": {}}
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        shape = rng.choice([*SHAPES, "non-regular input"])
        with tempfile.TemporaryDirectory(prefix="nongemm-structure-") as tmp:
            folder = Path(tmp)
            writer = None
            if shape == "non-regular input":
                if not os.path.exists("/dev/zero"):
                    continue
                path, units, want, writer = _non_regular(rng, folder)
                engines = {"C": {"NONGEMM_MAX_TRACE_BYTES": str(32 << 20)}}
            else:
                data, units, want = SHAPES[shape](rng)
                path = folder / ("in.json.gz" if data[:2] == b"\x1f\x8b" else "in.json")
                path.write_bytes(data)
                engines = PATHS
            limit = LIMIT_S + PER_UNIT_S * units
            totals["inputs"] += 1
            totals["by_shape"][shape] = totals["by_shape"].get(shape, 0) + 1
            for engine, extra in engines.items():
                result = _run(["analyze", str(path), "--format", "json", "--timeout", str(limit)], _env(extra),
                              limit + 10)
                totals["runs"] += 1
                why = judge(path, result, limit, want)
                if why:
                    totals["failures"] += 1
                    name = f"{seed}-{totals['inputs']}-{shape.replace(' ', '-')}-{engine}"
                    if path.is_file():
                        (keep / (name + "".join(path.suffixes))).write_bytes(path.read_bytes())
                    (keep / f"{name}.txt").write_text(f"{shape}, {units} units, {engine}: {why}\n")
            if writer is not None:
                try:  # a writer still waiting for a reader gets one, then its pipe breaks
                    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
                    os.close(fd)
                except OSError:
                    pass
                writer.join(5)
    totals["seconds"] = round(time.monotonic() - start, 1)
    print(json.dumps(totals))
    return 1 if totals["failures"] else 0
