"""The collective calls a Kineto trace records, with their parameters: one table per rank trace.

Why a reader of its own: the trace tables (:mod:`nongemm_trace.schema`) keep what every analysis
reads, and a collective's parameters are read only when ranks are compared (``analyze`` of several
rank traces). Matching one collective across ranks needs its process group, kind and size, which
torch.profiler writes as args of the NCCL/RCCL kernel and of the host op ``record_param_comms``
("Collective name", "Process Group Name", "In msg nelems", "Out msg nelems", "Group size", "dtype",
"Seq" in some versions); gloo records each collective as a ``gloo:NAME`` range on its own threads,
with the tensor's "Input Dims" and "Input type" only. So the document is decoded once more, with
structs that hold only those fields (msgspec skips every other key in C), only when the file holds
collective records at all.

Returns ``source`` (``kernel``: a device kernel; ``host``: ``record_param_comms``; ``gloo``: a gloo
range), ``name`` (the collective as written), ``pg``, ``seq``, ``in_nelems``, ``out_nelems``,
``group_size``, ``dtype``, ``correlation``, ``device``, ``pid``, ``tid``, ``ts_ns``, ``dur_ns`` (times as
the trace tables hold them: ns since the trace's origin) and ``base_ns`` (``baseTimeNanoseconds``: the
origin on the host's clock, which ranks of one host share).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from ...errors import TraceError
from ..source import read_bytes
from .document import decode_document
from .events import Id, Num, NumOrText
from .tables import ns_expr

#: the bytes that every record this reader keeps contains (a file without them has none)
_MARKERS = (b'"Collective name"', b'"gloo:')


class CommArgs(msgspec.Struct, gc=False, rename={
    "collective": "Collective name", "pg": "Process Group Name", "seq_upper": "Seq", "seq_lower": "seq",
    "in_nelems": "In msg nelems", "out_nelems": "Out msg nelems", "group_size": "Group size",
    "input_dims": "Input Dims", "input_type": "Input type",
}):
    collective: str | None = None
    pg: NumOrText = None
    seq_upper: NumOrText = None
    seq_lower: NumOrText = None
    in_nelems: NumOrText = None
    out_nelems: NumOrText = None
    group_size: NumOrText = None
    dtype: str | None = None
    correlation: NumOrText = None
    device: NumOrText = None
    input_dims: Any = None
    input_type: Any = None


class CommEvent(msgspec.Struct, gc=False):
    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: Id = None
    tid: Id = None
    ts: Num = None
    dur: Num = None
    args: CommArgs | None = None


_TYPED = msgspec.json.Decoder(list[CommEvent])
_ONE = msgspec.json.Decoder(CommEvent)
_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])

SCHEMA = {"source": pl.Utf8, "name": pl.Utf8, "pg": pl.Utf8, "seq": pl.Int64, "in_nelems": pl.Int64,
          "out_nelems": pl.Int64, "group_size": pl.Int64, "dtype": pl.Utf8, "correlation": pl.Int64,
          "device": pl.Int64, "pid": pl.Utf8, "tid": pl.Utf8, "ts_ns": pl.Int64, "dur_ns": pl.Int64,
          "base_ns": pl.Int64}


def _decode(raw: Any) -> list[CommEvent]:
    """Every event, typed; an event whose fields have unexpected types is skipped (the loader counts them)."""
    try:
        return _TYPED.decode(raw)
    except msgspec.ValidationError:
        pass
    out = []
    for item in _ITEMS.decode(raw):
        try:
            out.append(_ONE.decode(item))
        except (msgspec.ValidationError, msgspec.DecodeError):
            continue
    return out


def _int(v: Any) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return int(v)
    try:
        return int(str(v), 0)
    except ValueError:
        return None


def _first_tensor_nelems(dims: Any) -> int | None:
    """Elements of the first tensor of ``Input Dims`` (``[[73856]]`` or, for a tensor list, ``[[[n]]]``)."""
    first = dims[0] if isinstance(dims, list) and dims else None
    while isinstance(first, list) and first and isinstance(first[0], list):
        first = first[0]
    if not isinstance(first, list) or not all(isinstance(d, int) for d in first):
        return None
    n = 1
    for d in first:
        n *= d
    return n


def _row(e: CommEvent, base: int | None) -> tuple | None:
    a = e.args
    name = e.name or ""
    if a is not None and a.collective:
        source = "kernel" if e.cat in ("kernel", "Kernel") else "host" if name == "record_param_comms" else None
        if source is None:
            return None
        seq = _int(a.seq_upper) if a.seq_upper is not None else _int(a.seq_lower)
        return (source, a.collective, None if a.pg is None else str(a.pg), seq, _int(a.in_nelems),
                _int(a.out_nelems), _int(a.group_size), a.dtype, _int(a.correlation), _int(a.device),
                str(e.pid), str(e.tid), e.ts, e.dur, base)
    if name.startswith("gloo:"):
        a = a or CommArgs()
        n = _first_tensor_nelems(a.input_dims)
        dtype = a.input_type[0] if isinstance(a.input_type, list) and a.input_type and isinstance(
            a.input_type[0], str) else None
        return ("gloo", name[len("gloo:"):], None, None, n, None, None, dtype, None, None, str(e.pid), str(e.tid),
                e.ts, e.dur, base)
    return None


def read_collective_records(path: str | Path) -> pl.DataFrame:
    """The collective records of a Kineto JSON trace (see the module's docstring); no rows where the
    file holds none."""
    data = read_bytes(path)
    if not any(m in data for m in _MARKERS):
        return pl.DataFrame(schema=SCHEMA)
    meta, raw, _ = decode_document(path, data)
    del data
    if raw is None:
        return pl.DataFrame(schema=SCHEMA)
    base = _int(meta.get("baseTimeNanoseconds"))
    try:
        events = _decode(raw)
    except msgspec.DecodeError:
        raise TraceError(path, "collective records: invalid JSON") from None
    # the few collective events picked in polars (one attribute read per event, as the loader's tables do);
    # only those become rows
    names = pl.Series([e.name for e in events], dtype=pl.Utf8)
    named = pl.Series([e.args.collective if e.args is not None else None for e in events], dtype=pl.Utf8)
    timed = pl.Series([e.ph == "X" and e.ts is not None and e.dur is not None for e in events], dtype=pl.Boolean)
    pick = ((named.is_not_null() | names.str.starts_with("gloo:").fill_null(False)) & timed).arg_true().to_list()
    picked = [events[i] for i in pick]
    del events, names, named, timed
    rows = [r for r in (_row(e, base) for e in picked) if r is not None]
    df = pl.DataFrame(rows, schema={**SCHEMA, "ts_ns": pl.Float64, "dur_ns": pl.Float64}, orient="row")
    return df.with_columns(ns_expr("ts_ns").alias("ts_ns"), ns_expr("dur_ns").alias("dur_ns")).select(list(SCHEMA))
