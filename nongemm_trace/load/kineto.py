"""Kineto / Chrome-trace JSON -> :class:`~nongemm_trace.trace.Trace`.

Decoding uses msgspec with typed structs (only the fields we use are
materialised; unknown keys are skipped inside the C decoder). A trace whose
events have fields of an unexpected type is decoded a second time loosely, and
the offending events are counted and skipped with a warning instead of failing
the whole file.

Timestamps: Kineto writes microseconds with three decimals. They become int64
nanoseconds with ``round(x * 1000)``; durations are converted on their own (never
``round(end) - round(start)``), so sub-microsecond kernels keep their length.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional, Union

import msgspec
import polars as pl

from ..errors import TraceError
from ..trace import Trace
from . import roles
from .source import SQLITE_MAGIC, read_bytes

Num = Union[int, float, None]
Id = Union[int, str, None]
#: ROCm writes some numeric args as strings ("stream": "0x0"): accepted and parsed.
NumOrText = Union[int, float, str, None]


class Args(msgspec.Struct, gc=False, rename={
    "external_id": "External id",
    "external_id_legacy": "external id",
    "input_dims": "Input Dims",
    "input_type": "Input type",
    "concrete_inputs": "Concrete Inputs",
    "sequence_number": "Sequence number",
    "fwd_thread_id": "Fwd thread id",
}):
    external_id: Num = None
    external_id_legacy: Num = None
    correlation: Num = None
    device: NumOrText = None
    stream: NumOrText = None
    bytes: NumOrText = None
    # kept as raw JSON text (msgspec.Raw cannot sit in a Union; empty Raw = absent)
    input_dims: msgspec.Raw = msgspec.Raw()
    input_type: msgspec.Raw = msgspec.Raw()
    concrete_inputs: msgspec.Raw = msgspec.Raw()
    sequence_number: Num = None
    fwd_thread_id: Num = None
    kernel_name: Optional[str] = None
    kernel_backend: Optional[str] = None


class Event(msgspec.Struct, gc=False):
    ph: Optional[str] = None
    cat: Optional[str] = None
    name: Optional[str] = None
    pid: Id = None
    tid: Id = None
    ts: Num = None
    dur: Num = None
    args: Optional[Args] = None


class LooseEvent(msgspec.Struct):
    """Same keys, any types: the fallback when the typed decode rejects a field."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: Any = None


_EVENTS_TYPED = msgspec.json.Decoder(list[Event])
_EVENT_TYPED = msgspec.json.Decoder(Event)
_ENCODE = msgspec.json.Encoder()
_EVENTS_LOOSE = msgspec.json.Decoder(list[LooseEvent])
_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ANY = msgspec.json.Decoder()

_EMPTY_ARGS = Args()
_SKIPPED = Event()
#: |ts| and dur beyond this many microseconds (~127 years) cannot be real and would
#: overflow int64 nanoseconds once added together
_TIME_LIMIT_US = 4e15


def _raw_texts(raws: list[msgspec.Raw]) -> pl.Series:
    """Raw JSON fragments -> a text column (null where absent), decoded in bulk."""
    s = pl.Series([bytes(r) for r in raws], dtype=pl.Binary)
    return pl.select(pl.when(s.bin.size() > 0).then(s.cast(pl.Utf8, strict=False))).to_series()


def _id_text(v: Any) -> str:
    return "" if v is None else str(v)


def _ids(values: list[Any]) -> pl.Series:
    """pid / tid values (ints, or strings such as "Spans") as text, converted in bulk when all are ints."""
    try:
        return pl.Series(values, dtype=pl.Int64).cast(pl.Utf8).fill_null("")
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        return pl.Series([_id_text(v) for v in values], dtype=pl.Utf8)


