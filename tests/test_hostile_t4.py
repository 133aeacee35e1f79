"""The reproducers of ../shared/fuzz/hostile-t4 that test the bounds of issue #42 (items 2-4): each
ends in time and memory, with a sane report or one line naming the file, on the C path and the
Python path (``NONGEMM_NATIVE=off``).

* M1 overlapping steps (rows x depth in the inclusive-time table: 4.2 GB from 323 KB),
* N1 ops nested deep (1 ms a level), K6 a million tiny steps (here 30,000),
* G1 a gzip file of many members (quadratic), bytes after a gzip stream, after the JSON value,
* R1 /dev/zero as a trace (through a link), U2 a taxonomy that extends /dev/zero, a device spec and
  a FIFO fed forever: non-regular inputs through the byte cap.

Generators run at test time at sizes that keep the suite fast (a few seconds each); the peak RSS
bounds are far below what the unbounded code reached at the same sizes. Nothing here writes to
/dev: /dev/zero is only read, through links made in the test's folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import polars as pl
import pytest
from conftest import REPO, SHARED, missing, raw_events, shared
from test_hostile_inputs import PATHS, judge

import nongemm_trace

HOSTILE_T4 = SHARED.parent / "fuzz" / "hostile-t4"
#: every run here stays far below this (the unbounded code: 4 GB for M1 at 10,000 steps)
PEAK_BYTES = 700 << 20
TIMEOUT_S = 120


@pytest.fixture(scope="module")
def t4():
    if not HOSTILE_T4.is_dir():
        missing(f"hostile-t4 reproducers not found at {HOSTILE_T4}")
    return HOSTILE_T4


def run_measured(args: list[str], env: dict[str, str] | None = None, timeout: float = TIMEOUT_S,
                 driver: str | None = None) -> tuple[int, str, str, int]:
    """``nongemm-trace ARGS`` (or ``driver``) in a subprocess: (exit code, stdout, stderr, peak RSS). The
    peak is the child's own high-water mark (``VmHWM``, read every 10 ms while it runs): ``wait4``'s
    figure also counts the memory of the process it was forked from (a test worker that once held
    860 MB gave every child 860 MB)."""
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        command = ["-c", driver] if driver else ["-m", "nongemm_trace"]
        proc = subprocess.Popen([sys.executable, *command, *args], cwd=REPO, stdout=fo, stderr=fe,
                                env={**os.environ, **(env or {})})
        status_file, peak, deadline = f"/proc/{proc.pid}/status", 0, time.monotonic() + timeout
        while proc.poll() is None:
            try:
                with open(status_file) as fh:
                    hwm = next((line for line in fh if line.startswith("VmHWM:")), None)
                if hwm:
                    peak = max(peak, int(hwm.split()[1]) * 1024)
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                pytest.fail(f"nongemm-trace {' '.join(args)} did not end within {timeout} s")
            time.sleep(0.01)
        fo.seek(0)
        fe.seek(0)
        return proc.returncode, fo.read().decode("utf-8", "replace"), fe.read().decode("utf-8", "replace"), peak


def _make(t4: Path, script: str, n: int, out: Path) -> Path:
    subprocess.run([sys.executable, str(t4 / script), str(n), str(out)], check=True, timeout=TIMEOUT_S)
    return out


def _analyze(path: Path, env: dict[str, str], *more: str) -> tuple[dict | None, str, int]:
    code, out, err, peak = run_measured(["analyze", str(path), "--format", "json", *more], env)
    assert peak < PEAK_BYTES, f"{path.name}: peak RSS {peak / 2**20:.0f} MiB"
    return judge(path, code, out, err, peak), err, peak


@pytest.mark.parametrize("engine", list(PATHS))
def test_overlapping_steps_are_linear_in_memory(t4, tmp_path, engine):
    """M1: 8,000 steps each spanning the trace over 8,000 kernels, under a 1 GB budget: a report."""
    path = _make(t4, "M1-make-overlapping-steps.py", 8000, tmp_path / "m1.json.gz")
    d, _, _ = _analyze(path, {**PATHS[engine], "NONGEMM_MAX_MEMORY": "1e9"})
    assert d is not None and d["gpu_activities"] == 8000
    step0 = next(o for o in d["ops"] if o["op"] == "ProfilerStep*")  # every step range: one row
    assert step0["gpu_time_us"] == pytest.approx(8000 * 40)  # the outermost step holds every kernel


@pytest.mark.parametrize("engine", list(PATHS))
def test_nesting_depth_is_linear(t4, tmp_path, engine):
    """N1: 30,000 ops, each inside the previous one (30 s at 1 ms a level before)."""
    path = _make(t4, "N1-make-nested-ops.py", 30_000, tmp_path / "n1.json.gz")
    d, _, _ = _analyze(path, PATHS[engine])
    assert d is not None and d["gpu_activities"] == 1
    assert {o["op"] for o in d["ops"] if o["gpu_time_us"] == 5.0} >= {"aten::lin0", "aten::lin1", "aten::lin2"}


@pytest.mark.parametrize("engine", list(PATHS))
def test_many_gzip_members_are_linear(t4, tmp_path, engine):
    """G1: 100,000 empty members before the trace (each member's end copied the rest of the input)."""
    path = _make(t4, "G1-make-gzip-members.py", 100_000, tmp_path / "g1.json.gz")
    d, _, _ = _analyze(path, PATHS[engine])
    assert d is not None and d["gpu_activities"] == 1


def _k6_shape(path: Path, n: int) -> Path:
    """K6's shape at ``n`` steps: ``ProfilerStep#0..n-1`` of 9 us, one kernel every 100 steps."""
    ev = [f'{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{i}","pid":1,"tid":1,"ts":{1000 + 10 * i},'
          f'"dur":9,"args":{{}}}}' for i in range(n)]
    ev += [f'{{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":{1002 + 10 * i},"dur":5,'
           f'"args":{{"stream":7}}}}' for i in range(0, n, 100)]
    path.write_text('{"traceEvents":[' + ",".join(ev) + "]}")
    return path


@pytest.mark.parametrize("engine", list(PATHS))
def test_thirty_thousand_steps(tmp_path, engine):
    """K6 (3 %): 30,000 steps of 9 us, every one in the JSON (written in batches: 60,000 op and step
    rows), 500 on the terminal."""
    path = _k6_shape(tmp_path / "k6.json", 30_000)
    d, _, _ = _analyze(path, PATHS[engine])
    assert d is not None and len(d["steps"]) == 30_000 and d["gpu_activities"] == 300
    code, out, err, peak = run_measured(["analyze", str(path)], PATHS[engine], timeout=TIMEOUT_S)
    assert code == 0 and peak < PEAK_BYTES, err
    assert "29,500 more steps" in out and out.count("ProfilerStep#") < 600


def test_bytes_after_the_data_are_refused_alike(tmp_path):
    """After a gzip stream or after the JSON value: one line naming the file; zero padding is accepted
    after either (a file system's preallocation)."""
    import gzip

    doc = b'{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,"args":{}}]}'
    cases = {"gz-garbage.json.gz": gzip.compress(doc) + b"GARBAGE" * 20, "json-garbage.json": doc + b"\n\x01garbage",
             "gz-padding.json.gz": gzip.compress(doc) + b"\x00" * 4096,
             "gz-padding-then-garbage.json.gz": gzip.compress(doc) + b"\x00" * 10 + b"x",
             "json-padding.json": doc + b"\x00" * 4096, "json-padding-then-garbage.json": doc + b"\x00" * 10 + b"x"}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    for engine, env in PATHS.items():
        for name in cases:
            d, err, _ = _analyze(tmp_path / name, env)
            if name in ("gz-padding.json.gz", "json-padding.json"):
                assert d is not None and d["gpu_activities"] == 1, (engine, err)
            else:
                assert d is None, (engine, name)


@pytest.mark.parametrize("engine", list(PATHS))
def test_dev_zero_through_a_link_is_read_to_the_cap(tmp_path, engine):
    """R1: a link to /dev/zero as the trace, a taxonomy that extends /dev/zero (U2), a device spec
    that is a link to it: each read only as far as the cap, one line naming the file."""
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    env = {**PATHS[engine], "NONGEMM_MAX_TRACE_BYTES": str(64 << 20), "NONGEMM_MAX_MEMORY": str(256 << 20)}
    d, err, _ = _analyze(zero, env, "--timeout", "60")
    assert d is None and "not a JSON trace" in err  # at its first bytes (a stream of JSON: at the cap, below)
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents":[{"ph":"X","cat":"kernel","name":"sgemm","pid":0,"tid":7,"ts":1,"dur":2,'
                     '"args":{}}]}')
    tax = tmp_path / "extends-zero.toml"
    tax.write_text(f'extends = "{zero}"\n')
    code, _, err, peak = run_measured(["analyze", str(trace), "--taxonomy", str(tax), "--format", "json"], env,
                                 timeout=TIMEOUT_S)
    assert code == 2 and peak < PEAK_BYTES and len(err.strip().splitlines()) == 1 and str(zero) in err, err
    spec = tmp_path / "spec.toml"
    spec.symlink_to("/dev/zero")
    code, _, err, peak = run_measured(["flops", str(trace), "--device-spec", str(spec), "--format", "json"], env,
                                 timeout=TIMEOUT_S)
    assert code == 2 and peak < PEAK_BYTES and len(err.strip().splitlines()) == 1 and str(spec) in err, err


