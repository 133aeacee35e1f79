"""The trace-table contract (nongemm_trace/schema.py): every loader's output holds it, and the C
scanner's own column table declares the same columns and types."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
from conftest import shared

from nongemm_trace import schema
from nongemm_trace.load import load_trace

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "sample_traces").glob("*.json.gz"))
#: the C scanner's format letters as polars types
C_TYPES = {"U": schema.TEXT, "l": (pl.Int64,)}
#: columns the Python side adds to the scanner's tables: the row id, and the graph-call marks
ADDED = {"ops": {"op_id"}, "launches": {"launch_id", "graph_launch", "captured"}, "activities": {"activity_id"},
         "python": {"op_id"}}


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
@pytest.mark.parametrize("scanner", ["on", "off"])
def test_kineto_loaders_hold_the_contract(path, scanner, monkeypatch):
    monkeypatch.setenv("NONGEMM_FAST_SCAN", scanner)
    for keep_python in (False, True):
        schema.validate(load_trace(path, keep_python=keep_python))


def test_nsys_and_other_stacks_hold_the_contract():
    for rel in ("h200_nsys/bert_nvtx.sqlite.gz", "external/nsys/fuser_h100_report1.sqlite.gz",
                "external2/kineto/tracelens__mi300__resnet_act_checkpoint.json.gz",
                "external2/kineto/tracelens__inference__vllm_decode_full__graph_execution.json.gz",
                "external/hta/cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"):
        schema.validate(load_trace(shared(*rel.split("/")), keep_python=True))


def test_a_broken_table_is_named():
    trace = load_trace(SAMPLES[0])
    trace.activities = trace.activities.drop("stream").with_columns(pl.col("dur_ns").cast(pl.Float64))
    found = schema.problems(trace)
    assert "activities.stream: missing" in found
    assert any(p.startswith("activities.dur_ns: Float64") for p in found)
    with pytest.raises(schema.SchemaError, match="activities.stream: missing"):
        schema.validate(trace)


def test_graph_launches_are_marked_by_the_loader():
    trace = load_trace(shared("h200", "llama_1b_bf16_bs1_s2048__compiled_cudagraphs.json.gz"))
    marked = trace.launches.filter(pl.col("graph_launch"))
    assert marked.height > 0 and set(marked["name"].unique()) == {"cudaGraphLaunch"}
    assert not trace.launches.filter(~pl.col("graph_launch"))["name"].cast(pl.String).str.contains("GraphLaunch").any()


def test_c_scanner_declares_the_contract():
    src = (ROOT / "csrc" / "nongemm_scan.c").read_text()
    cols = {k: (n, f) for k, n, f in re.findall(r'\[(C_\w+)\] = \{"(\w+)", "(\w)", \d\}', src)}
    assert len(cols) >= 17
    spec = dict(re.findall(r"\[T_(\w+)\] = \{([^}]*)\}", src.split("SPEC[N_T]", 1)[1].split("};", 1)[0]))
    tables = {"ops": "OPS", "launches": "LAUNCHES", "activities": "ACTS", "python": "PY"}
    for table, code in tables.items():
        names = [c.strip() for c in spec[code].split(",") if c.strip() and c.strip() != "-1"]
        declared = {cols[c][0]: cols[c][1] for c in names}
        assert set(declared) | ADDED[table] == set(schema.TABLES[table]), table
        for name, fmt in declared.items():
            want = schema.TABLES[table][name]
            accepted = want if isinstance(want, tuple) else (want,)
            assert set(C_TYPES[fmt]) & set(accepted), (table, name, fmt)