def decode_document(path: str | Path, data: bytes) -> tuple[dict[str, Any], msgspec.Raw | None, bool]:
    """Split the document into metadata and the raw ``traceEvents`` array.

    Returns (metadata, raw events, is_bare_array). A bare JSON array of events
    (the Chrome trace "array format") is accepted too.
    """
    head = data[:64].lstrip()
    if data.startswith(SQLITE_MAGIC):
        raise TraceError(path, "is an SQLite database, not a Kineto JSON trace")
    if not head:
        raise TraceError(path, "empty file")
    if head[:1] == b"[":
        return {}, msgspec.Raw(data), True
    if head[:1] != b"{":
        raise TraceError(path, "not a JSON trace (does not start with '{' or '[')")
    try:
        top = _TOP.decode(data)
    except msgspec.DecodeError as exc:
        raise _MalformedJSON(path, f"invalid or truncated JSON ({_short(exc)})") from None
    except RecursionError:
        raise TraceError(path, "JSON nested too deeply") from None
    events = top.pop("traceEvents", None)
    meta: dict[str, Any] = {}
    for key, raw in top.items():
        try:
            meta[key] = _ANY.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            meta[key] = None
    if events is None:
        raise TraceError(path, "no 'traceEvents' key: not a Kineto/Chrome trace")
    return meta, events, False


class _MalformedJSON(TraceError):
    """A decode failure that a repair pass may fix (bad UTF-8, NaN/Infinity literals)."""


def _repair(data: bytes) -> tuple[bytes, str] | None:
    """Fix what Python's own JSON writer and broken writers leave behind, or None.

    * invalid UTF-8 bytes become U+FFFD (names may be mangled; times are not);
    * ``NaN`` / ``Infinity`` literals (``json.dumps`` writes them) become null,
      so the events that carry them are counted as missing a valid time.
    """
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace").encode("utf-8"), "invalid UTF-8 bytes were replaced by U+FFFD"
    if b"NaN" in data or b"Infinity" in data:
        import json
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            return None
        return _ENCODE.encode(doc), "NaN / Infinity numbers (not JSON) were read as null"
    return None


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200]


def decode_events(path: str | Path, raw: msgspec.Raw, anomalies: list[tuple[str, int, str]]) -> list[Event]:
    try:
        return _EVENTS_TYPED.decode(raw)
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError as exc:
        raise _MalformedJSON(path, f"invalid or truncated JSON ({_short(exc)})") from None
    except RecursionError:
        raise TraceError(path, "JSON nested too deeply") from None
    try:
        loose = _EVENTS_LOOSE.decode(raw)
    except msgspec.ValidationError:
        loose = None  # some items are not objects: go item by item
    except (msgspec.DecodeError, RecursionError) as exc:  # pragma: no cover - typed pass raised first
        raise TraceError(path, f"invalid JSON ({_short(exc)})") from None
    if loose is None:
        try:
            items = _ANY.decode(raw)
        except (msgspec.DecodeError, RecursionError) as exc:  # pragma: no cover
            raise TraceError(path, f"invalid JSON ({_short(exc)})") from None
        if not isinstance(items, list):
            raise TraceError(path, "'traceEvents' is not a list")
        loose = [it if isinstance(it, dict) else None for it in items]
    good: list[Event] = []
    bad: dict[str, int] = {}
    for ev in loose:
        if ev is None:
            bad["(not an object)"] = bad.get("(not an object)", 0) + 1
            good.append(_SKIPPED)
            continue
        try:
            good.append(_EVENT_TYPED.decode(_ENCODE.encode(ev)))
        except (msgspec.ValidationError, msgspec.DecodeError, msgspec.EncodeError, TypeError, ValueError):
            cat = ev.cat if isinstance(ev, LooseEvent) else ev.get("cat")
            cat = cat if isinstance(cat, str) else "?"
            bad[cat] = bad.get(cat, 0) + 1
            good.append(_SKIPPED)  # keeps positions equal to the file's event indices
    for cat, n in sorted(bad.items()):
        if cat == "(not an object)":
            anomalies.append(("malformed_events", n, f"{n} items of traceEvents are not event objects; skipped"))
        else:
            anomalies.append(("malformed_events", n, f"{n} '{cat}' events had fields of the wrong type; skipped"))
    return good