def test_a_fifo_fed_forever_is_read_to_the_cap(tmp_path):
    """A FIFO whose writer never stops (valid events, forever) is a stream: read to the cap, one line."""
    fifo = tmp_path / "fed.json"
    os.mkfifo(fifo)
    stop = threading.Event()

    def feed() -> None:
        event = b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1,"args":{}},' * 1000
        try:
            with open(fifo, "wb") as fh:
                fh.write(b'{"traceEvents":[')
                while not stop.is_set():
                    fh.write(event)
        except (BrokenPipeError, OSError):
            pass
    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        d, err, _ = _analyze(fifo, {"NONGEMM_MAX_TRACE_BYTES": str(48 << 20)}, "--timeout", "90")
        assert d is None and "more than" in err and str(fifo) in err
    finally:
        stop.set()
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a writer still waiting to open gets a reader
        writer.join(10)
        os.close(fd)


def test_a_fifo_nobody_writes_ends_at_the_timeout(tmp_path):
    """--timeout covers the open and the read: a FIFO with no writer, as the trace and as a taxonomy."""
    fifo = tmp_path / "silent.json"
    os.mkfifo(fifo)
    code, _, err, _ = run_measured(["analyze", str(fifo), "--timeout", "2", "--format", "json"], timeout=60)
    assert code == 2 and "timed out" in err and len(err.strip().splitlines()) == 1
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents":[]}')
    toml = tmp_path / "silent.toml"
    os.mkfifo(toml)
    code, _, err, _ = run_measured(["analyze", str(trace), "--taxonomy", str(toml), "--timeout", "2",
                                    "--format", "json"], timeout=60)
    assert code == 2 and "timed out" in err and len(err.strip().splitlines()) == 1


