"""``check``'s gates on a distributed rank (issue #45 item 3): exposed communication and collective
arrival skew, on the two-H200 DDP pair and on a copy of it whose rank 0 stalled (the synthetic slow
rank of tests/test_collectives.py). Measured values are checked against the raw JSON (interval
unions of the kernels, the kernels' own collective args), never against the library's tables."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from conftest import interval_union_ns, ns, raw_events, shared
from test_collectives import _shift_rank

from nongemm_trace.analyses.check import check
from nongemm_trace.classify.taxonomy import load_taxonomy
from nongemm_trace.cli import main
from nongemm_trace.errors import OptionError
from nongemm_trace.integrations.gates import Gates

R0, R1 = "bert_ddp_train_rank0.json.gz", "bert_ddp_train_rank1.json.gz"
DEVICE = {"kernel", "gpu_memcpy", "gpu_memset"}


@pytest.fixture
def ddp() -> Path:
    return shared("h200x2")


def _gates(capsys, *argv) -> tuple[int, dict]:
    code = main(["check", *map(str, argv), "--format", "json", "--quiet"])
    out, _ = capsys.readouterr()
    return code, {g["limit"]: g for g in json.loads(out)["gates"]}


def _raw_exposed_share(path: Path) -> float:
    """Exposed communication over busy time, from the raw kernels: NCCL kernels are the communication."""
    acts = [e for e in raw_events(str(path)) if e.get("ph") == "X" and e.get("cat") in DEVICE]
    frame = pl.DataFrame({"ts_ns": [ns(e["ts"]) for e in acts], "dur_ns": [ns(e["dur"]) for e in acts],
                          "comm": ["nccl" in e["name"].lower() for e in acts]})
    busy = interval_union_ns(frame)
    return (busy - interval_union_ns(frame.filter(~pl.col("comm")))) / busy


def test_exposed_communication_gate_measures_the_unhidden_communication(ddp, capsys):
    want = _raw_exposed_share(ddp / R0)
    assert want > 0.01
    code, gates = _gates(capsys, ddp / R0, "--max-exposed-communication", f"{100 * want + 0.5}%")
    assert code == 0 and gates["max-exposed-communication"]["ok"]
    assert gates["max-exposed-communication"]["value"] == pytest.approx(want, abs=1e-6)
    code, gates = _gates(capsys, ddp / R0, "--max-exposed-communication", f"{100 * want - 0.5}%")
    assert code == 1 and not gates["max-exposed-communication"]["ok"]


def _raw_max_skew_us(a: Path, b: Path) -> float:
    """The largest start difference of the same collective on the two ranks (the i-th kernel carrying
    collective args on each: DDP issues them in one order), from the raw JSON (both traces' base
    times are one clock)."""
    starts = []
    for path in (a, b):
        base = json.loads(gzip.decompress(path.read_bytes())).get("baseTimeNanoseconds", 0)
        starts.append(sorted((base + ns(k["ts"]), k["args"]["Collective name"]) for k in raw_events(str(path))
                             if k.get("cat") == "kernel" and "Collective name" in (k.get("args") or {})))
    assert len(starts[0]) == len(starts[1]) and [n for _, n in starts[0]] == [n for _, n in starts[1]]
    return max(abs(x[0] - y[0]) for x, y in zip(*starts)) / 1000


def test_skew_gate_is_the_largest_arrival_skew_across_the_ranks(ddp, capsys):
    want = _raw_max_skew_us(ddp / R0, ddp / R1)
    code, gates = _gates(capsys, ddp / R0, "--max-skew-us", f"{want + 1}us", "--ranks", ddp / R1)
    assert code == 0 and gates["max-skew"]["value"] == pytest.approx(want, abs=0.002)
    code, gates = _gates(capsys, ddp / R0, "--max-skew-us", f"{(want - 1) / 1000}ms", "--ranks", ddp / R1)
    assert code == 1 and "rank 1 last" in gates["max-skew"]["message"]


def test_skew_gate_names_a_stalled_rank_as_last(ddp, tmp_path, capsys):
    shutil.copy(ddp / R1, tmp_path / R1)
    _shift_rank(ddp / R0, tmp_path / R0, "ProfilerStep#4", 100_000.0)
    code, gates = _gates(capsys, tmp_path / R1, "--max-skew-us", "50ms", "--ranks", tmp_path / R0)
    g = gates["max-skew"]
    assert code == 1 and g["value"] > 100_000 - _raw_max_skew_us(ddp / R0, ddp / R1)
    assert "rank 0 last" in g["message"]


def test_comm_limits_that_could_never_fire_are_refused(ddp, capsys):
    assert main(["check", str(ddp / R0), "--max-skew-us", "1ms"]) == 2  # no other rank to match with
    assert "--max-skew-us needs the traces of the run's other rank" in capsys.readouterr().err
    assert main(["check", str(ddp / R0), "--max-exposed-communication", "150%"]) == 2
    assert main(["check", str(ddp / R0), "--max-skew-us", "soon", "--ranks", str(ddp / R1)]) == 2
    with pytest.raises(OptionError, match="given twice"):
        check(ddp / R0, max_skew_us=1.0, ranks=[ddp / R0])
    gates = Gates(max_exposed_communication="20%")
    gates.validate(load_taxonomy())
    with pytest.raises(OptionError):
        Gates(max_skew_us=5.0).validate(load_taxonomy())
