"""How much of an interval a set of other intervals covers, for every row at once.

Why a module: two measures need it. While a host thread captures a CUDA/HIP graph the work it
launches is recorded, not run, so the GPU idles for as long as the capture lasts: ``launch`` sets
that part of an idle gap apart from host-bound idle (load/graph_capture.py). And a collective
kernel is hidden by the computation that runs beside it: its overlap with the device's other
activities (metrics/collectives.py).

Columnar: the intervals are merged into disjoint ones with the length covered before each (a prefix
sum); the covered length up to any time ``t`` is then one as-of join, and an interval's overlap the
difference at its two ends.
"""

from __future__ import annotations

import polars as pl

COVER_SCHEMA = {"s": pl.Int64, "e": pl.Int64, "before": pl.Int64}


def interval_cover(intervals: pl.DataFrame, start: str = "ts_ns", end: str = "end_ns") -> pl.DataFrame:
    """``s, e, before``: the union of ``intervals`` as disjoint intervals in time order, each with the
    length covered before it."""
    w = intervals.select(pl.col(start).cast(pl.Int64).alias("s"), pl.col(end).cast(pl.Int64).alias("e")).filter(
        pl.col("e") > pl.col("s")).sort("s", "e")
    if w.height == 0:
        return pl.DataFrame(schema=COVER_SCHEMA)
    # a new interval starts where one starts after every earlier one ended
    new = (pl.col("s") > pl.col("e").cum_max().shift(1)).fill_null(True)
    merged = w.with_columns(new.cum_sum().alias("_g")).group_by("_g").agg(
        pl.col("s").min(), pl.col("e").max()).sort("s")
    return merged.select("s", "e", (pl.col("e") - pl.col("s")).cum_sum().shift(1, fill_value=0).alias("before"))


def covered_before(times: pl.Series, cover: pl.DataFrame) -> pl.Series:
    """The length of ``cover`` (:func:`interval_cover`) before each of ``times`` (int64 ns; null stays null)."""
    if cover.height == 0:
        return times.cast(pl.Int64) * 0
    q = pl.DataFrame({"t": times.cast(pl.Int64)}).with_row_index("_i")
    hit = q.filter(pl.col("t").is_not_null()).sort("t").join_asof(
        cover.rename({"s": "t"}).with_columns(pl.col("t").alias("s")), on="t", strategy="backward")
    inside = (pl.col("t") - pl.col("s")).clip(0, pl.col("e") - pl.col("s"))
    got = hit.select("_i", (pl.col("before") + inside).fill_null(0).alias("c"))
    return q.join(got, on="_i", how="left").sort("_i")["c"].rename(times.name)


def overlap(lo: pl.Series, hi: pl.Series, cover: pl.DataFrame) -> pl.Series:
    """Per row, how much of ``[lo, hi]`` ``cover`` covers (0 where ``hi <= lo`` or either is null)."""
    if cover.height == 0:
        return pl.Series("overlap_ns", [0] * lo.len(), pl.Int64)
    over = (covered_before(hi, cover) - covered_before(lo, cover)).clip(lower_bound=0)
    return over.fill_null(0).rename("overlap_ns")
