"""Every reproducer of ../shared/fuzz/hostile (inputs that once hung, blew up memory or ended in
"unexpected failure") ends in time and memory with a sane report or one line, on the C path and
the Python path (``NONGEMM_NATIVE=off``).

The files are analysed as they are; the generators (S1/S2 gzip bombs, S13 distinct names) are run
at test time at sizes that keep the suite fast, with a chunk size small enough that a cutter that
rescans from the chunk's start would need tens of GB of scanning (the subprocess timeout, far
above the linear run's time, turns that into a failure instead of a hang). Nothing here asserts a
speed: the timeouts only stop what would not end.

Baselines through ``check`` (S11 baseline-inf, S12) and the int64 sum of S5 are judged in
tests/test_hostile_gates.py, batches (S7) in tests/test_batch.py, output escaping (S8-S10
renderings) in tests/test_untrusted_names.py; their inputs are analysed here too where they are traces.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import REPO, SHARED, missing

HOSTILE = SHARED.parent / "fuzz" / "hostile"
#: inputs judged elsewhere only (none: every file is analysed here too)
OTHERS: dict[str, str] = {}
#: generous: each run takes a few seconds; a quadratic one would take minutes
TIMEOUT_S = 240
#: no reproducer may need more than this much memory (the largest generated input is 16 MB)
MAX_RSS_BYTES = 3 << 30
PATHS = {"C": {}, "Python": {"NONGEMM_NATIVE": "off"}}


def _files() -> list[Path]:
    if not HOSTILE.is_dir():
        return []
    found = [p for p in sorted(HOSTILE.rglob("*")) if p.is_file() and p.suffix != ".py"]
    return [p for p in found if p.name not in OTHERS]


def run_cli(args: list[str], env: dict[str, str] | None = None, timeout: int = TIMEOUT_S, driver: str | None = None):
    """``nongemm-trace ARGS`` (or the ``driver`` script with ARGS) in a subprocess: (exit code,
    stdout, stderr, peak RSS in bytes). The child is reaped with ``wait4``, whose resource usage is
    the child's own peak."""
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        command = ["-c", driver] if driver else ["-m", "nongemm_trace"]
        proc = subprocess.Popen([sys.executable, *command, *args], cwd=REPO, stdout=fo, stderr=fe,
                                env={**os.environ, **(env or {})})
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                proc.returncode = -9
                pytest.fail(f"nongemm-trace {' '.join(args)} did not end within {timeout} s")
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read().decode("utf-8", "replace"), fe.read().decode("utf-8", "replace")
    return proc.returncode, out, err, usage.ru_maxrss * 1024


def judge(path: Path, code: int, out: str, err: str, peak: int) -> dict | None:
    """A sane report (returned) or exactly one line naming the file that is not an unexpected failure."""
    assert peak < MAX_RSS_BYTES, f"{path.name}: peak RSS {peak / 2**30:.1f} GiB"
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1, err[-2000:]
        assert str(path) in lines[0] and "unexpected failure" not in lines[0] and "Traceback" not in err, lines[0]
        return None
    assert code == 0, err[-2000:]
    d = json.loads(out)
    total = d["gpu_time_us"]
    assert total >= 0 and d["gpu_activities"] >= 0
    key = f"{d['metric']}_time_us" if d["metric"] != "gpu" else "gpu_time_us"  # layer_time_us, node_time_us
    assert sum(c[key] for c in d["categories"]) == pytest.approx(d.get(key, total), abs=1e-3)
    assert sum(c["activities"] for c in d["categories"]) == d["gpu_activities"]
    return d


@pytest.fixture(scope="module")
def hostile_dir():
    if not HOSTILE.is_dir():
        missing(f"hostile reproducers not found at {HOSTILE}")
    return HOSTILE


#: analyses each file given in one process (one start-up for all of them), printing a JSON list of
#: [exit code, stdout, stderr] per file
_DRIVER = """
import contextlib, io, json, sys
from nongemm_trace.cli import main
results = []
for path in sys.argv[1:]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["analyze", path, "--format", "json"])
    results.append([code, out.getvalue(), err.getvalue()])
print(json.dumps(results))
"""


@pytest.mark.parametrize("engine", list(PATHS))
def test_every_reproducer_ends_in_a_report_or_one_line(hostile_dir, engine):
    files = _files()
    assert len(files) >= 20
    code, out, err, peak = run_cli([str(p) for p in files], PATHS[engine], driver=_DRIVER)
    assert code == 0, err[-2000:]
    outcomes = {}
    for path, (rc, o, e) in zip(files, json.loads(out)):
        d = judge(path, rc, o, e, peak)
        outcomes[path.name] = "report" if d is not None else e.strip()
    # the findings the refusals must name, and the reports that must come
    assert "is a view, not a table" in outcomes["S3-nsys-view-infinite.sqlite"]
    for name in ("S15-nsys-quote-in-table-name.sqlite", "S15-nsys-trigger-and-metachar-names.sqlite",
                 "S4-trt-redos-suffix.profile.json", "S4-trt-redos-foreign.profile.json", "nsys-wrong_types.sqlite",
                 "nsys-blob_names.sqlite", "ort-provider_dict.json", "trt-types.profile.json",
                 "S1-whitespace-50MB.json.gz"):
        assert outcomes[name] == "report", (name, outcomes[name])