def test_the_memory_budget_ends_the_process_in_one_line(t4, tmp_path):
    """NONGEMM_MAX_MEMORY is a cap on the process: the loader's count of its tables refuses first where
    it can; any memory past the budget plus the fixed floor, in any stage, ends the process in one
    line naming the file and the figure, exit 2 (the watchdog, driven here by an allocation)."""
    path = _make(t4, "M1-make-overlapping-steps.py", 20_000, tmp_path / "m1.json.gz")
    code, out, err, _ = run_measured(["analyze", str(path), "--format", "json"], {"NONGEMM_MAX_MEMORY": "1"},
                                timeout=TIMEOUT_S)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and str(path) in lines[0] and "NONGEMM_MAX_MEMORY" in lines[0]
    driver = ("import time\nfrom nongemm_trace.core import memory_guard as g\ng.note_input('in.json')\n"
              "g.start(1)\nheld = bytearray(g.FLOOR_BYTES + (64 << 20))\ntime.sleep(30)\n")
    code, out, err, peak = run_measured([], driver=driver, timeout=60)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("nongemm-trace: error: in.json: needs more than")


def test_inflate_gives_every_byte_whatever_the_cuts():
    """The windowed feed of gzip members loses no byte: any input cut, any output block, many members,
    padding after them; a stream cut short is still refused."""
    import gzip
    import random

    from nongemm_trace.errors import TraceError
    from nongemm_trace.load.source import _inflate

    rng = random.Random(7)
    raw = bytes(rng.getrandbits(8) for _ in range(6_000)) * 2 + b"x" * 30_000
    parts = [raw[:20_000], b"", raw[20_000:20_001], raw[20_001:]]
    data = b"".join(gzip.compress(p, mtime=0) for p in parts) + b"\x00" * 33
    for block in (1, 7, 4096, 1 << 20):
        for cut in (1, 13, 1000, 1 << 20):
            pieces = [data[i:i + cut] for i in range(0, len(data), cut)]
            assert b"".join(_inflate(Path("x"), iter(pieces), 1 << 40, block)) == raw, (block, cut)
    with pytest.raises(TraceError, match="truncated gzip"):
        b"".join(_inflate(Path("x"), iter([gzip.compress(raw)[:-10]]), 1 << 40, 4096))



