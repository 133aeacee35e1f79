"""The partial tables of a Kineto trace's chunks -> one :class:`~nongemm_trace.core.trace.Trace`:
concatenated in file order, rows numbered, exact duplicates dropped, what was set aside
recorded as warnings. Both the streamed and the whole-document path end here."""

from __future__ import annotations

from typing import Any

import polars as pl

from ...core.trace import Trace, no_overhead
from ...schema import NARROW
from .. import roles
from ..graph_capture import capture_note
from .tables import MAX_NAME_CHARS, TABLES, Tally


def in_file_order(chunks: dict[int, tuple[int, dict[str, pl.DataFrame]]]) -> dict[str, list[pl.DataFrame]]:
    """The chunks' partial tables in file order, ``ev_idx`` shifted from chunk to file positions."""
    parts: dict[str, list[pl.DataFrame]] = {k: [] for k in TABLES}
    first = 0
    for n in sorted(chunks):
        count, tables = chunks.pop(n)
        for k, df in tables.items():
            parts[k].append(df.with_columns(pl.col("ev_idx") + first) if first and df.height else df)
        first += count
    return parts


def build(path: str, meta: dict[str, Any], parts: dict[str, list[pl.DataFrame]], tally: Tally,
           pending: list[tuple[str, int, str]]) -> Trace:
    """Concatenate the chunks' partial tables, number the rows, and record what was set aside."""

    def table(key: str, index: str | None) -> pl.DataFrame:
        frames = [f for f in parts[key] if f.height] or parts[key][:1]
        parts[key] = []
        # no rechunk: a copy of every table at once would double the peak memory
        df = frames[0] if len(frames) == 1 else pl.concat(frames, rechunk=False)
        return df.with_row_index(index) if index else df

    ops, overhead = _set_apart_overhead(table("ops", None))
    trace = Trace(
        path=path,
        source_format="kineto",
        metadata=meta,
        ops=ops.with_row_index("op_id"),
        launches=table("launches", "launch_id"),
        activities=table("acts", "activity_id"),
        python=table("py", "op_id"),
        cuda_syncs=table("syncs", "sync_id"),
        profiler_overhead=overhead,
    )
    narrow_ids(trace)
    for code, n, msg in pending:
        trace.note(code, n, msg)
    for cat, n in sorted(tally.bad_time.items()):
        trace.note("missing_duration", n, f"{n} '{cat}' events had no valid ts/dur (missing, negative, NaN or "
                                          f"beyond 4e15 us); skipped")
    for cat, n in sorted(tally.bad_phase.items()):
        trace.note("unsupported_phase", n,
                   f"{n} '{cat}' events are not complete ('X') events (e.g. B/E pairs); skipped")
    trace.note("missing_category", tally.no_cat, f"{tally.no_cat} complete events had no 'cat'; ignored")
    repeated = tally.duplicate_keys.note()
    if repeated:
        trace.note(*repeated)
    _dedupe(trace, tally.repeats)
    _cut_long_names(trace, tally.long_names)
    trace.launches = roles.mark_graph_launches(trace.launches, trace.activities)
    note = capture_note(trace.launches, trace.activities)
    if note:
        trace.note(*note)
    if tally.other_n:
        trace.note(
            "other_device_events", tally.other_n,
            f"{tally.other_n} device events are not GPU activities this tool reads ("
            f"{'; '.join(f'{c}: {roles.OTHER_DEVICE_NOTES.get(c, c)}' for c in sorted(tally.other_cats))}; "
            f"{tally.other_ns / 1000:,.1f} us summed, overlapping) and are not in the GPU totals",
        )
    return trace


#: id columns held as Int32 where every value of the trace fits (schema.NARROW): each is a key of
#: joins and lookups only (never summed or shifted past the load), and of the dense trace's 96 bytes a
#: kernel row, these are 24. One dtype per column over every table, so that a join of two tables'
#: ids meets the same type (an as-of join by a key refuses two)
_ID_TABLES = ("ops", "launches", "activities", "python")
_INT32 = (-(1 << 31), (1 << 31) - 1)


def narrow_ids(trace: Trace) -> None:
    """The trace's id columns (:data:`schema.NARROW`) as Int32 where all their values fit, and integer
    columns with no value at all as nulls whose buffer is never written (a GPU-only trace's ``bytes``:
    the scanner wrote a zero per row). Done once the chunks are one table: a chunk cannot know
    whether a later one needs 64 bits."""
    tables = {t: getattr(trace, t) for t in _ID_TABLES}
    for col in NARROW:
        have = [df[col] for df in tables.values() if col in df.columns and df.height]
        lo = min((s.min() for s in have if s.null_count() < s.len()), default=0)
        hi = max((s.max() for s in have if s.null_count() < s.len()), default=0)
        if _INT32[0] <= lo and hi <= _INT32[1]:
            tables = {t: df.with_columns(pl.col(col).cast(pl.Int32)) if col in df.columns else df
                      for t, df in tables.items()}
    for t, df in tables.items():
        empty = [c for c, dtype in df.schema.items()
                 if dtype.is_integer() and df.height and df[c].null_count() == df.height]
        if empty:
            df = df.with_columns(pl.repeat(None, df.height, dtype=df.schema[c], eager=True).alias(c) for c in empty)
        setattr(trace, t, df)