@pytest.fixture(scope="module")
def bombs(hostile_dir, tmp_path_factory):
    """The S1/S2 generator at its smallest size (one 16 MB block of whitespace, events or string),
    each kind made once for the module."""
    made: dict[str, Path] = {}
    folder = tmp_path_factory.mktemp("bombs")

    def bomb(kind: str) -> Path:
        if kind not in made:
            out = folder / f"{kind}.json.gz"
            subprocess.run([sys.executable, str(HOSTILE / "S1-S2-make-gzip-bombs.py"), kind, "0.017", str(out)],
                           check=True, timeout=TIMEOUT_S)
            made[kind] = out
        return made[kind]
    return bomb


#: 16 KB chunks (4 KB blocks): a cutter that rescanned the stretch without a boundary after each
#: block would scan 16 MB about 4,000 times
SMALL_CHUNKS = {"NONGEMM_CHUNK_BYTES": str(16 << 10)}


@pytest.mark.parametrize("kind,engine", [("ws", "C"), ("ws", "Python"), ("str", "C"), ("str", "Python"), ("ev", "C")])
def test_gzip_bombs_stream_in_linear_time(bombs, kind, engine):
    """No boundary for 16 MB (whitespace, one string) on both paths; dense small events (a million
    copies of one kernel) on the C path (the Python path reads the same events, more slowly)."""
    path = bombs(kind)
    code, out, err, peak = run_cli(["analyze", str(path), "--format", "json"], {**PATHS[engine], **SMALL_CHUNKS})
    d = judge(path, code, out, err, peak)
    assert d is not None  # each bomb is a valid trace
    if kind == "ev":  # one event repeated: exact duplicates, counted once
        assert d["gpu_activities"] == 1
    if kind == "str":  # a 16 MB kernel name is cut (and the kernel kept)
        assert d["gpu_activities"] == 1 and any(w["code"] == "long_names" for w in d["warnings"])


def test_sixty_thousand_distinct_kernel_names(hostile_dir, tmp_path):
    """S13: each distinct name once cost about 1 ms (60,000 names: a minute per path); compiled rules
    take microseconds (docs/benchmarks.md)."""
    path = tmp_path / "names.json"
    subprocess.run([sys.executable, str(HOSTILE / "S13-make-distinct-names.py"), "60000", str(path)], check=True,
                   timeout=TIMEOUT_S)
    for engine, env in PATHS.items():
        code, out, err, peak = run_cli(["analyze", str(path), "--format", "json"], env, timeout=60)
        d = judge(path, code, out, err, peak)
        assert d["gpu_activities"] == 60000, engine


def test_long_hostile_layer_names_end(tmp_path):
    """TensorRT layer names that made two regexes rescan the rest of the name from each position
    (S4 at five times its size): parsed in one pass now."""
    doc = [{"count": 1},
           {"name": "_1" * 200_000 + "x", "averageMs": 1},
           {"name": "{ForeignNode[" * 30_000, "averageMs": 1},
           {"name": "Conv" + " " * 200_000 + "+ Relu_3", "averageMs": 1}]
    path = tmp_path / "long.profile.json"
    path.write_text(json.dumps(doc))
    code, out, err, peak = run_cli(["analyze", str(path), "--format", "json"], timeout=60)
    assert judge(path, code, out, err, peak)["gpu_activities"] == 3


def test_layer_name_parsing_equals_the_regexes():
    """The string scans of load/engines.py give what the regular expressions they replace gave."""
    from nongemm_trace.load import engines

    suffix = re.compile(r"(?:_output)?(?:_clone)?(?:_+\d+)+$")
    foreign = re.compile(r"\{ForeignNode\[(.*?)\]\}")
    metadata = re.compile(r"\[ONNX Layer: ([^\]]+)\]")
    split = re.compile(r"\s*\+\s*|PWN\(|[(),]")
    atoms = ["_", "1", "7", "\u0663", "_output", "_clone", "Conv", "a", "/", " ", "\n", "{ForeignNode[", "]}", "]",
             "[ONNX Layer: ", "+", "PWN(", "(", ")", ",", "...", "\t"]
    rnd = random.Random(32)
    for _ in range(20000):
        s = "".join(rnd.choice(atoms) for _ in range(rnd.randint(0, 12)))
        assert engines._strip_suffix(s) == suffix.sub("", s), s
        assert engines._foreign_regions(s) == [(m.start(), m.end(), m.group(1)) for m in foreign.finditer(s)], s
        assert engines._metadata_nodes(s) == metadata.findall(s), s
        assert [p.strip() for p in engines._SPLIT.split(s) if p.strip()] == \
            [p.strip() for p in split.split(s) if p and p.strip()], s


