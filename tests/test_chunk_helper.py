"""Chunks decoded by a helper process give exactly the one-process tables, on every shared
Kineto trace and on broken input; a helper that cannot start or dies changes nothing but time."""

from __future__ import annotations

import gzip
import json
import random
import sys

import pytest
from polars.testing import assert_frame_equal

from conftest import kineto_traces, shared, trace_ids, tricky_names_trace
from nongemm_trace.load import chunk_worker, cutting, kineto, load_trace
from nongemm_trace.load.source import read_bytes

pytestmark = pytest.mark.skipif(not chunk_worker.available(), reason="no memfd_create: no helper process here")

TRACES = kineto_traces()


def _tables(trace):
    return {"ops": trace.ops, "launches": trace.launches, "activities": trace.activities, "python": trace.python}


@pytest.fixture()
def helper(monkeypatch):
    """Helper on for every streamed trace, small chunks, and the main process waits until the
    helper is up (else a small trace is done before it starts); counts the chunks it was given."""
    monkeypatch.setenv("NONGEMM_CHUNK_HELPER", "on")
    monkeypatch.setattr(cutting, "CHUNK_BYTES", 96 << 10)
    sent = []
    real_can_take, real_send = chunk_worker.ChunkWorker.can_take, chunk_worker.ChunkWorker.send

    def can_take(self, nbytes):
        self.ready.wait(60)
        return real_can_take(self, nbytes)

    def send(self, seq, chunk):
        sent.append(seq)
        return real_send(self, seq, chunk)

    monkeypatch.setattr(chunk_worker.ChunkWorker, "can_take", can_take)
    monkeypatch.setattr(chunk_worker.ChunkWorker, "send", send)
    return sent


@pytest.mark.parametrize("path", TRACES, ids=trace_ids(TRACES))
def test_helper_equals_whole(path, helper):
    whole = kineto._load_whole(path, read_bytes(path), keep_python=True)
    shared_work = load_trace(path, keep_python=True)
    assert shared_work.metadata == whole.metadata
    assert [(a.code, a.count, a.message) for a in shared_work.anomalies] == \
        [(a.code, a.count, a.message) for a in whole.anomalies]
    for name, df in _tables(whole).items():
        assert_frame_equal(_tables(shared_work)[name], df, check_exact=True)
    if len(read_bytes(path)) > 4 * (96 << 10):
        assert helper, "the helper was given no chunk"


def test_both_processes_decode_chunks(helper, monkeypatch):
    path = shared("h200", "bert_base_train_bs8_s128__eager.json.gz")
    calls = []
    real = kineto.decode_chunk
    monkeypatch.setattr(kineto, "decode_chunk", lambda *a, **k: calls.append(1) or real(*a, **k))
    load_trace(path)
    assert len(helper) >= 5 and len(calls) >= 5  # both processes worked


def test_a_helper_that_dies_changes_nothing(helper, monkeypatch):
    """The helper is killed after its first chunk: the file is loaded again without it."""
    path = shared("h200", "bert_base_train_bs8_s128__eager.json.gz")
    real_send = chunk_worker.ChunkWorker.send

    def send_then_die(self, seq, chunk):
        real_send(self, seq, chunk)
        self.proc.kill()

    monkeypatch.setattr(chunk_worker.ChunkWorker, "send", send_then_die)
    monkeypatch.setenv("NONGEMM_CHUNK_HELPER", "off")
    alone = load_trace(path)
    monkeypatch.setenv("NONGEMM_CHUNK_HELPER", "on")
    again = load_trace(path)
    for name, df in _tables(alone).items():
        assert_frame_equal(_tables(again)[name], df, check_exact=True)


@pytest.mark.parametrize("how", ["exits at once", "no such program"])
def test_a_helper_that_cannot_start_changes_nothing(how, helper, monkeypatch, tmp_path):
    path = shared("h200", "bert_base_train_bs8_s128__eager.json.gz")
    ref = load_trace(path)
    fake = tmp_path / "not-python"
    if how == "exits at once":
        fake.write_text("#!/bin/sh\nexit 3\n")
        fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    monkeypatch.setattr(chunk_worker.ChunkWorker, "can_take", lambda self, n: self.ready.is_set())
    for name, df in _tables(ref).items():
        assert_frame_equal(_tables(load_trace(path))[name], df, check_exact=True)


