"""Shared fixtures: where the real traces are, and an independent raw-JSON reader.

The shared traces live in ``../shared/traces`` next to the repository (override
with NONGEMM_SHARED_TRACES). Tests that need them are skipped, loudly, when the
folder is absent (and fail under ``CI=true`` on a machine that has ``../shared``); tests on
``sample_traces/`` always run.
"""

from __future__ import annotations

import gc
import gzip
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import NoReturn

import pytest

# no periodic progress lines in the tests' output (commands/progress.py); a test that wants them sets it
os.environ.setdefault("NONGEMM_PROGRESS_S", "inf")

REPO = Path(__file__).resolve().parent.parent
if os.environ.get("NONGEMM_EXT_DIR"):  # a sanitizer build of the C extensions (bench/sanitize.sh)
    import sys

    sys.path.insert(0, os.environ["NONGEMM_EXT_DIR"])
SAMPLES = REPO / "sample_traces"
SHARED = Path(os.environ.get("NONGEMM_SHARED_TRACES", REPO.parent / "shared" / "traces"))

ACTIVITY_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}


#: shared traces of which the repository ships a byte-identical copy in ``sample_traces/``
#: (``test_bundled_copies_are_the_shared_traces`` holds them equal): a test that names one runs on
#: a fresh clone without ../shared too
BUNDLED = {
    "h200/bert_base_fp32_bs8_s128__eager.json.gz": "bert_base_fp32_bs8_s128__eager.json.gz",
    "h200/gpt2_fp32_bs8_s128__compiled.json.gz": "gpt2_fp32_bs8_s128__compiled.json.gz",
    "h200/llama_1b_bf16_bs1_s2048__compiled_cudagraphs.json.gz": "llama_1b_bf16_bs1_s2048__compiled_cudagraphs.json.gz",
    "external/hta/trace_file_list__inference_rank_1.json.gz": "legacy_inference_rank_1.json.gz",
    "external/tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz":
        "h100__gaunernst_bert-small-uncased__1016001.json.gz",
}


def _ci() -> bool:
    """A run that must not pass by skipping: ``CI=true`` on a machine that has the shared folder (the
    parent of the traces' folder: ``../shared``, or NONGEMM_SHARED_TRACES's). A newcomer's own CI job on a
    fresh clone (GitHub Actions sets ``CI=true``) has none, and skips as their laptop does; ``.ci/run``
    checks that its ``../shared/traces`` is there before the suite runs."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes") and SHARED.parent.is_dir()


def missing(reason: str) -> NoReturn:
    """A file the test needs is absent: a failure where :func:`_ci` holds, else a skip with ``reason``."""
    if _ci():
        pytest.fail(f"{reason} (CI=true)")
    pytest.skip(reason)


def shared(*parts: str) -> Path:
    """A file of the shared traces, or its bundled copy (BUNDLED) when ../shared is absent.

    Called inside a test (never at import: a module-level skip errors the whole file). Without the
    file the test is skipped with the path as its reason, and fails under ``CI=true`` where the shared
    folder exists (CI must not pass by skipping; :func:`_ci`)."""
    p = SHARED.joinpath(*parts)
    if p.exists():
        return p
    copy = BUNDLED.get("/".join(parts))
    if copy is not None:
        return SAMPLES / copy
    missing(f"needs the shared traces: {p} not found (NONGEMM_SHARED_TRACES=DIR)")


#: the reproducers of inputs that ended badly (../shared/fuzz/hostile and its README)
HOSTILE = SHARED.parent / "fuzz" / "hostile"
#: those of the fourth audit (../shared/fuzz/hostile-t4 and its README)
HOSTILE_T4 = SHARED.parent / "fuzz" / "hostile-t4"


def hostile(name: str, folder: Path = HOSTILE) -> Path:
    """One reproducer of ../shared/fuzz/hostile, or of another ``folder`` of them (skipped when
    absent, failed under CI=true)."""
    p = folder / name
    if not p.exists():
        missing(f"hostile reproducers not found at {folder}")
    return p


def kineto_traces() -> list[Path]:
    """Every Kineto trace the core must load (h200, h200x2, external tracelens and hta)."""
    out: list[Path] = []
    for sub in ("h200", "h200x2", "external/tracelens", "external/hta"):
        d = SHARED / sub
        if d.is_dir():
            out += sorted(p for p in d.glob("*.json.gz") if not p.name.endswith(".golden.json.gz"))
    return out


def trace_ids(paths):
    return [p.name.replace(".json.gz", "")[:60] for p in paths]


@pytest.fixture(autouse=True)
def _no_terminal_size_from_the_runner(monkeypatch):
    """pytest-xdist's workers run with COLUMNS=80 and LINES=24 in their environment, which the
    command reads as a width asked for: each test starts without them (tests that want a width
    set it themselves)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@lru_cache(maxsize=64)
