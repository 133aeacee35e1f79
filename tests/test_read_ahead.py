"""Reading ahead (load/kineto/read_ahead.py and the C scanner's thread): the loader gives the same
tables, metadata and warnings whether or not the start of a plain JSON trace was read and
scanned ahead, and wherever the read-ahead stopped or was taken."""

from __future__ import annotations

import gzip
import json
import time

import pytest
from conftest import SAMPLES, kineto_traces, trace_ids
from polars.testing import assert_frame_equal

from nongemm_trace import cli
from nongemm_trace.errors import TraceError
from nongemm_trace.load import load_trace
from nongemm_trace.load.kineto import cutting, loader, read_ahead, scanner

TRACES = kineto_traces()
CHUNK = 32 << 10
#: at most this many chunks per trace: every trace still crosses hundreds of chunk boundaries, and an
#: 87 MB one is not cut into 2,700 (seconds of test time that find nothing a few hundred do not)
MAX_CHUNKS = 256


def _chunk_for(path, monkeypatch) -> int:
    """The chunk size for ``path``: :data:`CHUNK`, or larger where the file would make more than
    :data:`MAX_CHUNKS` chunks (set for the loader and the read-ahead alike)."""
    chunk = max(CHUNK, path.stat().st_size // MAX_CHUNKS)
    monkeypatch.setenv("NONGEMM_CHUNK_BYTES", str(chunk))
    return chunk

pytestmark = pytest.mark.skipif(not hasattr(scanner.SCANNER, "read_ahead"),
                                reason="the C scanner (with its read-ahead thread) is not built")


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch):
    monkeypatch.setenv("NONGEMM_CHUNK_BYTES", str(CHUNK))
    monkeypatch.delenv("NONGEMM_READ_AHEAD", raising=False)
    monkeypatch.setenv("NONGEMM_SCAN_THREADS", "auto")
    yield
    read_ahead.discard()


def _plain(path, tmp_path, name="t.json", edit=None):
    raw = gzip.decompress(path.read_bytes())
    if edit:
        raw = edit(raw)
    out = tmp_path / name
    out.write_bytes(raw)
    return out


def _tables(trace):
    return {"ops": trace.ops, "launches": trace.launches, "activities": trace.activities, "python": trace.python,
            "cuda_syncs": trace.cuda_syncs}


def _same(a, b):
    assert a.metadata == b.metadata
    assert [(x.code, x.count) for x in a.anomalies] == [(x.code, x.count) for x in b.anomalies]
    for name, df in _tables(a).items():
        assert_frame_equal(_tables(b)[name], df, check_exact=True)


def _wholes(monkeypatch):
    """Counts the loads that fell back to decoding the file whole (which would hide a wrong resume)."""
    n = [0]
    real = loader.load_whole
    monkeypatch.setattr(loader, "load_whole", lambda *a, **k: n.__setitem__(0, n[0] + 1) or real(*a, **k))
    return n


def _taken(monkeypatch, wait=False):
    """What each load took from the read-ahead (None: nothing); ``wait``: the load first waits for
    the thread to stop by itself (in this process polars is imported already: nothing to overlap)."""
    got = []
    real = read_ahead.take

    def take(*a):
        if wait:
            read_ahead.wait()
        got.append(real(*a))
        return got[-1]

    monkeypatch.setattr(read_ahead, "take", take)
    return got


def _loads_the_same(p, monkeypatch):
    """Load ``p`` (with Python events) without and after a read-ahead that ran to its end: the same
    trace, streamed on from the read-ahead as without it (not a fallback to the whole file);
    what the load took from the read-ahead."""
    if not read_ahead.worth_it(p):
        pytest.skip("too small to read ahead")
    wholes = _wholes(monkeypatch)
    plain = load_trace(p, keep_python=True)
    fell_back = wholes[0]
    got = _taken(monkeypatch)
    assert read_ahead.start(p, True)
    read_ahead.wait()
    _same(plain, load_trace(p, keep_python=True))
    assert wholes[0] == 2 * fell_back
    return got[0]


@pytest.mark.parametrize("path", TRACES, ids=trace_ids(TRACES))
def test_read_ahead_gives_the_same_trace(path, tmp_path, monkeypatch):
    p = _plain(path, tmp_path)
    chunk = _chunk_for(p, monkeypatch)
    taken = _loads_the_same(p, monkeypatch)
    why, chunks = read_ahead.stopped
    if "CPython" in why:  # nanosecond times written with more digits than a double holds: from the start
        assert taken is None and chunks == 0
        return
    # it read everything but the last chunk's length, which stays with the loader
    assert taken is not None and len(taken.results) == chunks >= 1
    assert why == "near the end" and p.stat().st_size - taken.resume < 2 * chunk + cutting.read_block()


