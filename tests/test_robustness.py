"""Bad input never crashes and never silently loses time (property tests on real-trace mutants).

For every mutant the outcome is either a report whose numbers match an independent
account of the file (and whose warnings count what was dropped), or exit code 2 with
one line naming the file. Set NONGEMM_FUZZ_EXAMPLES to run more examples per class.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import socket
import sqlite3
import time
from pathlib import Path

import mutants
import pytest
from conftest import SAMPLES, kineto_traces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("NONGEMM_FUZZ_EXAMPLES", "12"))
LARGE = os.environ.get("NONGEMM_FUZZ_LARGE") == "1"
BASES = [SAMPLES / "llama_1b_bf16_bs1_s2048__compiled_cudagraphs.json.gz",
         SAMPLES / "h100__gaunernst_bert-small-uncased__1016001.json.gz",
         SAMPLES / "legacy_inference_rank_1.json.gz"]
LOSS_CODES = {"missing_duration", "unsupported_phase", "malformed_events", "duplicate_activities", "missing_category"}
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _load(path: Path):
    return json.loads(gzip.decompress(path.read_bytes()))




@pytest.mark.parametrize("name", sorted(mutants.DOC_MUTATORS))
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), base=st.sampled_from(BASES))
def test_document_mutants(tmp_path_factory, name, seed, base):
    doc = mutants.DOC_MUTATORS[name](_load(base), random.Random(seed))
    path = mutants.write_doc(doc, tmp_path_factory.mktemp("m") / "mutant.json")
    code, out, err = mutants.run_cli(path)
    d = mutants.check_outcome(code, out, err, path)
    assert d is not None, f"{name}: a readable trace must give a report, got: {err}"
    n, total, dropped = mutants.valid_activities(mutants.finite(doc))
    assert d["gpu_activities"] == n
    assert round(d["gpu_time_us"] * 1000) == total
    warned = sum(w["count"] for w in d["warnings"] if w["code"] in LOSS_CODES)
    assert warned >= dropped


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_shuffled_events_give_the_same_report(tmp_path_factory, seed):
    base = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"
    doc = _load(base)
    d1 = tmp_path_factory.mktemp("a") / "t.json"
    d2 = tmp_path_factory.mktemp("b") / "t.json"
    mutants.write_doc(doc, d1)
    mutants.write_doc(mutants.shuffle_events(doc, random.Random(seed)), d2)
    r1 = json.loads(mutants.run_cli(d1)[1])
    r2 = json.loads(mutants.run_cli(d2)[1])
    r1.pop("trace"), r2.pop("trace")
    assert r1 == r2


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), base=st.sampled_from(BASES))
def test_truncated_json_is_refused(tmp_path_factory, seed, base):
    raw = gzip.decompress(base.read_bytes())
    path = tmp_path_factory.mktemp("t") / "cut.json"
    path.write_bytes(mutants.truncate_json(raw, random.Random(seed)))
    code, out, err = mutants.run_cli(path)
    assert mutants.check_outcome(code, out, err, path) is None


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), base=st.sampled_from(BASES))
def test_gzip_bit_flips(tmp_path_factory, seed, base):
    path = tmp_path_factory.mktemp("g") / "flip.json.gz"
    path.write_bytes(mutants.flip_gzip_bit(base.read_bytes(), random.Random(seed)))
    code, out, err = mutants.run_cli(path)
    d = mutants.check_outcome(code, out, err, path)
    if d is not None:  # a flip in a header field gzip does not check: the data is intact
        ref = json.loads(mutants.run_cli(base)[1])
        assert d["gpu_time_us"] == ref["gpu_time_us"] and d["gpu_activities"] == ref["gpu_activities"]


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), base=st.sampled_from(BASES[:2]))
def test_non_utf8_and_nan_literals_are_repaired(tmp_path_factory, seed, base):
    rng = random.Random(seed)
    raw = gzip.decompress(base.read_bytes())
    for mutate in (mutants.non_utf8, mutants.nan_literals):
        path = tmp_path_factory.mktemp("u") / "bad.json"
        path.write_bytes(mutate(raw, rng))
        code, out, err = mutants.run_cli(path)
        d = mutants.check_outcome(code, out, err, path)
        assert d is not None
        assert any(w["code"] == "repaired_json" for w in d["warnings"])


def test_nesting_bomb_is_refused_quickly(tmp_path):
    path = tmp_path / "bomb.json"
    path.write_bytes(mutants.nesting_bomb())
    t = time.monotonic()
    code, out, err = mutants.run_cli(path)
    assert time.monotonic() - t < 10
    assert mutants.check_outcome(code, out, err, path) is None
    assert "nested" in err


def test_gzip_bomb_is_refused_without_inflating(tmp_path, monkeypatch):
    monkeypatch.setenv("NONGEMM_MAX_TRACE_BYTES", str(50 << 20))
    path = tmp_path / "bomb.json.gz"
    with gzip.open(path, "wb", compresslevel=9) as fh:
        fh.write(b'{"traceEvents": [')
        for _ in range(200):
            fh.write(b" " * (1 << 20))
        fh.write(b"]}")
    code, out, err = mutants.run_cli(path)
    assert mutants.check_outcome(code, out, err, path) is None
    assert "NONGEMM_MAX_TRACE_BYTES" in err


def test_many_tiny_events(tmp_path):
    n = 1_000_000 if LARGE else 150_000
    events = [{"ph": "X", "cat": "kernel", "name": f"k{i % 7}", "pid": 0, "tid": 7, "ts": i * 2.0, "dur": 1.0,
               "args": {"correlation": i, "stream": 7, "device": 0}} for i in range(n)]
    events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": i * 2.0 - 1,
                "dur": 0.5, "args": {"correlation": i}} for i in range(n)]
    path = mutants.write_doc({"traceEvents": events}, tmp_path / "tiny.json")
    t = time.monotonic()
    code, out, err = mutants.run_cli(path)
    elapsed = time.monotonic() - t
    d = mutants.check_outcome(code, out, err, path)
    assert d["gpu_activities"] == n and round(d["gpu_time_us"] * 1000) == n * 1000
    assert elapsed < 120


def test_sqlite_files_are_refused_clearly(tmp_path):
    db = tmp_path / "other.sqlite"
    con = sqlite3.connect(db)
    con.execute("create table t (x int)")
    con.commit()
    con.close()
    code, out, err = mutants.run_cli(db)
    assert mutants.check_outcome(code, out, err, db) is None
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 10)
    code, out, err = mutants.run_cli(junk)
    assert mutants.check_outcome(code, out, err, junk) is None


def test_cpu_only_and_mtia_traces_report():
    from conftest import shared
    for name in ("cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
                 "mtia_trace_single_rank__mtia_rank_0.json.gz"):
        path = shared("external", "hta", name)
        code, out, err = mutants.run_cli(path)
        d = mutants.check_outcome(code, out, err, path)
        assert d["gpu_activities"] == 0
        assert d["metric"] == "cpu"
    codes = {w["code"] for w in d["warnings"]}
    assert "other_device_events" in codes  # MTIA device work is counted, not summed silently


def test_no_network_and_nothing_executed(monkeypatch, tmp_path):
    def refuse(*a, **k):
        raise AssertionError("network access attempted")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    # a trace whose strings look like code must be read as data, never run
    marker = tmp_path / "executed"
    doc = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": f"__import__('os').system('touch {marker}')", "pid": 1, "tid": 1,
         "ts": 0, "dur": 10, "args": {"External id": 1}},
        {"ph": "X", "cat": "kernel", "name": f"eval(open('{marker}','w'))", "pid": 0, "tid": 7, "ts": 3, "dur": 1,
         "args": {"correlation": 5, "External id": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2, "dur": 1,
         "args": {"correlation": 5, "External id": 1}}]}
    path = mutants.write_doc(doc, tmp_path / "code.json")
    for p in [path, *SAMPLES.glob("*.json.gz")]:
        code, out, err = mutants.run_cli(p)
        assert code == 0, err
    assert not marker.exists()


@pytest.mark.parametrize("path", kineto_traces()[:40], ids=lambda p: p.name[:50])
def test_real_traces_are_deterministic(path):
    a = mutants.run_cli(path)
    b = mutants.run_cli(path)
    assert a[0] == 0 and a == b


def test_items_that_are_not_objects_are_skipped_and_counted(tmp_path):
    doc = json.loads(gzip.decompress((SAMPLES / "legacy_inference_rank_1.json.gz").read_bytes()))
    n_before = doc["traceEvents"].__len__()
    doc["traceEvents"][3:3] = [1, "text", None, [2, 3]]
    path = mutants.write_doc(doc, tmp_path / "items.json")
    code, out, err = mutants.run_cli(path)
    d = mutants.check_outcome(code, out, err, path)
    assert d["gpu_activities"] == 4 and n_before
    assert any(w["code"] == "malformed_events" and w["count"] == 4 and "not event objects" in w["message"]
               for w in d["warnings"])
