"""The C scanner gives exactly the tables of the msgspec path, or leaves the input to it.

Its contract (csrc/nongemm_scan.c): accept only what msgspec decodes to the same values;
for anything else return a reason, never a different number. Checked on every shared
Kineto trace, on hand-made edge cases of the JSON grammar and of field types, and on
random events (hypothesis) written with random spacing and escapes.
"""

from __future__ import annotations

import json
import os
import sys

import polars as pl
import pytest
from conftest import kineto_traces, shared, trace_ids
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from nongemm_trace.load.kineto import fast_scan, loader
from nongemm_trace.load.kineto.events import TOP_DECODER, decode_events
from nongemm_trace.load.kineto.tables import Tally, chunk_tables
from nongemm_trace.load.source import read_bytes

TRACES = kineto_traces()
needs_scanner = pytest.mark.skipif(fast_scan._SCANNER is None, reason="the C scanner is not built here")


def test_the_scanner_is_built():
    """The install builds it wherever a C compiler exists (CI included): a build that silently
    failed would leave every other test here skipped and every load slow."""
    if os.environ.get("NONGEMM_ALLOW_NO_SCANNER") == "1":
        pytest.skip("NONGEMM_ALLOW_NO_SCANNER=1")
    assert fast_scan._SCANNER is not None, "the _nongemm_scan extension is missing or of another version"
    assert fast_scan.available()


def _tables(trace):
    return {"ops": trace.ops, "launches": trace.launches, "activities": trace.activities, "python": trace.python,
            "cuda_syncs": trace.cuda_syncs}


@needs_scanner
@pytest.mark.parametrize("path", TRACES, ids=trace_ids(TRACES))
def test_scanner_equals_python_path(path, monkeypatch):
    data = read_bytes(path)
    monkeypatch.setenv("NONGEMM_FAST_SCAN", "off")
    slow = loader.load_whole(path, data, keep_python=True)
    monkeypatch.setenv("NONGEMM_FAST_SCAN", "on")
    fast = loader.load_whole(path, data, keep_python=True)
    assert fast.metadata == slow.metadata
    assert [(a.code, a.count, a.message) for a in fast.anomalies] == \
        [(a.code, a.count, a.message) for a in slow.anomalies]
    for name, df in _tables(slow).items():
        assert_frame_equal(_tables(fast)[name], df, check_exact=True)


@needs_scanner
@pytest.mark.parametrize("name", ["bert_base_train_bs8_s128__eager", "llama_1b_fp8dyn_bs1_s2048__eager",
                                  "fasterrcnn_resnet50_fpn_bs2__eager", "gpt2_fp32_bs8_s128__compiled"])
def test_scanner_takes_real_kineto_traces(name):
    """The fast path is the common path: PyTorch's own traces are scanned, not handed back."""
    events = TOP_DECODER.decode(read_bytes(shared("h200", name + ".json.gz")))["traceEvents"]
    got = fast_scan.scan(events, True, Tally())
    assert not isinstance(got, str), got
    n, tables = got
    assert n > 1000 and tables["ops"].height > 500 and tables["acts"].height > 100


def _both(events_json: bytes, keep_python: bool = True):
    """(scanner tables or its reason, msgspec tables) of one JSON array."""
    got = fast_scan.scan(events_json, keep_python, t1 := Tally())
    fast = got if isinstance(got, str) else got[1]
    slow = chunk_tables(decode_events("x", events_json, m := {}), 0, keep_python, t2 := Tally())
    if not isinstance(fast, str):
        assert m == {}  # an accepted array has no event msgspec would reject
        assert t1 == t2
    else:
        assert t1 == Tally()  # nothing is counted from an array handed back
    return fast, slow


def _same(fast, slow):
    assert not isinstance(fast, str), fast
    for key, df in slow.items():
        assert_frame_equal(fast[key], df, check_exact=True)


BASE = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2.25,
        "args": {"External id": 5, "correlation": 9, "device": 0, "stream": 7}}


def _ev(**over):
    ev = dict(BASE)
    ev.update(over)
    return ev


