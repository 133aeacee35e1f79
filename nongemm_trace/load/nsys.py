"""Nsight Systems SQLite exports (``nsys export --type sqlite``) -> the same tables as Kineto.

* GPU activities: ``CUPTI_ACTIVITY_KIND_KERNEL`` / ``_MEMCPY`` / ``_MEMSET``; kernel names from
  ``StringIds`` (``demangledName``, else ``shortName``), normalised to Kineto's spelling
  where nsys differs (``(int)128`` -> ``128``, ``(bool)0`` -> ``false``,
  ``[lambda(int) (instance 1)]`` -> ``{lambda(int)#1}``, ``<unnamed>`` -> ``(anonymous namespace)``).
* launch calls: ``CUPTI_ACTIVITY_KIND_RUNTIME`` (and ``_DRIVER``), names without the
  ``_v7000``-style version suffix, paired by ``correlationId``.
* ops: NVTX push/pop ranges (``eventType`` 59). ``emit_nvtx`` texts
  ``aten::op, op_id = N, sizes = [...], input_op_ids = [...]`` (older: ``aten::op, seq = N``)
  become the op name plus ``Input Dims``; other ranges are user annotations. Domain
  markers (eventType 75) and unterminated ranges are not ranges.
* threads: ``globalTid`` carries the process id (bits 24-47) and thread id (bits 0-23).

The schema differs between nsys versions: tables and columns are probed, a missing
table is a warning (not every capture has memcpys), a missing essential column is a
one-line error.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import polars as pl

from ..core.trace import Trace
from ..errors import TraceError
from ..schema import EXTRA_COLUMNS
from . import roles
from .graph_capture import capture_note
from .sqlite_safe import ident, integer, interrupted, open_untrusted, text
from .sqlite_safe import tables as safe_tables
from .template_params import fill_template_params

NVTX_PUSH_POP = 59
NVTX_START_END = 60
_EMIT_NVTX = re.compile(r"^(?P<name>[^,]+?)(?:, (?:op_id|seq) = (?P<seq>-?\d+))(?:, sizes = (?P<sizes>\[.*?\]))?"
                        r"(?:, input_op_ids = .*)?$")
_VERSION_SUFFIX = re.compile(r"_v\d+$")
_NORMALIZE = [
    (re.compile(r"\((?:unsigned )?(?:int|long|char|short|unsigned|long long)\)(-?\d+)[uUlL]*"), r"\1"),
    (re.compile(r"\(bool\)0"), "false"),
    (re.compile(r"\(bool\)1"), "true"),
    (re.compile(r"<unnamed>"), "(anonymous namespace)"),
]
_INSTANCE = re.compile(r"\) \(instance (\d+)\)\]")
_LAMBDAS_AT = 3  # lambdas are renamed after the int and bool rules, before <unnamed>


def normalize_kernel_name(name: str) -> str:
    for i, (pat, rep) in enumerate(_NORMALIZE):
        if i == _LAMBDAS_AT:
            name = _lambdas(name)
        name = pat.sub(rep, name)
    return fill_template_params(name)  # ``(int, T2, T3)``: the types themselves


def _lambdas(name: str) -> str:
    r"""``[lambda(ARGS) (instance N)]`` -> ``{lambda(ARGS)#N}`` (what ``\[lambda\(([^)]*)\) \(instance
    (\d+)\)\]`` replaces, before the other rules), in one pass: every opening before the same ``)``
    shares its verdict, so the scan goes on after that ``)`` instead of from each opening."""
    out, pos = [], 0
    while True:
        at = name.find("[lambda(", pos)
        if at < 0:
            break
        close = name.find(")", at + 8)
        if close < 0:
            break
        m = _INSTANCE.match(name, close)
        if m is None:
            out.append(name[pos:close])
            pos = close
            continue
        out += [name[pos:at], "{lambda(", name[at + 8:close], ")#", m.group(1), "}"]
        pos = m.end()
    return "".join(out) + name[pos:]


#: what an event's start and end may be (ns): within it, an end minus a start fits in int64
MAX_TIME_NS = 4 * 10**18
#: the tables the loader reads: each must be a table, never a view (see :mod:`.sqlite_safe`)
READ = ("CUPTI_ACTIVITY_KIND_*", "NVTX_EVENTS", "StringIds", "ENUM_CUDA_MEMCPY_OPER", "TARGET_INFO_GPU",
        "META_DATA_EXPORT", "EXPORT_META_DATA")


def _time_ok(st: Any, en: Any) -> bool:
    return st is not None and en is not None and -MAX_TIME_NS < st <= en < MAX_TIME_NS


def load_nsys(path: str | Path, data: bytes) -> Trace:
    """An export's bytes -> a :class:`Trace`; the database is opened as untrusted input
    (:mod:`.sqlite_safe`: read only, tables only, quoted names, a time budget)."""
    con, budget = open_untrusted(path, data)
    del data
    try:
        return _load(path, con)
    except sqlite3.DatabaseError as exc:
        raise interrupted(path, budget, exc) from None
    finally:
        con.close()


def _load(path: str | Path, con: sqlite3.Connection) -> Trace:
    tables = safe_tables(path, con, READ)
    cupti = [t for t in tables if t.startswith("CUPTI_ACTIVITY_KIND_")]
    if not cupti and "NVTX_EVENTS" not in tables:
        raise TraceError(path, "an SQLite database without Nsight Systems tables (no CUPTI_ACTIVITY_KIND_* or "
                               "NVTX_EVENTS): not an nsys export")
    notes: list[tuple[str, int, str]] = []
    strings = dict(con.execute(f"select {integer('id')}, {text('value')} from StringIds").fetchall()) \
        if "StringIds" in tables else {}
    if not strings:
        notes.append(("missing_table", 1, "no StringIds table: kernel, API and range names are unknown"))

    def s(i: Any) -> str | None:
        return strings.get(i) if i is not None else None

    acts = _activities(path, con, tables, s, notes)
    launches = roles.mark_graph_launches(_launches(path, con, tables, s, notes), acts)
    captured = capture_note(launches, acts)
    if captured:
        notes.append(captured)
    ops = _ops(path, con, tables, s, notes)
    meta = _metadata(con, tables)
    trace = Trace(path=str(path), source_format="nsys", metadata=meta, ops=ops, launches=launches,
                  activities=acts, python=_empty_python())
    for code, n, msg in notes:
        trace.note(code, n, msg)
    return trace


def _need(path, tables, table, cols):
    missing = [c for c in cols if c not in tables[table]]
    if missing:
        raise TraceError(path, f"nsys table {table} lacks columns {', '.join(missing)} (unsupported nsys version?)")


def _col(tables, table, name, default="NULL", kind=integer):
    """The SQL reading column ``name`` of ``table`` (quoted; as an integer, or as ``kind`` says), or
    ``default`` where the table lacks it."""
    return kind(ident(name)) if name in tables[table] else default


def _activities(path, con, tables, s, notes) -> pl.DataFrame:
    rows: list[tuple] = []
    skipped: dict[str, int] = {}
    for table, kind in (("CUPTI_ACTIVITY_KIND_KERNEL", "kernel"), ("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"),
                        ("CUPTI_ACTIVITY_KIND_MEMSET", "memset")):
        if table not in tables:
            if kind == "kernel":
                notes.append(("missing_table", 1, f"no {table} table: the capture has no kernels"))
            continue
        _need(path, tables, table, ["start", "end"])
        dev, stream, corr, st_, en_ = (_col(tables, table, c) for c in
                                       ("deviceId", "streamId", "correlationId", "start", "end"))
        if kind == "kernel":
            q = (f"select {st_}, {en_}, {dev}, {stream}, {corr}, {_col(tables, table, 'demangledName')}, "
                 f"{_col(tables, table, 'shortName')}, {_col(tables, table, 'mangledName')}, NULL from {table}")
        elif kind == "memcpy":
            q = f"select {st_}, {en_}, {dev}, {stream}, {corr}, {_col(tables, table, 'copyKind')}, NULL, NULL, " \
                f"{_col(tables, table, 'bytes')} from {table}"
        else:
            q = f"select {st_}, {en_}, {dev}, {stream}, {corr}, NULL, NULL, NULL, {_col(tables, table, 'bytes')} " \
                f"from {table}"
        copy_kinds = _enum(con, tables, "ENUM_CUDA_MEMCPY_OPER")
        for st, en, d, sm, c, a, b, m, nbytes in con.execute(q):
            if not _time_ok(st, en):
                skipped[kind] = skipped.get(kind, 0) + 1
                continue
            if kind == "kernel":
                raw = s(a) or s(b) or s(m) or "unknown kernel"
                name, short = normalize_kernel_name(raw), s(b)
            elif kind == "memcpy":
                name, short = f"Memcpy {copy_kinds.get(a, 'unknown')}", None
            else:
                name, short = "Memset (Device)", None
            rows.append((name, "kernel" if kind == "kernel" else f"gpu_{kind}", str(d if d is not None else ""),
                         str(sm if sm is not None else ""), int(st), int(en - st), kind, c, d, sm, nbytes, short))
    for kind, n in skipped.items():
        notes.append(("missing_duration", n, f"{n} {kind} rows have no valid start/end (missing, not integers, "
                                             f"end before start, or beyond 4e18 ns); skipped"))
    df = pl.DataFrame(rows, schema={"name": pl.Utf8, "cat": pl.Utf8, "pid": pl.Utf8, "tid": pl.Utf8, "ts_ns": pl.Int64,
                                    "dur_ns": pl.Int64, "kind": pl.Utf8, "correlation": pl.Int64, "device": pl.Int64,
                                    "stream": pl.Int64, "bytes": pl.Int64, **EXTRA_COLUMNS["nsys"]["activities"]},
                      orient="row")
    df = df.sort(["ts_ns", "device", "stream"]).with_columns(pl.lit(None, pl.Int64).alias("external_id"))
    df = df.with_columns((pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns")).with_row_index("activity_id")
    return df.with_columns(pl.col("activity_id").cast(pl.Int64).alias("ev_idx"))


def _enum(con, tables, table) -> dict[int, str]:
    if table not in tables:
        return {}
    col = "label" if "label" in tables[table] else "name"
    if col not in tables[table] or "id" not in tables[table]:
        return {}
    return {i: v for i, v in con.execute(f"select {integer('id')}, {text(ident(col))} from {table}")}


def _split_tid(gtid: int | None) -> tuple[str, str]:
    if gtid is None:
        return "", ""
    return str((gtid >> 24) & 0xFFFFFF), str(gtid & 0xFFFFFF)


def _launches(path, con, tables, s, notes) -> pl.DataFrame:
    rows = []
    for table, cat in (("CUPTI_ACTIVITY_KIND_RUNTIME", "cuda_runtime"), ("CUPTI_ACTIVITY_KIND_DRIVER", "cuda_driver")):
        if table not in tables:
            if cat == "cuda_runtime":
                notes.append(("missing_table", 1, f"no {table} table: GPU activities cannot be linked to launch calls"))
            continue
        _need(path, tables, table, ["start", "end", "globalTid", "correlationId"])
        cols = ", ".join(_col(tables, table, c) for c in ("start", "end", "globalTid", "correlationId", "nameId"))
        for st, en, g, c, n in con.execute(f"select {cols} from {table}"):
            if st is None or en is None or not (-MAX_TIME_NS < st < MAX_TIME_NS and -MAX_TIME_NS < en < MAX_TIME_NS):
                continue
            pid, tid = _split_tid(g)
            rows.append((_VERSION_SUFFIX.sub("", s(n) or "unknown"), cat, pid, tid, int(st), int(max(0, en - st)), c))
    df = pl.DataFrame(rows, schema={"name": pl.Utf8, "cat": pl.Utf8, "pid": pl.Utf8, "tid": pl.Utf8, "ts_ns": pl.Int64,
                                    "dur_ns": pl.Int64, "correlation": pl.Int64}, orient="row").sort("ts_ns")
    df = df.with_columns(pl.lit(None, pl.Int64).alias("external_id"),
                         (pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns")).with_row_index("launch_id")
    return df.with_columns(pl.lit(None, pl.Int64).alias("ev_idx"))


def _ops(path, con, tables, s, notes) -> pl.DataFrame:
    rows: list[tuple[Any, ...]] = []
    if "NVTX_EVENTS" not in tables:
        notes.append(("missing_table", 1, "no NVTX_EVENTS table: no op ranges (capture with -t nvtx under emit_nvtx); "
                                          "activities are classified by kernel name"))
    else:
        _need(path, tables, "NVTX_EVENTS", ["start", "end", "eventType", "globalTid"])
        q = ", ".join(_col(tables, "NVTX_EVENTS", c, kind=k) for c, k in (
            ("start", integer), ("end", integer), ("eventType", integer), ("text", text), ("textId", integer),
            ("globalTid", integer)))
        other = unterminated = 0
        for st, en, et, tx, tid_, g in con.execute(f"select {q} from NVTX_EVENTS"):
            if et != NVTX_PUSH_POP:
                other += et == NVTX_START_END
                continue
            if not _time_ok(st, en):
                unterminated += 1
                continue
            label = tx if tx is not None else (s(tid_) or "")
            m = _EMIT_NVTX.match(label)
            pid, tid = _split_tid(g)
            if m:
                rows.append((m.group("name").strip(), "cpu_op", pid, tid, int(st), int(en - st), m.group("sizes"),
                             int(m.group("seq"))))
            else:
                rows.append((label, "user_annotation", pid, tid, int(st), int(en - st), None, None))
        if unterminated:
            notes.append(("unterminated_ranges", unterminated, f"{unterminated} NVTX ranges have no end; skipped"))
        if other:
            notes.append(("start_end_ranges", other, f"{other} NVTX start/end ranges (not push/pop, may cross "
                                                     f"threads) are not used as op ranges"))
    df = pl.DataFrame(rows, schema={"name": pl.Utf8, "cat": pl.Utf8, "pid": pl.Utf8, "tid": pl.Utf8, "ts_ns": pl.Int64,
                                    "dur_ns": pl.Int64, "input_dims": pl.Utf8, "seq": pl.Int64},
                      orient="row").sort(["ts_ns", "dur_ns"], descending=[False, True])
    df = df.with_columns(
        pl.lit(None, pl.Int64).alias("external_id"), pl.lit(None, pl.Utf8).alias("input_type"),
        pl.lit(None, pl.Utf8).alias("concrete_inputs"), (pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns"))
    # the NVTX sequence number (``seq=``) is kept for the Kineto conversion ("Sequence number")
    df = df.select("name", "cat", "pid", "tid", "ts_ns", "dur_ns", "external_id",
                   *(pl.col(c).cast(pl.Categorical) for c in ("input_dims", "input_type", "concrete_inputs")),
                   "seq", "end_ns")  # the same dtypes as the Kineto loader's op table
    return df.with_row_index("op_id").with_columns(pl.lit(None, pl.Int64).alias("ev_idx"))


def _empty_python() -> pl.DataFrame:
    return pl.DataFrame(schema={"op_id": pl.UInt32, "name": pl.Utf8, "cat": pl.Utf8, "pid": pl.Utf8, "tid": pl.Utf8,
                                "ts_ns": pl.Int64, "dur_ns": pl.Int64, "external_id": pl.Int64, "end_ns": pl.Int64,
                                "ev_idx": pl.Int64})


def _metadata(con, tables) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if "TARGET_INFO_GPU" in tables:
        cols = tables["TARGET_INFO_GPU"]
        want = [c for c in ("id", "name", "totalMemory", "smCount", "chipName", "computeMajor", "computeMinor")
                if c in cols]
        sql = ", ".join(_col(tables, "TARGET_INFO_GPU", c, kind=text if c in ("name", "chipName") else integer)
                        for c in want)
        devs = []
        for row in con.execute(f"select {sql} from TARGET_INFO_GPU") if want else ():
            d = dict(zip(want, row))
            devs.append({"id": d.get("id"), "name": d.get("name"), "totalGlobalMem": d.get("totalMemory"),
                         "numSms": d.get("smCount"), "chipName": d.get("chipName"),
                         **({"computeMajor": d["computeMajor"]} if "computeMajor" in d else {}),
                         **({"computeMinor": d["computeMinor"]} if "computeMinor" in d else {})})
        meta["deviceProperties"] = devs
    for t in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if t in tables and {"name", "value"} <= set(tables[t]):
            kv = dict(con.execute(f"select {text('name')}, {text('value')} from {t}").fetchall())
            meta["nsys_version"] = kv.get("EXPORT_PRODUCT_VERSION")
            meta["nsys_schema_version"] = kv.get("EXPORT_SCHEMA_VERSION")
    return meta


def to_kineto(trace: Trace) -> dict[str, Any]:
    """The loaded tables as a Kineto-compatible document (ts/dur in microseconds)."""
    def us(x):
        return round(int(x) / 1000.0, 3)

    def ident(x):
        return int(x) if isinstance(x, str) and x.lstrip("-").isdigit() else x

    events: list[dict[str, Any]] = []
    for r in trace.ops.iter_rows(named=True):
        args: dict[str, Any] = {}
        if r["input_dims"]:
            import json
            try:
                args["Input Dims"] = json.loads(r["input_dims"])
            except ValueError:
                pass
        if r["seq"] is not None:
            args["Sequence number"] = r["seq"]
        events.append({"ph": "X", "cat": r["cat"], "name": r["name"], "pid": ident(r["pid"]), "tid": ident(r["tid"]),
                       "ts": us(r["ts_ns"]), "dur": us(r["dur_ns"]), "args": args})
    for r in trace.launches.iter_rows(named=True):
        events.append({"ph": "X", "cat": r["cat"], "name": r["name"], "pid": ident(r["pid"]), "tid": ident(r["tid"]),
                       "ts": us(r["ts_ns"]), "dur": us(r["dur_ns"]), "args": {"correlation": r["correlation"]}})
    for r in trace.activities.iter_rows(named=True):
        args = {"device": r["device"], "stream": r["stream"], "correlation": r["correlation"]}
        if r["bytes"] is not None:
            args["bytes"] = r["bytes"]
        if r.get("short_name"):
            args["shortName"] = r["short_name"]
        events.append({"ph": "X", "cat": r["cat"], "name": r["name"], "pid": r["device"], "tid": r["stream"],
                       "ts": us(r["ts_ns"]), "dur": us(r["dur_ns"]), "args": args})
    doc = {"schemaVersion": 1, "traceName": trace.path, "displayTimeUnit": "ms",
           "deviceProperties": trace.metadata.get("deviceProperties", []),
           "nsys_version": trace.metadata.get("nsys_version"), "traceEvents": events}
    return doc
