"""Streamed loading (blocks -> chunks -> partial tables) equals the whole-document path,
table for table, on every shared Kineto trace; gzip errors found mid-stream are one-line errors."""

from __future__ import annotations

import gzip

import pytest
from conftest import SAMPLES, kineto_traces, shared, trace_ids
from polars.testing import assert_frame_equal

from nongemm_trace.errors import TraceError
from nongemm_trace.load import load_trace
from nongemm_trace.load.kineto import fast_scan, loader, pipeline
from nongemm_trace.load.source import read_bytes

TRACES = kineto_traces()


def _tables(trace):
    return {"ops": trace.ops, "launches": trace.launches, "activities": trace.activities, "python": trace.python,
            "cuda_syncs": trace.cuda_syncs}


@pytest.mark.parametrize("path", TRACES, ids=trace_ids(TRACES))
def test_stream_equals_whole(path, monkeypatch):
    whole = loader.load_whole(path, read_bytes(path), keep_python=True)
    monkeypatch.setenv("NONGEMM_CHUNK_BYTES", str(96 << 10))
    streamed = load_trace(path, keep_python=True)
    assert streamed.metadata == whole.metadata
    assert [(a.code, a.count) for a in streamed.anomalies] == [(a.code, a.count) for a in whole.anomalies]
    for name, df in _tables(whole).items():
        assert_frame_equal(_tables(streamed)[name], df, check_exact=True)