@needs_scanner
@pytest.mark.parametrize("text", [
    # escapes and non-ASCII text, written as JSON escapes and as raw UTF-8
    '[{"ph":"X","cat":"cpu_op","name":"a\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\u20ac\\ud83d\\ude00 '
    '\u00e9\u20ac\U0001F600","pid":1,"tid":1,"ts":1,"dur":1}]',
    # numbers: exponents, negative zero, many digits (CPython's parser), epoch microseconds
    '[{"ph":"X","cat":"kernel","name":"k","pid":-0,"tid":-12,"ts":1.5e3,"dur":2E-3},'
    '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":1,"ts":1695835535123456.789,"dur":0.1234567890123456789},'
    '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":1,"ts":-0.0,"dur":123456789012345678},'
    '{"ph":"X","cat":"kernel","name":"k","pid":9223372036854775807,"tid":-9223372036854775808,"ts":0.000001,"dur":1e22}]',
    # nulls, missing fields, empty and null args, unknown keys of every kind
    '[{}, {"ph":null,"cat":null,"name":null,"pid":null,"tid":null,"ts":null,"dur":null,"args":null},'
    '{"ph":"X","cat":"cpu_op","args":{}}, {"ph":"X","cat":"cpu_op","name":"o","pid":1,"tid":1,"ts":1,"dur":1,'
    '"x":[1,{"a":[true,false,null]},"s"],"y":{"z":{}},"args":{"Input Dims":null,"Input type":[],"w":1.5}}]',
    # whitespace everywhere JSON allows it, string pid/tid, legacy external id
    ' [ \n\t{ "ph" : "X" ,\r\n "cat" : "cuda_runtime" , "name" : "cudaLaunchKernel" , "pid" : "Spans" ,'
    ' "tid" : "a b" , "ts" : 1 , "dur" : 2 , "args" : { "external id" : 3 , "correlation" : 4 } } ] \n',
    # the raw JSON of shapes and inputs kept as written
    '[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":5,"args":{"External id":1,'
    '"Input Dims": [[8, 128], [128,   64]],"Input type":["float","float"],"Concrete Inputs":["", "[1, 2]"]}}]',
    # phases and times the tables set aside, other devices' events
    '[{"ph":"B","cat":"cpu_op","name":"b","pid":1,"tid":1,"ts":1},{"ph":"X","cat":"kernel","name":"k","pid":0,'
    '"tid":7,"ts":1,"dur":-1},{"ph":"X","cat":"mtia_ccp_events","name":"m","pid":0,"tid":1,"ts":1,"dur":3},'
    '{"ph":"X","name":"nocat","pid":1,"tid":1,"ts":1,"dur":1},{"ph":"X","cat":"python_function","name":"f","pid":1,'
    '"tid":1,"ts":1,"dur":1,"args":{"Python id":3}}]',
    # escaped phase and category (routed by their value), half-nanosecond times (rounded half to even)
    '[{"ph":"\\u0058","cat":"\\u006bernel","name":"k","pid":0,"tid":7,"ts":0.0625,"dur":0.0005},'
    '{"ph":"X","cat":"cpu\\u005fop","name":"o","pid":1,"tid":1,"ts":-0.0625,"dur":2.5e-3},'
    '{"ph":"X","cat":"' + "\\u006b" * 300 + '","name":"long","pid":1,"tid":1,"ts":1,"dur":1}]',
    # CUDA sync records: every kind, the event kinds' stream and record correlation, absent and null args,
    # an escaped kind, and the keys on events of other tables (read, not kept)
    '[{"ph":"X","cat":"cuda_sync","name":"Stream Wait Event","pid":0,"tid":20,"ts":5,"dur":0.003,'
    '"args":{"External id":3,"cuda_sync_kind":"Stream Wait Event","stream":20,"correlation":9,"device":0,'
    '"context":1,"wait_on_stream":7,"wait_on_cuda_event_record_corr_id":8,"wait_on_cuda_event_id":2}},'
    '{"ph":"X","cat":"cuda_sync","name":"Context Sync","pid":0,"tid":-1,"ts":6,"dur":1,'
    '"args":{"cuda_sync_kind":"Context\\u0020Sync","stream":-1,"correlation":10,"device":0}},'
    '{"ph":"X","cat":"cuda_sync","name":"Event Sync","pid":0,"tid":-1,"ts":7,"dur":1,'
    '"args":{"cuda_sync_kind":null,"wait_on_stream":null,"wait_on_cuda_event_record_corr_id":null}},'
    '{"ph":"X","cat":"cuda_sync","name":"x","pid":0,"tid":1,"ts":8,"dur":1},'
    '{"ph":"i","cat":"cuda_sync","name":"x","pid":0,"tid":1,"ts":8},'
    '{"ph":"X","cat":"cuda_sync","name":"x","pid":0,"tid":1,"ts":8,"dur":-1},'
    '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1,"args":{"cuda_sync_kind":"k",'
    '"wait_on_stream":1,"wait_on_cuda_event_record_corr_id":2,"stream":7}}]',
    # autograd's sequence number on forward ops and backward ranges, null, negative, absent
    '[{"ph":"X","cat":"cpu_op","name":"aten::mul","pid":1,"tid":1,"ts":1,"dur":2,"args":{"Sequence number":41,'
    '"Fwd thread id":0}},{"ph":"X","cat":"cpu_op","name":"autograd::engine::evaluate_function: MulBackward0",'
    '"pid":1,"tid":2,"ts":5,"dur":2,"args":{"Sequence number":41,"Fwd thread id":1}},'
    '{"ph":"X","cat":"cpu_op","name":"o","pid":1,"tid":1,"ts":9,"dur":1,"args":{"Sequence number":null}},'
    '{"ph":"X","cat":"cpu_op","name":"o","pid":1,"tid":1,"ts":9,"dur":1,"args":{"Sequence number":-3}}]',
    "[]",
])
def test_accepted_edge_cases_equal_msgspec(text):
    fast, slow = _both(text.encode())
    _same(fast, slow)