def test_the_address_space_limit_is_set_except_under_a_sanitizer():
    """The hard limit (RLIMIT_AS) is the last guard of the budget, but a sanitizer runtime reserves
    terabytes of shadow address space: under one (LD_PRELOAD naming libasan, as bench/sanitize.sh
    runs CI's fuzz tiers) the limit would abort every run, so it is left unset there."""
    import resource

    from nongemm_trace.core import memory_guard
    driver = ("import resource\nfrom nongemm_trace.core import memory_guard as g\ng.start(1 << 30, hard=True)\n"
              "print(resource.getrlimit(resource.RLIMIT_AS)[0])\n")
    code, out, _, _ = run_measured([], driver=driver, timeout=60)
    assert code == 0 and int(out) == (1 << 30) + memory_guard.FLOOR_BYTES + memory_guard.AS_HEADROOM
    sanitized = "import os\nos.environ['LD_PRELOAD'] = 'libasan.so'\n" + driver
    code, out, _, _ = run_measured([], driver=sanitized, timeout=60)
    assert code == 0 and int(out) == resource.RLIM_INFINITY


def test_the_watchdog_allows_for_a_sanitizer_runtime():
    """Under a sanitizer the resident set holds shadow memory, red zones and freed blocks in
    quarantine (CI's structure tier was stopped at 0.54 GB by a 0.27 GB budget on a trace that
    peaks at 145 MB plainly): the watchdog's line is then SANITIZER_FACTOR times the plain one."""
    from nongemm_trace.core import memory_guard
    driver = ("from nongemm_trace.core import memory_guard as g\ng.start(1 << 30)\n"
              "print(g._state['limit'] + g.FLOOR_BYTES)\n")
    code, plain, _, _ = run_measured([], driver=driver, timeout=60)
    assert code == 0
    code, sanitized, _, _ = run_measured([], driver="import os\nos.environ['LD_PRELOAD'] = 'libasan.so'\n" + driver,
                                         timeout=60)
    assert code == 0 and int(sanitized) == int(plain) * memory_guard.SANITIZER_FACTOR


def test_step_ranges_are_one_op_name_and_keep_their_step_names(tmp_path):
    """K6's shape (many ``ProfilerStep#N``): the loader keeps one op name for them, ``ProfilerStep*``, and
    each number in ``step_number`` (a categorical text lives as long as the process: a million step names
    held 110 MB and made every table keyed by name a million rows long); the steps keep their names
    and the op table has one row per category for them, as ``torch.profiler``'s ``key_averages``."""
    from nongemm_trace.load import load_trace

    path = _k6_shape(tmp_path / "steps.json", 5_000)
    for engine in PATHS:
        with pytest.MonkeyPatch.context() as mp:
            for k, v in PATHS[engine].items():
                mp.setenv(k, v)
            ops = load_trace(path).ops
        assert ops["name"].cast(pl.String).unique().to_list() == ["ProfilerStep*"]
        assert ops["step_number"].sort().to_list() == list(range(5_000))
    d = nongemm_trace.analyze(path).to_dict()
    assert [s["name"] for s in d["steps"]] == [f"ProfilerStep#{i}" for i in range(5_000)]
    assert {o["op"] for o in d["ops"]} == {"ProfilerStep*"} and sum(o["calls"] for o in d["ops"]) == 5_000


def test_a_step_number_past_int64_keeps_its_name(tmp_path):
    """``ProfilerStep#`` followed by 24 digits: no Int64 holds the number, so that range keeps its own
    name (was "unexpected failure" from the cast); both loader paths give the same two steps."""
    path = tmp_path / "big.json"
    path.write_text('{"traceEvents":[{"ph":"X","cat":"user_annotation","name":"ProfilerStep#' + "9" * 24
                    + '","pid":1,"tid":1,"ts":1000,"dur":9,"args":{}},{"ph":"X","cat":"user_annotation",'
                    '"name":"ProfilerStep#2","pid":1,"tid":1,"ts":1010,"dur":9,"args":{}}]}')
    for engine in PATHS:
        d, _, _ = _analyze(path, PATHS[engine])
        assert d is not None and [s["name"] for s in d["steps"]] == ["ProfilerStep#" + "9" * 24, "ProfilerStep#2"]


def test_a_real_trace_keeps_every_step_name():
    """The H200 DDP rank 0 trace: every ``ProfilerStep#N`` of the file is a step of that name, in order,
    while the op table holds one ``ProfilerStep*`` name for them."""
    path = shared("h200x2", "bert_ddp_train_rank0.json.gz")
    raw = sorted((e["ts"], e["name"]) for e in raw_events(str(path))
                 if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#"))
    d = nongemm_trace.analyze(path).to_dict()
    assert [s["name"] for s in d["steps"]] == [n for _, n in raw] and raw
    assert not any(o["op"].startswith("ProfilerStep#") for o in d["ops"])
    assert any(o["op"] == "ProfilerStep*" for o in d["ops"])