GZ = [p for p in TRACES if "h200" in str(p.parent)]


@pytest.mark.skipif(not getattr(scanner.SCANNER, "READ_AHEAD_GZIP", 0), reason="the scanner was built without zlib")
@pytest.mark.parametrize("path", GZ, ids=trace_ids(GZ))
def test_gzip_read_ahead_gives_the_same_trace(path, tmp_path, monkeypatch):
    """The thread inflates with zlib; the loader inflates again from the start and skips what
    was read ahead (a gzip stream cannot be taken over mid-way)."""
    p = tmp_path / "t.json.gz"
    p.write_bytes(path.read_bytes())
    taken = _loads_the_same(p, monkeypatch)
    assert taken is not None and taken.results and read_ahead.stopped[0] == "near the end"


@pytest.mark.skipif(not getattr(scanner.SCANNER, "READ_AHEAD_GZIP", 0), reason="the scanner was built without zlib")
def test_gzip_members_and_truncation(tmp_path, monkeypatch):
    """Several gzip members: the thread stops at the first one's end, the loader reads the rest.
    A gzip file cut short: the thread stops where the data ends, the loader reports the file."""
    raw = gzip.decompress((SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz").read_bytes())
    members = tmp_path / "m.json.gz"
    members.write_bytes(gzip.compress(raw[:len(raw) // 2]) + gzip.compress(raw[len(raw) // 2:]))
    plain = load_trace(_plain(SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz", tmp_path))
    got = _taken(monkeypatch)
    wholes = _wholes(monkeypatch)
    assert read_ahead.start(members, False)
    read_ahead.wait()
    _same(plain, load_trace(members))
    assert got[0] is not None and got[0].results and wholes[0] == 0
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(raw)[: len(gzip.compress(raw)) * 2 // 3])
    assert read_ahead.start(cut, False)
    read_ahead.wait()
    with pytest.raises(TraceError, match="cut.json.gz.*truncated gzip"):
        load_trace(cut)


def test_taken_at_any_moment(tmp_path, monkeypatch):
    """Taken at once, between chunks or while the thread is mid-chunk (that chunk is dropped and
    the loader scans it): the same trace each time."""
    big = tmp_path / "big.json"
    doc = json.loads(gzip.decompress((SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz").read_bytes()))
    doc["traceEvents"] = doc["traceEvents"] * 12
    big.write_bytes(json.dumps(doc).encode())
    monkeypatch.setenv("NONGEMM_CHUNK_BYTES", str(256 << 10))
    plain = load_trace(big)
    got = _taken(monkeypatch)
    wholes = _wholes(monkeypatch)
    for delay in (0.0, 0.001, 0.003, 0.01, 0.03, 0.1):
        assert read_ahead.start(big, False)
        time.sleep(delay)
        _same(plain, load_trace(big))
    assert wholes[0] == 0
    assert any(t is not None and t.results for t in got)


def test_a_chunk_the_scanner_leaves_is_the_loaders(tmp_path, monkeypatch):
    """A number the scanner hands to CPython (more digits than a double holds) stops the thread
    (it has no GIL to take); the loader scans that chunk with the GIL, and goes on."""
    path = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"

    def long_number(raw):
        i = raw.index(b'"ts": ', len(raw) // 2) + 6
        j = raw.index(b",", i)
        return raw[:i] + raw[i:j] + b"000000000000000000001" + raw[j:] if b"." in raw[i:j] else raw

    p = _plain(path, tmp_path, edit=long_number)
    assert read_ahead.worth_it(p)
    plain = load_trace(p)
    got = _taken(monkeypatch)
    wholes = _wholes(monkeypatch)
    read_ahead.start(p, False)
    read_ahead.wait()
    _same(plain, load_trace(p))
    assert wholes[0] == 0
    assert got[0] is not None and "CPython" in got[0].why
    assert p.stat().st_size - got[0].resume > 2 * CHUNK  # it stopped in the middle


def test_cut_inside_a_string_falls_back_to_the_whole_file(tmp_path, monkeypatch):
    """Names holding the boundary pattern put cuts inside strings: the chunk is invalid for the
    thread and for the loader, which then decodes the file whole, read-ahead or not."""
    p = _plain(SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz", tmp_path,
               edit=lambda raw: raw.replace(b'"name": "aten::', b'"name": "x}, {aten::'))
    whole = loader.load_whole(p, p.read_bytes(), keep_python=False)
    read_ahead.start(p, False)
    read_ahead.wait()
    _same(whole, load_trace(p))


def test_only_its_own_load_takes_it(tmp_path, monkeypatch):
    p = _plain(SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz", tmp_path)
    other = _plain(SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz", tmp_path, name="other.json")
    plain = load_trace(p)
    got = _taken(monkeypatch)
    wholes = _wholes(monkeypatch)
    assert read_ahead.start(p, False)
    assert not read_ahead.start(other, False)  # one at a time
    read_ahead.wait()
    _same(plain, load_trace(p))  # taken
    assert read_ahead.start(p, False)
    read_ahead.wait()
    _same(plain, load_trace(other))  # another file's load drops it
    assert read_ahead.start(p, True)
    read_ahead.wait()
    _same(plain, load_trace(p))  # so does a load of other tables (with Python events)
    assert got[0] is not None and got[0].results and got[1:] == [None, None]
    assert wholes[0] == 0


def test_not_for_missing_small_or_sqlite_files(tmp_path, monkeypatch):
    gz = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"
    assert read_ahead.worth_it(gz) == bool(scanner.SCANNER.READ_AHEAD_GZIP)
    assert not read_ahead.worth_it(SAMPLES / "collected" / "resnet50_bs8_nsys.sqlite.gz")
    assert not read_ahead.start(tmp_path / "missing.json", False)
    with pytest.raises(TraceError, match="missing.json"):
        load_trace(tmp_path / "missing.json")
    small = tmp_path / "small.json"
    small.write_bytes(b'{"traceEvents": []}')
    assert not read_ahead.worth_it(small)
    monkeypatch.setenv("NONGEMM_READ_AHEAD", "off")
    assert not read_ahead.worth_it(_plain(gz, tmp_path))


def test_file_gone_after_start_is_the_loaders_error(tmp_path):
    p = _plain(SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz", tmp_path)
    assert read_ahead.start(p, False)
    read_ahead.wait()
    p.unlink()
    with pytest.raises(TraceError, match="t.json"):
        load_trace(p)


def test_command_reads_ahead_and_reports_the_same(tmp_path, monkeypatch, capsys):
    p = _plain(SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz", tmp_path)
    got = _taken(monkeypatch, wait=True)
    wholes = _wholes(monkeypatch)
    assert cli.main(["analyze", str(p), "--format", "json", "-o", str(tmp_path / "on.json"), "--quiet"]) == 0
    assert wholes[0] == 0
    assert got and got[0] is not None and got[0].results
    monkeypatch.setenv("NONGEMM_READ_AHEAD", "off")
    assert cli.main(["analyze", str(p), "--format", "json", "-o", str(tmp_path / "off.json"), "--quiet"]) == 0
    assert len(got) == 1 or got[1] is None
    on, off = (json.loads((tmp_path / f).read_text()) for f in ("on.json", "off.json"))
    assert on == off


def test_command_that_fails_before_loading_drops_it(tmp_path, monkeypatch, capsys):
    p = _plain(SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz", tmp_path)
    assert cli.main(["analyze", str(p), "--skip-steps", "-1", "--quiet"]) == 2
    assert "skip-steps" in capsys.readouterr().err
    assert not read_ahead._pending


def _wait_and_take_race(p) -> None:
    """One round: two waits and two takes at once on a fresh handle (dropped on return)."""
    import threading

    handle = scanner.SCANNER.read_ahead(bytes(p), scanner.ROUTES[False], 4e15, CHUNK, cutting.read_block(),
                                        cutting.first_fill())
    got, errors = [], []
    together = threading.Barrier(4)  # all four call at once

    def take():
        together.wait()
        try:
            got.append(scanner.SCANNER.read_ahead_take(handle))
        except ValueError as exc:
            errors.append(str(exc))

    def wait():
        together.wait()
        scanner.SCANNER.read_ahead_wait(handle)

    threads = [threading.Thread(target=wait) for _ in range(2)] + [threading.Thread(target=take) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert len(got) == 1 and errors == ["read_ahead: already taken"]


def test_wait_and_take_from_two_threads(tmp_path):
    """The handle's wait and take may come from two threads at once (API misuse, but never a hang,
    a double join or a double free): one take gets the chunks, a second one is refused."""
    import threading

    p = _plain(SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz", tmp_path)
    for _ in range(3):
        _wait_and_take_race(p)
    # the module's own functions, from two threads: one take, the other finds nothing
    assert read_ahead.start(p, False)
    taken = []
    threads = [threading.Thread(target=lambda: taken.append(read_ahead.take(p, False))) for _ in range(2)]
    threads.append(threading.Thread(target=read_ahead.wait))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sum(t is not None for t in taken) <= 1 and not read_ahead._pending