@needs_scanner
@pytest.mark.parametrize("text, reason", [
    ('[{"ph":"X","pid":1.5}]', "pid/tid"),                       # msgspec: wrong type
    ('[{"ph":"X","pid":true}]', "pid/tid"),
    ('[{"ph":"X","ts":"1"}]', "time"),
    ('[{"ph":7}]', "text field"),
    ('[{"ph":"X","args":[]}]', "args"),
    ('[{"ph":"X","args":{"External id":1.0}}]', "non-integer"),
    ('[{"ph":"X","args":{"stream":"0x0"}}]', "id of another type"),  # ROCm: parsed by the Python path
    ('[{"ph":"X","ts":1,"ts":2}]', "duplicate"),
    ('[{"ph":"X","args":{"correlation":1,"correlation":2}}]', "duplicate"),
    ('[{"ph":"X","args":{"wait_on_stream":1,"wait_on_stream":2}}]', "duplicate"),
    ('[{"ph":"X","args":{"cuda_sync_kind":1}}]', "text field"),
    ('[{"ph":"X","args":{"wait_on_cuda_event_record_corr_id":"7"}}]', "id of another type"),
    ('[{"ph":"X","args":{"Sequence number":"7"}}]', "id of another type"),  # the Python path: seq none
    ('[{"ph":"X","args":{"Sequence number":1,"Sequence number":2}}]', "duplicate"),
    ('[{"p\\u0068":"X"}]', "escaped key"),
    ('[{"ph":"X","pid":99999999999999999999}]', "int64"),
    ('[{"ph":"X","ts":1e999}]', "range"),
    ('[{"ph":"X","ts":NaN}]', "time of another type"),
    ('[{"ph":"X","x":NaN}]', "number"),
    ('[{"ph":"X","ts":01}]', "separator"),
    ('[{"ph":"X","ts":1.}]', "number"),
    ('[{"ph":"X","name":"a\x01b"}]', "control"),
    ('[{"ph":"X","name":"\\ud800"}]', "surrogate"),
    ('[{"ph":"X","name":"\\x"}]', "escape"),
    ('[{"ph":"X"},]', "not an object"),
    ('[{"ph":"X"}] x', "after the array"),
    ('[{"ph":"X"}', "truncated"),
    ('[1]', "not an object"),
    ('[{"ph":"X","x":' + "[" * 300 + "]" * 300 + "}]", "deeply"),
])
def test_left_to_python(text, reason):
    got = fast_scan.scan(text.encode(), True, Tally())
    assert isinstance(got, str) and reason in got, got


@needs_scanner
@pytest.mark.parametrize("raw", [b'[{"ph":"X","name":"\xff"}]', b'[{"ph":"X","x":"\xc0\xaf"}]',
                                 b'[{"ph":"X","x":"\xed\xa0\x80"}]', b'[{"ph":"X","x":"\xf4\x90\x80\x80"}]'])
def test_invalid_utf8_anywhere_is_left_to_python(raw):
    """Even in a key the tables never read: the Python path repairs it and says so."""
    assert fast_scan.scan(raw, True, Tally()) == "invalid UTF-8"


@needs_scanner
def test_columns_outlive_nothing_they_do_not_need():
    """Columns are imported one by one, so a table keeps only its own columns' buffers."""
    text = json.dumps([_ev(name=f"kernel_{i}") for i in range(1000)]).encode()
    _, tables = fast_scan.scan(text, True, Tally())
    name = tables["acts"]["name"]
    del tables
    assert name[999] == "kernel_999" and name.len() == 1000