def test_chunk_split_inside_a_string_in_the_helper_falls_back(helper, tmp_path):
    """A boundary found inside a string makes a helper chunk invalid JSON: the file is decoded
    whole, as when this process finds it."""
    p = tricky_names_trace(tmp_path, 5)
    whole = kineto._load_whole(p, read_bytes(p), keep_python=False)
    got = load_trace(p)
    assert_frame_equal(got.ops, whole.ops, check_exact=True)


def _mutants():
    import mutants
    return [mutants.wrong_types, mutants.drop_or_rename_keys, mutants.negative_and_huge_times,
            mutants.truncate_json, mutants.non_utf8, mutants.nan_literals]


@pytest.mark.parametrize("mutate", _mutants(), ids=[m.__name__ for m in _mutants()])
def test_mutants_with_helper_equal_alone(mutate, helper, tmp_path, monkeypatch):
    """Broken input: the same report (warnings included) or the same one-line refusal."""
    import mutants
    doc = json.loads(gzip.decompress(shared("h200", "bert_base_train_bs8_s128__eager.json.gz").read_bytes()))
    path = tmp_path / f"{mutate.__name__}.json"
    if mutate in (mutants.truncate_json, mutants.non_utf8, mutants.nan_literals):
        path.write_bytes(mutate(json.dumps(doc).encode(), random.Random(1)))
    else:
        mutants.write_doc(mutate(doc, random.Random(1)), path)
    with_helper = mutants.run_cli(path)
    monkeypatch.setenv("NONGEMM_CHUNK_HELPER", "off")
    alone = mutants.run_cli(path)
    assert with_helper == alone
    mutants.check_outcome(*with_helper, path)


def test_auto_mode_starts_the_helper_only_for_big_traces(monkeypatch, tmp_path):
    """auto: from the first chunk when the JSON size is known to reach the threshold (plain file,
    or the gzip trailer), from the chunk that crosses it when unknown (several gzip members),
    never below it. (The helper process is the no-C-scanner path: with the scanner, threads.)"""
    monkeypatch.setenv("NONGEMM_FAST_SCAN", "off")
    raw = gzip.decompress(shared("h200", "bert_base_train_bs8_s128__eager.json.gz").read_bytes())
    plain = tmp_path / "t.json"
    plain.write_bytes(raw)
    one_member = tmp_path / "t.json.gz"
    one_member.write_bytes(gzip.compress(raw, 1))
    half = len(raw) // 2
    members = tmp_path / "multi.json.gz"
    members.write_bytes(gzip.compress(raw[:half], 1) + gzip.compress(raw[half:], 1))
    monkeypatch.delenv("NONGEMM_CHUNK_HELPER", raising=False)
    monkeypatch.setattr(cutting, "CHUNK_BYTES", 64 << 10)
    started = []
    real_init = chunk_worker.ChunkWorker.__init__

    def init(self, *a, **k):
        started.append(calls[0])
        real_init(self, *a, **k)

    calls = [0]  # chunks decoded in this process so far
    real_tables = kineto.decode_chunk

    def tables(*a, **k):
        calls[0] += 1
        return real_tables(*a, **k)

    monkeypatch.setattr(chunk_worker.ChunkWorker, "__init__", init)
    monkeypatch.setattr(kineto, "decode_chunk", tables)
    # between the last member's size (the trailer of a multi-member file) and the whole
    monkeypatch.setattr(kineto, "HELPER_MIN_BYTES", len(raw) * 7 // 10)
    for path, first in ((plain, True), (one_member, True), (members, False)):
        started.clear()
        calls[0] = 0
        load_trace(path)
        assert len(started) == 1, path.name
        assert (started[0] == 0) == first, path.name
    monkeypatch.setattr(kineto, "HELPER_MIN_BYTES", len(raw) * 2)
    started.clear()
    load_trace(plain)
    assert started == []