def raw_events(path: str) -> tuple:
    """The file's events, read with the standard library only (independent of the library).

    Kept for the session: millions of dicts and lists, which the cyclic garbage collector would
    otherwise walk in every full collection (seconds each, five at pytest's exit). It is paused while
    they are read, and then they are moved out of its sight (``gc.freeze``); JSON holds no cycles, so
    reference counting alone frees them if the cache drops them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            doc = json.load(fh)
        ev = doc["traceEvents"] if isinstance(doc, dict) else doc
        events = tuple(ev)
    finally:
        if enabled:
            gc.enable()
    gc.freeze()
    return events


#: the test files that read the shared traces' raw events: one worker takes them all, as one unit of
#: ``--dist loadfile``, so that each worker does not read (and keep) the events of every trace again
RAW_EVENT_READERS = {"test_references.py", "test_taxonomy.py", "test_launch.py", "test_compare.py",
                     "test_linking.py", "test_cuda_sync.py"}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's ``--dist loadfile``, with the files of RAW_EVENT_READERS as one unit."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedRawEvents(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = super()._split_scope(nodeid)
            return "the raw-event readers" if Path(file).name in RAW_EVENT_READERS else file

    return SharedRawEvents(config, log)


def ns(x) -> int:
    """Kineto microseconds -> integer nanoseconds, via the decimal text (exact)."""
    from decimal import Decimal
    return int((Decimal(repr(float(x))) * 1000).to_integral_value())


def raw_activity_total_ns(path: str) -> tuple[int, int]:
    n = tot = 0
    for e in raw_events(path):
        if e.get("ph") == "X" and e.get("cat") in ACTIVITY_CATS and e.get("dur") is not None:
            n += 1
            tot += ns(e["dur"])
    return n, tot


def tricky_names_trace(tmp_path: Path, every: int) -> Path:
    """The bundled BERT sample with ``}, {`` inside every ``every``-th op name: a byte pattern
    that tempts the chunk boundary scan inside a string."""
    doc = json.loads(gzip.decompress((SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz").read_bytes()))
    for i, e in enumerate(doc["traceEvents"]):
        if e.get("cat") == "cpu_op" and i % every == 0:
            e["name"] = e["name"] + " }, {" + "x" * 50
    p = tmp_path / "tricky.json"
    p.write_text(json.dumps(doc))
    return p


def interval_union_ns(acts) -> int:
    """Length of the union of the activities' ``ts_ns``/``dur_ns`` intervals, by a plain merge (independent
    of the library): the reference for exposed communication and busy time."""
    total, cur_start, cur_end = 0, None, None
    for ts, dur in sorted(zip(acts["ts_ns"].to_list(), acts["dur_ns"].to_list())):
        if cur_end is None or ts > cur_end:
            total += 0 if cur_end is None else cur_end - cur_start
            cur_start, cur_end = ts, ts + dur
        else:
            cur_end = max(cur_end, ts + dur)
    return total + (0 if cur_end is None else cur_end - cur_start)