_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8)
_num = st.one_of(st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=False, allow_infinity=False), st.none())
_int = st.one_of(st.integers(-2**63, 2**63 - 1), st.none())
_args = st.fixed_dictionaries({}, optional={
    "External id": _int, "external id": _int, "correlation": _int, "device": _int, "stream": _int,
    "bytes": _int, "Input Dims": st.lists(st.lists(st.integers(0, 9), max_size=3), max_size=3),
    "Input type": st.lists(_text, max_size=3), "Concrete Inputs": st.lists(_text, max_size=2),
    "cuda_sync_kind": st.one_of(_text, st.none()), "wait_on_stream": _int, "wait_on_cuda_event_record_corr_id": _int,
    "other": st.one_of(_text, _num, st.booleans()),
})
_event = st.fixed_dictionaries({}, optional={
    "ph": st.one_of(st.sampled_from(["X", "B", "i"]), st.none()),
    "cat": st.one_of(st.sampled_from(["kernel", "cpu_op", "cuda_runtime", "gpu_memcpy", "python_function",
                                      "ac2g", "mtia_ccp_events", "cuda_sync"]), _text, st.none()),
    "name": st.one_of(_text, st.none()),
    "pid": st.one_of(st.integers(-2**63, 2**63 - 1), _text, st.none()),
    "tid": st.one_of(st.integers(-5, 10**6), _text, st.none()),
    "ts": _num, "dur": _num,
    "args": st.one_of(_args, st.none()),
    "id": st.integers(0, 9),
})


@needs_scanner
@settings(max_examples=int(os.environ.get("NONGEMM_FUZZ_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(_event, max_size=12), ascii_only=st.booleans(), indent=st.sampled_from([None, 1]))
def test_random_events_equal_msgspec(events, ascii_only, indent):
    text = json.dumps(events, ensure_ascii=ascii_only, indent=indent).encode()
    fast, slow = _both(text)
    _same(fast, slow)


def test_without_the_scanner_the_python_path_loads(monkeypatch):
    """NONGEMM_FAST_SCAN=off (or no compiler at install): same tables, by msgspec."""
    monkeypatch.setenv("NONGEMM_FAST_SCAN", "off")
    assert not fast_scan.available()
    monkeypatch.setattr(fast_scan, "scan", lambda *a: pytest.fail("scanner used while off"))
    path = shared("h200", "gpt2_fp32_bs8_s128__eager.json.gz")
    trace = loader.load_kineto(path)
    assert trace.activities.height > 0
    assert isinstance(trace.activities["ts_ns"].dtype, type(pl.Int64()))


@needs_scanner
def test_spare_column_buffers_are_returned_after_a_load(monkeypatch):
    """Column buffers are kept from chunk to chunk during a load (no page fault per 4 KB of each
    new chunk) and given back when the load ends, so the link does not run beside them."""
    fast_scan.scan(json.dumps([BASE] * 100).encode(), True, Tally())  # a scan on its own keeps them until trim()
    if fast_scan._SCANNER.cached() == 0 and not sys.platform.startswith(("linux", "darwin", "freebsd")):
        pytest.skip("this build keeps no spare column buffers (no mmap: plain malloc)")
    assert fast_scan._SCANNER.cached() > 0
    fast_scan.trim()
    assert fast_scan._SCANNER.cached() == 0
    monkeypatch.setenv("NONGEMM_CHUNK_BYTES", str(64 << 10))
    kept = []
    real = fast_scan.scan
    monkeypatch.setattr(fast_scan, "scan", lambda *a: kept.append(fast_scan._SCANNER.cached()) or real(*a))
    loader.load_kineto(shared("h200", "bert_base_train_bs8_s128__eager.json.gz"))
    assert len(kept) > 20 and max(kept) > 0  # reuse happened during the load
    assert fast_scan._SCANNER.cached() == 0


def test_a_sequence_number_that_is_no_number_keeps_its_op(tmp_path):
    """``Sequence number`` is read as a number or none: a text or a huge value leaves the op in the
    trace with no sequence number (the scanner leaves the chunk to the Python path, which parses it)."""
    from nongemm_trace.load import load_trace

    path = tmp_path / "seq.json"
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 0, "dur": 5,
         "args": {"Sequence number": "abc"}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
         "args": {"Sequence number": 1e30}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::sub", "pid": 1, "tid": 1, "ts": 20, "dur": 5,
         "args": {"Sequence number": 12}}]}))
    ops = load_trace(path).ops.sort("ts_ns")
    assert ops["name"].to_list() == ["aten::mul", "aten::add", "aten::sub"]
    assert ops["seq"].to_list() == [None, None, 12]
    assert not load_trace(path).anomalies