def test_hostile_mangled_names_tokenize_in_one_pass():
    """A mangled name of length prefixes and identifiers (``9a9a…``) made the demangler rescan the
    rest of the name from each prefix; a prefix of thousands of digits made ``int`` refuse it."""
    from nongemm_trace.classify.tokens import tokens

    assert tokens("_Z" + "9a" * 100_000)[:2] == ("a", "9")
    assert tokens("_Z" + "1" * 5000 + "abc") == ("z", "1" * 5000, "abc")  # no identifier: the name's own tokens
    assert tokens("_ZN7ck_tile6kentryE") == ("ck", "tile", "kentry")


def test_dense_repeats_are_dropped_chunk_by_chunk(bombs):
    """One event repeated a million times (S2's dense small events) is dropped chunk by chunk as it
    is read: the tables never hold more than a row per chunk, so the load stays inside a budget the
    JSON's events as table rows would pass five times over, on both paths, and says how many."""
    path = bombs("ev")
    for engine, env in PATHS.items():
        code, out, err, peak = run_cli(["analyze", str(path), "--format", "json"],
                                       {**env, **SMALL_CHUNKS, "NONGEMM_MAX_MEMORY": str(20 << 20)})
        d = judge(path, code, out, err, peak)
        assert d is not None and d["gpu_activities"] == 1, (engine, err)
        dup = [w["count"] for w in d["warnings"] if w["code"] == "duplicate_activities"]
        assert dup and dup[0] > 100_000, engine


def test_dense_events_past_the_memory_budget_are_one_line(tmp_path):
    """Dense small events that are not repeats (each kernel at its own time) cost more memory as
    tables than as JSON: the streamed load counts its tables against NONGEMM_MAX_MEMORY and refuses
    in one line once past it, on both paths."""
    path = tmp_path / "dense.json"
    with open(path, "w") as f:
        f.write('{"traceEvents": [')
        f.write(",\n".join(f'{{"ph":"X","cat":"kernel","name":"void k<1>(int)","pid":0,"tid":7,"ts":{i},"dur":1,'
                           f'"args":{{"device":0,"stream":7,"correlation":{i}}}}}' for i in range(300_000)))
        f.write("]}")
    for engine, env in PATHS.items():
        code, out, err, peak = run_cli(["analyze", str(path), "--format", "json"],
                                       {**env, "NONGEMM_MAX_MEMORY": str(20 << 20)})
        assert judge(path, code, out, err, peak) is None, engine
        assert "NONGEMM_MAX_MEMORY" in err, engine


def test_the_default_budget_counts_the_page_cache_it_can_drop(tmp_path):
    """The default budget is a share of the memory the kernel can hand out (``MemAvailable``: free
    pages plus the page cache), not of free pages alone: a trace just written sits in the page
    cache, and a budget of free pages refused a 10 GB trace that fits a 24 GB machine."""
    from nongemm_trace.load import budget

    meminfo = Path("/proc/meminfo")
    if not meminfo.exists():
        pytest.skip("no /proc/meminfo")
    fields = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in meminfo.read_text().splitlines()
              if line.split()[1:2] and line.split()[1].isdigit()}
    free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    got = budget.available_memory()
    room = budget._cgroup_room()
    want = fields["MemAvailable"] if room is None else min(fields["MemAvailable"], room)
    assert abs(got - want) <= 64 << 20  # read a moment apart
    assert got >= min(free, want) - (64 << 20)
    assert abs(budget.max_memory() - max(256 << 20, got * budget.DEFAULT_FRACTION)) <= 64 << 20


def test_nsys_lambda_names_are_renamed_in_one_pass():
    """``[lambda(…) (instance N)]`` in an Nsight kernel name: the regular expression rescanned to the
    next ``)`` from every opening (160 KB of openings: 22 s); the scan gives its answers in one pass."""
    from nongemm_trace.load.nsys import _lambdas

    ref = re.compile(r"\[lambda\(([^)]*)\) \(instance (\d+)\)\]")
    atoms = ["[lambda(", ")", " (instance ", "1", "2", ")]", "int", "(", "]", "x", " "]
    rnd = random.Random(7)
    for _ in range(20000):
        s = "".join(rnd.choice(atoms) for _ in range(rnd.randint(0, 10)))
        assert _lambdas(s) == ref.sub(r"{lambda(\1)#\2}", s), s
    code = ("from nongemm_trace.load.nsys import normalize_kernel_name as n; "
            "assert n('[lambda(' * 200000 + '[lambda(int) (instance 3)]').endswith('[lambda(int)#3}')")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)