#: events are decoded and turned into columns this many bytes of JSON at a time, so the
#: Python objects of only one chunk are alive at once (peak memory ~ the JSON size)
CHUNK_BYTES = 16 << 20
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


class _SplitFailed(Exception):
    """A chunk boundary fell inside an event (a string or nested array): decode whole instead."""


def _chunked(path: str | Path, raw: msgspec.Raw, pending: list[tuple[str, int, str]]):
    """Yield (index of the first event, events) per chunk of the traceEvents array."""
    mv = memoryview(raw)
    n = len(mv)
    start = 1  # after '['
    end = n - 1  # before ']'
    first = 0
    while start < end:
        cut = end
        if end - start > CHUNK_BYTES:
            m = _BOUNDARY.search(mv, start + CHUNK_BYTES, end)
            cut = m.start() + 1 if m else end  # keep the '}' in this chunk; the ',' is dropped
        body = bytes(mv[start:cut]).strip().rstrip(b",")
        if body:
            try:
                events = decode_events(path, msgspec.Raw(b"[" + body + b"]"), pending)
            except _MalformedJSON:
                raise _SplitFailed from None
            yield first, events
            first += len(events)
        if cut >= end:
            break
        nxt = -1
        probe = cut
        while probe < end and nxt < 0:  # the next event's '{' is a few bytes after the cut
            window = bytes(mv[probe:min(end, probe + 4096)])
            k = window.find(b"{")
            nxt = probe + k if k >= 0 else -1
            probe += len(window)
        if nxt < 0:
            break
        start = nxt


def load_kineto(path: str | Path, *, keep_python: bool = False, data: bytes | None = None) -> Trace:
    """Load a Kineto JSON (.json or .json.gz) trace into columnar tables."""
    if data is None:
        data = read_bytes(path)
    pending: list[tuple[str, int, str]] = []
    try:
        meta, raw_events, bare = decode_document(path, data)
        if not bare and len(raw_events) > 2 * CHUNK_BYTES:
            chunk_pending: list[tuple[str, int, str]] = []
            try:
                trace = _build(str(path), meta, _chunked(path, raw_events, chunk_pending), keep_python,
                               pending + chunk_pending)
                for code, n, msg in chunk_pending:
                    trace.note(code, n, msg)
                return trace
            except _SplitFailed:
                pass  # an unusual layout: fall back to decoding the array whole
        events = decode_events(path, raw_events, pending)
    except _MalformedJSON as first:
        fixed = _repair(data)
        if fixed is None:
            raise TraceError(first.path, first.problem) from None
        data, note = fixed
        pending.append(("repaired_json", 1, note))
        try:
            meta, raw_events, _ = decode_document(path, data)
            events = decode_events(path, raw_events, pending)
        except _MalformedJSON:
            raise TraceError(first.path, first.problem) from None
    del data, raw_events
    return _build(str(path), meta, [(0, events)], keep_python, pending)


