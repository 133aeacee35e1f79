"""Every command's output on every shared trace equals the digest recorded in tests/data/golden.json
(``python3 tests/golden.py record`` writes it; see that file). A refactor must change no byte;
a change of output is re-recorded in the commit that makes it, and said why.

The commands run through the real command line in process; each trace is loaded once for all of
them (the :class:`Analysis` objects are kept for the test), which is also what a pipeline holding
one analysis gets."""

from __future__ import annotations

import json

import pytest

import golden
import nongemm_trace.analysis as analysis_mod
from conftest import shared

RECORDED = json.loads(golden.GOLDEN.read_text()) if golden.GOLDEN.exists() else {}


@pytest.fixture(scope="module")
def shared_analyses():
    """``Analysis.of`` memoised by (path, taxonomy): one load per trace for every command."""
    kept: dict[tuple[str, str], analysis_mod.Analysis] = {}
    real_of = analysis_mod.Analysis.of.__func__

    def of(cls, source, **options):
        if isinstance(source, analysis_mod.Analysis) or options.get("progress"):
            return real_of(cls, source, **options)
        key = (str(source), str(options.get("taxonomy") or "default"))
        if key not in kept:
            while len(kept) >= 3:  # a trace, its compare partner (the next trace) and one more
                kept.pop(next(iter(kept)))
            kept[key] = real_of(cls, source, **{**options, "keep_python": True})
        return real_of(cls, kept[key], **options)

    mp = pytest.MonkeyPatch()
    mp.setattr(analysis_mod.Analysis, "of", classmethod(of))
    yield
    mp.undo()


def test_every_shared_trace_is_recorded():
    shared()
    names = {p.relative_to(golden.SHARED).as_posix() for p in golden.shared_traces()}
    assert names == set(RECORDED), "re-record tests/data/golden.json: the shared traces changed"


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_outputs_unchanged(name, shared_analyses, monkeypatch):
    shared()
    monkeypatch.chdir(golden.ROOT.parent)
    traces = golden.shared_traces()
    i = [p.relative_to(golden.SHARED).as_posix() for p in traces].index(name)
    outputs = golden.commands(traces[i], traces[(i + 1) % len(traces)])
    got = {cmd: golden._digest(data) for cmd, data in outputs.items()}
    changed = sorted(cmd for cmd in RECORDED[name] if got.get(cmd) != RECORDED[name][cmd])
    assert not changed, f"{name}: output changed for {', '.join(changed)}"