def test_streaming_really_streams(monkeypatch):
    """The big path is taken (not a silent fallback to the whole document) and cuts many chunks."""
    path = shared("h200", "bert_base_train_bs8_s128__eager.json.gz")
    monkeypatch.setenv("NONGEMM_CHUNK_BYTES", str(64 << 10))
    calls = []
    real = pipeline.decode_chunk
    monkeypatch.setattr(pipeline, "decode_chunk", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(loader, "load_whole", lambda *a, **k: pytest.fail("fell back to the whole document"))
    load_trace(path)
    assert len(calls) > 20


def test_progress_reaches_the_file_size(monkeypatch):
    path = shared("h200", "bert_base_train_bs8_s128__eager.json.gz")
    monkeypatch.setenv("NONGEMM_CHUNK_BYTES", str(64 << 10))
    seen = []
    load_trace(path, progress=lambda done, total: seen.append((done, total)))
    assert len(seen) > 5
    assert all(t == path.stat().st_size for _, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert seen[-1][0] == path.stat().st_size


@pytest.fixture()
def big_json(tmp_path):
    """A plain .json and its gzip, large enough to be streamed with small chunks."""
    raw = gzip.decompress((SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz").read_bytes())
    plain = tmp_path / "t.json"
    plain.write_bytes(raw)
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(raw))
    return plain, gz, raw


def _corrupted(gz, tmp_path):
    """A copy of ``gz`` with 64 bytes flipped in the middle of its compressed data."""
    data = bytearray(gz.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 64):
        data[i] ^= 0x5A
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(bytes(data))
    return bad


def test_truncated_gzip_mid_stream(big_json, tmp_path, monkeypatch):
    _, gz, _ = big_json
    monkeypatch.setenv("NONGEMM_CHUNK_BYTES", str(16 << 10))
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gz.read_bytes()[: gz.stat().st_size * 2 // 3])
    with pytest.raises(TraceError, match="truncated gzip stream"):
        load_trace(cut)


def test_corrupt_gzip_mid_stream(big_json, tmp_path, monkeypatch):
    _, gz, _ = big_json
    monkeypatch.setenv("NONGEMM_CHUNK_BYTES", str(16 << 10))
    bad = _corrupted(gz, tmp_path)
    with pytest.raises(TraceError, match="corrupt gzip data|invalid|truncated"):
        load_trace(bad)


def test_memory_budget_stops_a_stream_mid_way(big_json, monkeypatch):
    """A streamed trace is budgeted by its tables (NONGEMM_MAX_MEMORY), not by its JSON size: a
    budget below what its tables need stops it mid-stream; a JSON cap below its size does not."""
    _, gz, raw = big_json
    monkeypatch.setenv("NONGEMM_CHUNK_BYTES", str(16 << 10))
    monkeypatch.setenv("NONGEMM_MAX_TRACE_BYTES", str(len(raw) // 3))
    whole = load_trace(gz)
    need = sum(getattr(whole, k).estimated_size() for k in ("ops", "launches", "activities", "python", "cuda_syncs"))
    monkeypatch.setenv("NONGEMM_MAX_MEMORY", str(need))  # less than 4x the tables
    with pytest.raises(TraceError, match="NONGEMM_MAX_MEMORY"):
        load_trace(gz)
    monkeypatch.setenv("NONGEMM_MAX_MEMORY", "lots")
    with pytest.raises(TraceError, match="must be a number of bytes"):
        load_trace(gz)


def test_concatenated_gzip_members_stream(big_json, tmp_path, monkeypatch):
    """A file of several gzip members (``cat a.gz b.gz``) is one stream."""
    plain, _, raw = big_json
    half = len(raw) // 2
    multi = tmp_path / "multi.json.gz"
    multi.write_bytes(gzip.compress(raw[:half]) + gzip.compress(raw[half:]))
    monkeypatch.setenv("NONGEMM_CHUNK_BYTES", str(16 << 10))
    a, b = load_trace(multi), load_trace(plain)
    assert_frame_equal(a.activities, b.activities)


def test_truncated_json_mid_stream_is_one_line_error(big_json, tmp_path, monkeypatch):
    plain, _, raw = big_json
    monkeypatch.setenv("NONGEMM_CHUNK_BYTES", str(16 << 10))
    cut = tmp_path / "cut.json"
    cut.write_bytes(raw[: len(raw) * 3 // 4])
    with pytest.raises(TraceError, match="invalid or truncated JSON"):
        load_trace(cut)


def test_bare_array_and_keys_after_events(big_json, tmp_path, monkeypatch):
    """Chrome's bare-array format, and metadata keys written after traceEvents, load the same."""
    import json
    plain, _, raw = big_json
    doc = json.loads(raw)
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(doc["traceEvents"]))
    after = tmp_path / "after.json"
    events = doc.pop("traceEvents")
    after.write_text(json.dumps({"traceEvents": events, **doc}))
    monkeypatch.setenv("NONGEMM_CHUNK_BYTES", str(16 << 10))
    ref = load_trace(plain)
    for p in (bare, after):
        t = load_trace(p)
        assert_frame_equal(t.ops, ref.ops)
        assert_frame_equal(t.activities, ref.activities)
    assert load_trace(after).metadata == ref.metadata


def test_the_progress_display_path_gives_the_same_report():
    """With a watcher set (what the command line does around a command, commands/progress.py), the
    loader reports its bytes read and each stage, and the report is analyze()'s."""
    from nongemm_trace import analyze
    from nongemm_trace.core.progress import watching

    class Watcher:
        def __init__(self):
            self.reads, self.stages = [], []

        def stage(self, text):
            self.stages.append(text)

        def read(self, done, total):
            self.reads.append((done, total))

    path = str(SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz")
    w = Watcher()
    with watching(w):
        watched = analyze(path).to_dict()
    assert watched == analyze(path).to_dict()
    assert w.reads and all(0 <= d <= t for d, t in w.reads)
    assert [s.split()[0] for s in w.stages] == ["reading", "linking", "measuring"]


def _mutants():
    import mutants
    docs = [mutants.drop_or_rename_keys, mutants.wrong_types, mutants.duplicate_events, mutants.unlink_activities,
            mutants.shuffle_events, mutants.negative_and_huge_times, mutants.long_names]
    raws = [mutants.truncate_json, mutants.non_utf8, mutants.nan_literals]
    return [(m.__name__, m, "doc") for m in docs] + [(m.__name__, m, "raw") for m in raws]


@pytest.mark.parametrize("name,mutate,kind", _mutants(), ids=[m[0] for m in _mutants()])
def test_mutants_streamed_equal_whole(name, mutate, kind, tmp_path, monkeypatch):
    """Broken input gives the same report (or the same one-line refusal) streamed as whole."""
    import json
    import random

    import mutants
    doc = json.loads(gzip.decompress(shared("h200", "bert_base_train_bs8_s128__eager.json.gz").read_bytes()))
    for seed in range(2):
        rng = random.Random(seed)
        path = tmp_path / f"{name}_{seed}.json"
        if kind == "doc":
            mutants.write_doc(mutate(json.loads(json.dumps(doc)), rng), path)
        else:
            path.write_bytes(mutate(json.dumps(doc).encode(), rng))
        whole = mutants.run_cli(path)
        with monkeypatch.context() as m:
            m.setenv("NONGEMM_CHUNK_BYTES", str(64 << 10))
            streamed = mutants.run_cli(path)
        assert streamed == whole
        mutants.check_outcome(*streamed, path)


def test_gzip_member_magic_split_between_input_pieces(big_json, tmp_path):
    """When one input piece ends after the first byte of the next member's magic, the second
    member is still inflated (it was silently dropped before)."""
    from nongemm_trace.load.source import _inflate

    _, _, raw = big_json
    half = len(raw) // 2
    one, two = gzip.compress(raw[:half]), gzip.compress(raw[half:])
    pieces = [one + two[:1], two[1:]]
    out = b"".join(_inflate(tmp_path / "x.json.gz", iter(pieces), 1 << 40, 1 << 20))
    assert out == raw


def test_chunks_never_exceed_the_chunk_size(monkeypatch):
    """Each chunk is cut at the last event boundary within CHUNK_BYTES (the first one included:
    it once spanned everything read ahead, three times the size), so the decoded objects of one
    chunk bound the memory."""
    path = shared("h200", "bert_base_train_bs8_s128__eager.json.gz")
    monkeypatch.setenv("NONGEMM_CHUNK_BYTES", str(64 << 10))
    sizes = []
    real = pipeline.decode_chunk
    monkeypatch.setattr(pipeline, "decode_chunk", lambda p, raw, *a: sizes.append(len(raw)) or real(p, raw, *a))
    load_trace(path)
    assert len(sizes) > 20
    assert max(sizes[:-1]) <= (64 << 10) + 2  # + the '[' and ']' that frame a chunk
    assert min(sizes[:-1]) > (64 << 10) * 0.9  # cut near the size, not early


@pytest.mark.parametrize("inflater", ["isal", "zlib"])
def test_both_inflaters_give_the_same_tables_and_errors(inflater, big_json, tmp_path, monkeypatch):
    """ISA-L inflates where its wheel is installed, the standard library's zlib elsewhere:
    the same tables, and the same one-line error for corrupt data."""
    import zlib

    from nongemm_trace.load import source
    if inflater == "zlib":
        monkeypatch.setattr(source, "_inflater", zlib)
        monkeypatch.setattr(source, "_INFLATE_ERRORS", (zlib.error,))
    else:
        isal_zlib = pytest.importorskip("isal.isal_zlib")
        assert source._inflater is isal_zlib
    plain, gz, _ = big_json
    monkeypatch.setenv("NONGEMM_CHUNK_BYTES", str(64 << 10))
    assert_frame_equal(load_trace(gz).ops, load_trace(plain).ops, check_exact=True)
    bad = _corrupted(gz, tmp_path)
    with pytest.raises(TraceError, match="corrupt gzip data|invalid|truncated"):
        load_trace(bad)


@pytest.mark.skipif(not fast_scan.available(), reason="the C scanner is not built here")
def test_scanning_threads_give_the_one_thread_tables(monkeypatch):
    """Chunks decoded side by side by the scanning threads give the tables of one thread."""
    path = shared("h200", "bert_base_train_bs8_s128__eager.json.gz")
    monkeypatch.setenv("NONGEMM_CHUNK_BYTES", str(64 << 10))
    monkeypatch.setenv("NONGEMM_SCAN_THREADS", "off")
    whole = load_trace(path)
    monkeypatch.setenv("NONGEMM_SCAN_THREADS", "auto")
    on_threads = []
    real = pipeline._decode_apart
    monkeypatch.setattr(pipeline, "_decode_apart", lambda *a: on_threads.append(1) or real(*a))
    again = load_trace(path)
    assert len(on_threads) > 20
    for name in ("ops", "launches", "activities", "python", "cuda_syncs"):
        assert getattr(again, name).equals(getattr(whole, name))