def _build(path: str, meta: dict[str, Any], chunks, keep_python: bool,
           pending: list[tuple[str, int, str]]) -> Trace:
    """Route events to tables, chunk by chunk: ``chunks`` yields (index of its first event,
    events); each chunk becomes partial columns at once and its Python objects are freed."""
    parts: dict[str, list[pl.DataFrame]] = {"ops": [], "launches": [], "acts": [], "py": []}
    bad_time: dict[str, int] = {}
    bad_phase: dict[str, int] = {}
    other = {"n": 0, "us": 0.0, "cats": set()}
    no_cat = 0
    for first, events in chunks:
        ops: list[Event] = []
        launches: list[Event] = []
        acts: list[Event] = []
        py: list[Event] = []
        other_device: list[Event] = []
        route: dict[str, list[Event]] = {}
        where: dict[int, list[int]] = {id(acts): [], id(ops): [], id(launches): [], id(py): [], id(other_device): []}
        for c in roles.ACTIVITY_KIND:
            route[c] = acts
        for c in roles.OP_CATEGORIES:
            route[c] = ops
        for c in roles.LAUNCH_CATEGORIES:
            route[c] = launches
        for c in roles.OTHER_DEVICE_CATEGORIES:
            route[c] = other_device
        if keep_python:
            for c in roles.PYTHON_CATEGORIES:
                route[c] = py
        for i, ev in enumerate(events, start=first):
            cat = ev.cat
            if cat is None:
                if ev.ph == "X" and ev is not _SKIPPED:
                    no_cat += 1
                continue
            bucket = route.get(cat)
            if bucket is None:
                continue
            if ev.ph != "X":
                bad_phase[cat] = bad_phase.get(cat, 0) + 1
                continue
            ts, dur = ev.ts, ev.dur
            # comparisons are False for NaN, so NaN fails here too
            if ts is None or dur is None or not (0 <= dur < _TIME_LIMIT_US) or not (-_TIME_LIMIT_US < ts < _TIME_LIMIT_US):
                bad_time[cat] = bad_time.get(cat, 0) + 1
                continue
            bucket.append(ev)
            where[id(bucket)].append(i)
        for key, evs, fn in (("ops", ops, _op_table), ("launches", launches, _launch_table),
                             ("acts", acts, _activity_table), ("py", py, lambda e: _op_table(e, minimal=True))):
            if evs or not parts[key]:
                parts[key].append(fn(evs).with_columns(pl.Series("ev_idx", where[id(evs)], dtype=pl.Int64)))
        if other_device:
            other["n"] += len(other_device)
            other["us"] += sum(float(e.dur) for e in other_device)
            other["cats"] |= {e.cat for e in other_device}
        del events, ops, launches, acts, py, other_device

    def table(key: str, index: str) -> pl.DataFrame:
        frames = parts[key]
        df = frames[0] if len(frames) == 1 else pl.concat([f for f in frames if f.height] or frames[:1])
        return df.drop(index).with_row_index(index)

    trace = Trace(
        path=path,
        source_format="kineto",
        metadata=meta,
        ops=table("ops", "op_id"),
        launches=table("launches", "launch_id"),
        activities=table("acts", "activity_id"),
        python=table("py", "op_id"),
    )
    for code, n, msg in pending:
        trace.note(code, n, msg)
    for cat, n in sorted(bad_time.items()):
        trace.note("missing_duration", n, f"{n} '{cat}' events had no valid ts/dur (missing, negative, NaN or "
                                          f"beyond 4e15 us); skipped")
    for cat, n in sorted(bad_phase.items()):
        trace.note("unsupported_phase", n, f"{n} '{cat}' events are not complete ('X') events (e.g. B/E pairs); skipped")
    trace.note("missing_category", no_cat, f"{no_cat} complete events had no 'cat'; ignored")
    _dedupe(trace)
    if other["n"]:
        trace.note(
            "other_device_events", other["n"],
            f"{other['n']} device events of a non-CUDA/ROCm accelerator ({', '.join(sorted(other['cats']))}; "
            f"{other['us']:,.1f} us summed, overlapping) are not GPU activities and are not in the GPU totals",
        )
    return trace


def _ns(values: list[Any]) -> pl.Series:
    """Microsecond floats -> int64 nanoseconds, rounded to the nearest ns.

    The integer and fractional microseconds are scaled apart: ``x * 1000`` on an
    epoch-based timestamp (~1.7e15 us) would exceed float64's 53-bit mantissa and
    move times by up to 128 ns, enough to break the nesting of sub-microsecond ops.
    """
    s = pl.Series(values, dtype=pl.Float64, strict=False)
    whole = s.floor()
    frac_ns = ((s - whole) * 1000.0).round(0)
    return whole.cast(pl.Int64, strict=False) * 1000 + frac_ns.cast(pl.Int64, strict=False)


def _parse_int(v: Any) -> Any:
    if isinstance(v, str):
        try:
            return int(v, 0)
        except ValueError:
            return None
    return v


def _int(values: list[Any]) -> pl.Series:
    try:  # the common case: ints and nulls only
        return pl.Series(values, dtype=pl.Int64)
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        pass
    values = [_parse_int(v) for v in values]
    s = pl.Series(values, dtype=pl.Float64, strict=False)
    return s.cast(pl.Int64, strict=False)


