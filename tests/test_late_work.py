"""The host work that made a rank late to a collective (issue #45 item 3): per matched call, the last
rank's host time per op before it, beyond the other ranks' median; per rank, summed over the calls it
was last on.

On the two-H200 DDP pair and on copies of it where one rank's host was made late on purpose: a stall
in no op (the synthetic slow rank of tests/test_collectives.py) and one op that ran longer. Figures are
checked against the raw JSON read with the standard library."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from conftest import ns, raw_events, shared
from test_collectives import _batch, _shift_rank, delay_host

from nongemm_trace.metrics.late_work import OUTSIDE_OPS

R0, R1 = "bert_ddp_train_rank0.json.gz", "bert_ddp_train_rank1.json.gz"


@pytest.fixture(scope="module")
def ddp_doc(tmp_path_factory) -> dict:
    from nongemm_trace.cli import main
    out = tmp_path_factory.mktemp("late") / "ddp.json"
    assert main(["analyze", str(shared("h200x2")), "--format", "json", "--quiet", "--workers", "1",
                 "-o", str(out)]) == 0
    return json.loads(out.read_text())


def _free_syncs_ns(path: Path, lo: float, hi: float) -> int:
    """ns of ``cudaEventSynchronize`` calls in [lo, hi) (µs) under no ``cpu_op`` of their thread."""
    ev = raw_events(str(path))
    ops = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    total = 0
    for e in ev:
        if e.get("name") != "cudaEventSynchronize" or not lo <= e["ts"] < hi:
            continue
        if any(o["tid"] == e["tid"] and o["ts"] <= e["ts"] and e["ts"] + e["dur"] <= o["ts"] + o["dur"] for o in ops):
            continue
        total += ns(min(e["ts"] + e["dur"], hi)) - ns(e["ts"])
    return total


def _broadcast_window(path: Path) -> tuple[float, float]:
    """From ProfilerStep#3's start to the launch of its first broadcast kernel (µs, raw)."""
    ev = raw_events(str(path))
    (step,) = [e for e in ev if e.get("name") == "ProfilerStep#3" and e.get("cat") == "user_annotation"]
    kernel = min((e for e in ev if e.get("cat") == "kernel" and "Broadcast" in e["name"] and e["ts"] >= step["ts"]),
                 key=lambda e: e["ts"])
    (launch,) = [e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")
                 and (e.get("args") or {}).get("correlation") == kernel["args"]["correlation"]]
    return step["ts"], launch["ts"]


def test_the_late_rank_of_the_first_broadcast_was_waiting_on_its_device(ddp_doc):
    """Rank 0 reached step 3's buffer broadcast last: before it, its host sat in cudaEventSynchronize
    (under no op) longer than rank 1's did; the excess is that difference, to the ns."""
    ddp = shared("h200x2")
    (call,) = [c for c in ddp_doc["collectives"] if (c["step"], c["name"], c["index"]) == ("ProfilerStep#3",
                                                                                           "broadcast", 0)]
    assert call["last_rank"] == 0
    waits = [_free_syncs_ns(ddp / r, *_broadcast_window(ddp / r)) for r in (R0, R1)]
    top = call["late_work"][0]
    assert top["op"] == "cudaEventSynchronize"
    assert ns(top["excess_us"]) == pytest.approx(waits[0] - waits[1], abs=2)


def test_the_ranks_excesses_sum_their_calls(ddp_doc):
    """A rank's listed excess per op is at least what its calls list for that op (each call lists its
    three largest, the rank sums them all); every excess is positive; a rank never last lists none."""
    calls = ddp_doc["collectives"]
    for r in ddp_doc["ranks"]["ranks"]:
        c = r["collectives"]
        mine = [x for x in calls if x["last_rank"] == r["rank"]]
        assert (c["last"] == 0) == (not c["late_work"])
        for w in c["late_work"]:
            assert w["excess_us"] > 0
            listed = sum(x2["excess_us"] for x in mine for x2 in x["late_work"] if x2["op"] == w["op"])
            assert w["excess_us"] >= listed - 0.001 * len(mine)
    for x in calls:
        assert all(w["excess_us"] > 0 for w in x["late_work"])
        assert len(x["late_work"]) <= 3


def test_a_stall_in_no_op_is_named_as_such(tmp_path, capsys):
    """Rank 0's host stalled 100 ms at the start of step 4 (no op recorded): the first call it then
    reached last names the time outside ops, by about the stall."""
    ddp = shared("h200x2")
    shutil.copy(ddp / R1, tmp_path / R1)
    _shift_rank(ddp / R0, tmp_path / R0, "ProfilerStep#4", 100_000.0)
    d = _batch(capsys, tmp_path)
    first = next(c for c in d["collectives"] if c["step"] == "ProfilerStep#4")
    assert first["last_rank"] == 0
    top = first["late_work"][0]
    assert top["op"] == OUTSIDE_OPS and top["excess_us"] > 90_000
    rank0 = next(r for r in d["ranks"]["ranks"] if r["rank"] == 0)["collectives"]
    assert OUTSIDE_OPS in {w["op"] for w in rank0["late_work"]}


def _stretch_op(src: Path, dst: Path, step: str, name: str, extra_us: float) -> dict:
    """A copy of a rank trace where the first top-level ``name`` op of ``step`` on the step's thread ran
    ``extra_us`` longer (:func:`test_collectives.delay_host` from its end, the ranges holding it grown)."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    events = doc["traceEvents"]
    (s,) = [e for e in events if e.get("name") == step and e.get("cat") == "user_annotation"]
    op = min((e for e in events if e.get("cat") == "cpu_op" and e.get("name") == name and e["tid"] == s["tid"]
              and e["ts"] >= s["ts"]), key=lambda e: e["ts"])
    delay_host(events, op["ts"] + op["dur"], extra_us, stretch=True)  # the op among the ranges that grow
    dst.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return op


def test_an_op_that_ran_longer_is_named(ddp_doc, tmp_path, capsys):
    """Rank 0's first aten::linear of step 4 ran 60 ms longer: the first call of that step it reached last
    (the calls before the op are as they were) names aten::linear, by those 60 ms less what rank 1's
    linear ops took beyond rank 0's before that call in the real run (it was the late one there)."""
    ddp = shared("h200x2")
    shutil.copy(ddp / R1, tmp_path / R1)
    _stretch_op(ddp / R0, tmp_path / R0, "ProfilerStep#4", "aten::linear", 60_000.0)
    d = _batch(capsys, tmp_path)
    first = next(c for c in d["collectives"] if c["step"] == "ProfilerStep#4" and c["last_rank"] == 0)
    top = first["late_work"][0]
    assert top["op"] == "aten::linear"
    (was,) = [c for c in ddp_doc["collectives"] if (c["step"], c["name"], c["index"]) ==
              (first["step"], first["name"], first["index"])]
    assert was["last_rank"] == 1
    r1_beyond = next(w["excess_us"] for w in was["late_work"] if w["op"] == "aten::linear")
    assert top["excess_us"] == pytest.approx(60_000 - r1_beyond, abs=0.01)


def test_the_terminal_and_the_page_say_it(tmp_path, capsys):
    from nongemm_trace.cli import main
    ddp = shared("h200x2")
    assert main(["analyze", str(ddp), "--quiet", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "rank 1, last on 42 of 51 calls: beyond the other ranks' host work before those calls" in out
    from nongemm_trace.report_page import build_page
    assert "rank 1, last on 42 of 51 calls" in build_page([ddp / R0, ddp / R1])
