"""Every command's output on every shared trace equals the digest recorded in tests/data/golden.json
(``python3 tests/golden.py record`` writes it; see that file). A refactor must change no byte;
a change of output is re-recorded in the commit that makes it, and said why.

The commands run through the real command line in process, each trace loaded once for all of
them (``golden.one_load_per_trace``); the traces are split between two worker processes, since
the rest of the suite leaves the second core idle."""

from __future__ import annotations

import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import golden
import pytest
from conftest import shared

RECORDED = json.loads(golden.GOLDEN.read_text()) if golden.GOLDEN.exists() else {}


@pytest.fixture(scope="module")
def computed() -> dict[str, dict[str, str]]:
    shared()
    if not golden.layout_ok():
        pytest.skip(f"the digests name traces as shared/traces/…; {golden.SHARED} is laid out otherwise")
    n = len(golden.shared_traces())
    halves = [list(range(0, n, 2)), list(range(1, n, 2))]  # interleaved: big and small traces on both sides
    out: dict[str, dict[str, str]] = {}
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        for part in pool.map(golden.digests, halves, [True, True]):
            out.update(part)
    return out


def test_every_shared_trace_is_recorded():
    shared()
    if not golden.layout_ok():
        pytest.skip(f"the digests name traces as shared/traces/…; {golden.SHARED} is laid out otherwise")
    names = {p.relative_to(golden.SHARED).as_posix() for p in golden.shared_traces()}
    assert names == set(RECORDED), "re-record tests/data/golden.json: the shared traces changed"


def test_every_analysis_and_model_format_is_recorded():
    """The digests cover what the registries hold (issue #44): every registered analysis on every
    trace, and every (model, format) pair of the command line, each table of a file format, on
    :data:`golden.FORMATS_TRACE`. A new analysis adds its digests with ``python3 tests/golden.py add``."""
    from nongemm_trace.analyses import specs
    from nongemm_trace.report import registered
    from nongemm_trace.vocabulary import MODEL_TABLES

    assert RECORDED, "no digests recorded"
    missing = sorted(f"{trace}: {s.name}" for trace, outs in RECORDED.items() for s in specs() if s.name not in outs)
    assert missing == [], "record them: python3 tests/golden.py add"
    pairs = {".".join(x for x in (r.model, r.format, table) if x) for r in registered()
             for table in ((MODEL_TABLES.get(r.model) or (None,)) if r.format in ("csv", "parquet") else (None,))}
    assert sorted(pairs - set(RECORDED.get(golden.FORMATS_TRACE, {}))) == [], "record them: python3 tests/golden.py add"


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_outputs_unchanged(name, computed):
    got = computed.get(name, {})
    changed = sorted(cmd for cmd in RECORDED[name] if got.get(cmd) != RECORDED[name][cmd])
    assert not changed, f"{name}: output changed for {', '.join(changed)}"


def test_adding_digests_never_changes_a_recorded_one():
    """``golden.py add`` writes the outputs not recorded yet and refuses when a recorded one differs
    or is no longer computed, so new digests cannot hide a change of output."""
    recorded = {"t": {"analyze": "a"}}
    assert golden.added(recorded, {"t": {"analyze": "a", "shapes": "s"}}) == {"t": {"analyze": "a", "shapes": "s"}}
    with pytest.raises(ValueError, match="t: analyze"):
        golden.added(recorded, {"t": {"analyze": "b", "shapes": "s"}})
    with pytest.raises(ValueError, match="t: analyze"):
        golden.added(recorded, {"t": {"shapes": "s"}})