def _ext_ids(evs: list[Event]) -> list[Any]:
    out = []
    for e in evs:
        a = e.args
        if a is None:
            out.append(None)
        else:
            out.append(a.external_id if a.external_id is not None else a.external_id_legacy)
    return out


def _common(evs: list[Event]) -> dict[str, Any]:
    ts = _ns([e.ts for e in evs])
    dur = _ns([e.dur for e in evs])
    return {
        "name": pl.Series([e.name or "" for e in evs], dtype=pl.Utf8),
        "cat": pl.Series([e.cat for e in evs], dtype=pl.Utf8),
        "pid": _ids([e.pid for e in evs]),
        "tid": _ids([e.tid for e in evs]),
        "ts_ns": ts,
        "dur_ns": dur,
    }


def _op_table(evs: list[Event], minimal: bool = False) -> pl.DataFrame:
    cols = _common(evs)
    cols["external_id"] = _int(_ext_ids(evs))
    if not minimal:
        args = [e.args or _EMPTY_ARGS for e in evs]
        cols["input_dims"] = _raw_texts([a.input_dims for a in args])
        cols["input_type"] = _raw_texts([a.input_type for a in args])
        cols["concrete_inputs"] = _raw_texts([a.concrete_inputs for a in args])
        cols["sequence_number"] = _int([a.sequence_number for a in args])
        cols["fwd_thread_id"] = _int([a.fwd_thread_id for a in args])
        cols["kernel_backend"] = pl.Series([a.kernel_backend for a in args], dtype=pl.Utf8)
    df = pl.DataFrame(cols)
    return df.with_columns((pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns")).with_row_index("op_id")


_DEDUPE = {
    "activities": ("activity_id", ["name", "pid", "tid", "ts_ns", "dur_ns", "correlation", "device", "stream"],
                   "GPU activity events were exact duplicates (same kernel, stream, start, duration); counted once"),
    "ops": ("op_id", ["name", "pid", "tid", "ts_ns", "dur_ns", "external_id"],
            "op events were exact duplicates; counted once"),
    "launches": ("launch_id", ["name", "pid", "tid", "ts_ns", "dur_ns", "correlation"],
                 "launch-call events were exact duplicates; counted once"),
}


def _dedupe(trace: Trace) -> None:
    """Drop exact duplicate events (a writer that flushed a buffer twice), with a warning:
    two kernels cannot start at the same nanosecond on the same stream."""
    for table, (idx, keys, msg) in _DEDUPE.items():
        df = getattr(trace, table)
        if df.height == 0:
            continue
        uniq = df.unique(subset=keys, keep="first", maintain_order=True)
        dropped = df.height - uniq.height
        if dropped:
            setattr(trace, table, uniq.drop(idx).with_row_index(idx))
            trace.note(f"duplicate_{table}", dropped, f"{dropped} {msg}")


def _launch_table(evs: list[Event]) -> pl.DataFrame:
    cols = _common(evs)
    cols["external_id"] = _int(_ext_ids(evs))
    cols["correlation"] = _int([(e.args.correlation if e.args else None) for e in evs])
    df = pl.DataFrame(cols)
    return df.with_columns((pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns")).with_row_index("launch_id")


def _activity_table(evs: list[Event]) -> pl.DataFrame:
    cols = _common(evs)
    args = [e.args or _EMPTY_ARGS for e in evs]
    cols["kind"] = pl.Series([roles.ACTIVITY_KIND[e.cat] for e in evs], dtype=pl.Utf8)
    cols["external_id"] = _int(_ext_ids(evs))
    cols["correlation"] = _int([a.correlation for a in args])
    cols["device"] = _int([a.device for a in args])
    cols["stream"] = _int([a.stream for a in args])
    cols["bytes"] = _int([a.bytes for a in args])
    df = pl.DataFrame(cols)
    return df.with_columns((pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns")).with_row_index("activity_id")