def _set_apart_overhead(ops: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The ops without the profiler's overhead events (roles.OVERHEAD_CATEGORIES), and those events'
    times. Most traces hold one or none, so the ops are filtered only when there is one."""
    if ops.height == 0 or "cat" not in ops.columns:
        return ops, no_overhead()
    is_overhead = pl.col("cat").cast(pl.String).is_in(list(roles.OVERHEAD_CATEGORIES))
    overhead = ops.filter(is_overhead).select(pl.col("ts_ns").cast(pl.Int64), pl.col("dur_ns").cast(pl.Int64))
    return (ops.filter(~is_overhead) if overhead.height else ops), overhead


def _cut_long_names(trace: Trace, cut: int = 0) -> None:
    """Names over :data:`.tables.MAX_NAME_CHARS` cut (the loader's chunks cut theirs before their
    texts become codes: ``cut`` of them), all counted in one warning."""
    for table in ("ops", "launches", "activities", "python", "cuda_syncs"):
        df = getattr(trace, table)
        if df.height == 0 or "name" not in df.columns:
            continue
        dtype = df.schema["name"]
        text = pl.col("name").cast(pl.String)
        long = (pl.col("name").cat.len_chars() if dtype == pl.Categorical else text.str.len_chars()) > MAX_NAME_CHARS
        n = df.select(long.sum()).item()
        if n:
            setattr(trace, table, df.with_columns(
                pl.when(long).then(text.str.head(MAX_NAME_CHARS)).otherwise(text).cast(dtype).alias("name")))
            cut += n
    trace.note("long_names", cut, f"{cut} event names were longer than {MAX_NAME_CHARS:,} characters; cut to "
                                  f"their first {MAX_NAME_CHARS:,}")


_DEDUPE = {
    "activities": ("activity_id", ["name", "pid", "tid", "ts_ns", "dur_ns", "correlation", "device", "stream"],
                   "GPU activity events were exact duplicates (same kernel, stream, start, duration); counted once"),
    "ops": ("op_id", ["name", "pid", "tid", "ts_ns", "dur_ns", "external_id"],
            "op events were exact duplicates; counted once"),
    "launches": ("launch_id", ["name", "pid", "tid", "ts_ns", "dur_ns", "correlation"],
                 "launch-call events were exact duplicates; counted once"),
}
#: a chunk's table -> the trace's (the chunks' partial tables are named as :data:`.tables.TABLES`)
_CHUNK_TABLES = {"acts": "activities", "ops": "ops", "launches": "launches"}


def _repeats(df: pl.DataFrame, keys: list[str]) -> pl.Series:
    """The row positions (u32) of ``df``'s exact repeats of an earlier row by ``keys``. Duplicates share
    start and duration: such rows are found by sorting two int columns (hashing millions of rows costs
    several times more memory), and the full key compared on those only."""
    times = df.select("ts_ns", "dur_ns", pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row")) \
        .sort("ts_ns", "dur_ns")
    same = (pl.col("ts_ns").diff() == 0) & (pl.col("dur_ns").diff() == 0)
    rows = times.filter(same.fill_null(False) | same.shift(-1).fill_null(False))["_row"].sort()
    if rows.len() == 0:
        return rows
    cand = df.select(keys)[rows]  # the key columns only: all rows are candidates in a dense file
    return rows.filter(~cand.select(pl.struct(keys).is_first_distinct()).to_series())


def drop_chunk_repeats(tables: dict[str, pl.DataFrame], repeats: dict[str, int]) -> dict[str, pl.DataFrame]:
    """One chunk's partial tables without the exact repeats inside the chunk, counted in ``repeats``
    (by the trace's table name), before the chunk is kept: one event written millions of times (a
    writer flushing one buffer in a loop) then costs a row per chunk, not a row per event (dense small
    events inflate several times as tables). The first of each is kept, so :func:`_dedupe` over the
    whole trace, which finds the repeats across chunks, leaves the same rows as on the whole file."""
    for key, table in _CHUNK_TABLES.items():
        df = tables.get(key)
        if df is None or df.height < 2 or df["ts_ns"].n_unique() == df.height:  # (a tenth of the search's time)
            continue
        drop = _repeats(df, _DEDUPE[table][1])
        if drop.len():
            keep = pl.repeat(True, df.height, eager=True).scatter(drop, False).arg_true()
            # gathered, and the texts made anew: a filtered or gathered text column still holds the
            # chunk's text buffers, and a filter of a column the scanner made may view its buffer
            # (one row kept of a chunk held all 11 MB of it)
            tables[key] = df[keep].with_columns(pl.col(c).cast(pl.Categorical).cast(pl.String)
                                                for c, dtype in df.schema.items() if dtype == pl.String)
            repeats[table] = repeats.get(table, 0) + drop.len()
    return tables


def _dedupe(trace: Trace, repeats: dict[str, int] | None = None) -> None:
    """Drop exact duplicate events (a writer that flushed a buffer twice), with a warning:
    two kernels cannot start at the same nanosecond on the same stream. ``repeats``: those the
    chunks already dropped (:func:`drop_chunk_repeats`), counted in the same warning."""
    for table, (idx, keys, msg) in _DEDUPE.items():
        df = getattr(trace, table)
        dropped = (repeats or {}).get(table, 0)
        if df.height:
            drop = _repeats(df, keys)
            if drop.len():
                keep = pl.repeat(True, df.height, eager=True).scatter(drop, False)
                setattr(trace, table, df.filter(keep).drop(idx).with_row_index(idx))
                dropped += drop.len()
        if dropped:
            trace.note(f"duplicate_{table}", dropped, f"{dropped} {msg}")
