"""Hostile traces (../shared/fuzz, found by fuzzing the C scanner and the chunked loader): every
load path gives the same answer — the whole document and chunks of several sizes (the smallest
included), the C scanner and ``NONGEMM_NATIVE=off``, one scanning thread and two, with and
without the read-ahead thread — the same tables, metadata and warnings, or the same one-line
error; and the answer is the right one for each. bench/fuzz.py checks the same property on
mutated real traces (docs/reliability.md)."""

from __future__ import annotations

import polars as pl
from conftest import SHARED, missing

from nongemm_trace.errors import TraceError
from nongemm_trace.load import load_trace, start_read_ahead, stop_read_ahead
from nongemm_trace.load.kineto import read_ahead, scanner

FUZZ = SHARED.parent / "fuzz"

#: (switches, read ahead first): the paths; chunk sizes from the smallest to the whole file
PATHS = [({"NONGEMM_NATIVE": native, "NONGEMM_CHUNK_BYTES": chunk, "NONGEMM_SCAN_THREADS": threads}, ahead)
         for native in ("on", "off")
         for chunk in ("", "256", "700", "1024")
         for threads in ("auto", "off")
         for ahead in (False, True)
         # without C there are no scanning threads and no read-ahead; the read-ahead needs threads
         if not (native == "off" and (threads == "off" or ahead)) and not (ahead and (threads == "off" or not chunk))]


def _reproducer(name: str, tmp_path, pad: bool, folder=None):
    src = (folder or FUZZ) / name
    if not src.exists():
        missing(f"fuzz reproducers not found at {FUZZ}")
    if not pad:
        return src
    # trailing JSON whitespace changes nothing, and makes the file large enough to be read ahead
    out = tmp_path / f"padded-{name}"
    out.write_bytes(src.read_bytes() + b"\n" * 10000)
    return out


def _answer(path, monkeypatch, switches, ahead, keep_python):
    """The answer of one path; its switches hold for this load only (not for what the test does next)."""
    with monkeypatch.context() as m:
        for k, v in switches.items():
            if v:
                m.setenv(k, v)
            else:
                m.delenv(k, raising=False)
        try:
            if ahead:
                assert read_ahead.worth_it(path) and start_read_ahead(path, keep_python)
                read_ahead.wait()
            trace = load_trace(path, keep_python=keep_python)
        except TraceError as exc:
            return ("error", exc.one_line())
        finally:
            stop_read_ahead()
    tables = {k: getattr(trace, k).with_columns(pl.col(pl.Categorical).cast(pl.Utf8)).to_dict(as_series=False)
              for k in ("ops", "launches", "activities", "python")}
    return ("ok", tables, trace.metadata, [(a.code, a.count, a.message) for a in trace.anomalies])


def _one_answer(name, tmp_path, monkeypatch, keep_python=False, folder=None):
    """The answer every path gives (asserted equal), on the file as it is and padded."""
    answers = {}
    for pad in (False, True):
        path = _reproducer(name, tmp_path, pad, folder)
        for switches, ahead in PATHS:
            if ahead and not hasattr(scanner.SCANNER, "read_ahead"):
                continue
            if ahead and not pad:
                continue
            answers[(pad, tuple(switches.values()), ahead)] = _answer(path, monkeypatch, switches, ahead, keep_python)
    first = next(iter(answers.values()))
    if first[0] == "error":  # the padded copy has another name
        first = ("error", first[1].split(": ", 1)[1])
    for key, got in answers.items():
        if got[0] == "error":
            got = ("error", got[1].split(": ", 1)[1])
        assert got == first, f"path {key} differs"
    return first


def test_f1_float_time_beyond_int64_on_another_devices_event(tmp_path, monkeypatch):
    """``"ts": 1e300`` on an MTIA event: counted with the other device's events (its duration is
    valid), never converted to nanoseconds (undefined behaviour in C: the sanitizer build fails
    on the old code, docs/reliability.md)."""
    got = _one_answer("F1-other-route-ts-ub.json", tmp_path, monkeypatch)
    assert got[0] == "ok"
    assert [(c, n) for c, n, _ in got[3]] == [("other_device_events", 2)]
    assert "4.0 us summed" in got[3][0][2]


def test_f2_duplicated_trace_events_key_is_refused_on_every_path(tmp_path, monkeypatch):
    got = _one_answer("F2-duplicate-traceEvents.json", tmp_path, monkeypatch)
    assert got[0] == "error" and "more than one 'traceEvents' key" in got[1]


def test_f3_one_ill_typed_event_is_counted_wherever_the_chunks_are_cut(tmp_path, monkeypatch):
    got = _one_answer("F3-valid-file-rejected-when-chunked.json", tmp_path, monkeypatch)
    assert got[0] == "ok"
    assert len(got[1]["ops"]["name"]) == 10 and "aten::bad_type" not in got[1]["ops"]["name"]
    assert [(c, n) for c, n, _ in got[3]] == [("malformed_events", 1)]


def test_f4_form_feed_after_the_key_is_invalid_json_on_every_path(tmp_path, monkeypatch):
    got = _one_answer("F4-formfeed-after-key.json", tmp_path, monkeypatch)
    assert got[0] == "error" and "invalid or truncated JSON" in got[1]


def test_f5_one_malformed_event_leaves_the_others_raw_args_as_written(tmp_path, monkeypatch):
    got = _one_answer("F5-loose-decode-rewrites-raw-args.json", tmp_path, monkeypatch, keep_python=True)
    assert got[0] == "ok"
    ops = got[1]["ops"]
    assert [(c, n) for c, n, _ in got[3]] == [("malformed_events", 1)]
    # the raw JSON texts as the file writes them, one spelling for one shape
    assert set(ops["input_dims"]) == {"[[8, 128], [128, 64]]"}
    assert set(ops["concrete_inputs"]) == {'["", "\\u0031"]'}


def test_nan_with_a_lone_surrogate_escape_is_one_line_on_every_path(tmp_path, monkeypatch):
    """Found by bench/fuzz.py: the NaN repair re-encoded a document whose lone surrogate escape
    (``"\\ud800"``) Python's json accepts and no encoder can write: a traceback, not one line."""
    # %-formatting: the JSON text is full of braces
    event = '{"ph": "X", "cat": "cpu_op", "name": "aten::x%d", "pid": 1, "tid": 1, "ts": %d, "dur": 1}'
    events = ",\n".join(event % (i, 100 + 10 * i) for i in range(40))
    doc = '{"traceEvents": [\n%s,\n{"ph": "\\ud800", "cat": "cpu_op", "ts": NaN}\n]}' % events  # noqa: UP031
    (tmp_path / "nan-surrogate.json").write_text(doc)
    got = _one_answer("nan-surrogate.json", tmp_path, monkeypatch, folder=tmp_path)
    assert got[0] == "error" and "invalid or truncated JSON" in got[1]
