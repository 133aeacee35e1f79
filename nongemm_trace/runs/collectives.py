"""The batch's collectives view: every rank's calls (gathered by the workers) matched across ranks
(:func:`nongemm_trace.metrics.collectives.match_calls`), as the JSON contract's ``collectives`` list
and a per-rank summary added to the ranks view."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl

from ..metrics.collectives import CALL_SCHEMA, match_calls

#: the key a worker's result carries its rank's calls under (taken out before the result is reported)
CALLS_KEY = "_collective_calls"


def worker_calls(calls: pl.DataFrame, link: dict[str, Any] | None) -> dict[str, Any]:
    """What a worker returns of its rank's calls: plain lists (any engine can carry them) and the link."""
    return {"calls": calls.to_dict(as_series=False), "link": link}


def _us(ns: Any) -> float | None:
    return None if ns is None else round(ns / 1000, 3)


def _late(rows: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The late rank's host work beyond the others' (:mod:`nongemm_trace.metrics.late_work`), in µs."""
    return [{"op": r["op"], "excess_us": _us(r["ns"])} for r in rows or []]


def collectives_view(reports: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[int, dict[str, Any]]]:
    """``(collectives, per rank)`` of the reports of distributed ranks (their worker calls taken out of
    every report)."""
    frames, links = [], []
    for r in reports:
        got = r.pop(CALLS_KEY, None)
        if got is None or r.get("rank") is None:
            continue
        frames.append(pl.DataFrame(got["calls"], schema=CALL_SCHEMA).with_columns(
            pl.lit(int(r["rank"]), pl.Int64).alias("rank")))
        if got.get("link"):
            links.append(got["link"]["gbps"])
    if len(frames) < 2:
        return [], {}
    one, per_rank = match_calls(pl.concat(frames), min(links) if links else None)
    if one.height == 0:
        return [], {}
    out = []
    for r in one.iter_rows(named=True):
        out.append({
            "name": r["kind"], "process_group": r["pg"] or None, "step": r["step_name"] or None, "index": r["k"],
            "seq": r["seq"], "ranks": r["ranks"], "bytes": r["bytes"], "group_size": r["group_size"],
            "skew_us": _us(r["skew_ns"]), "last_rank": r["last_rank"], "wait_us": [_us(w) for w in r["wait_ns"]],
            "start_ns": r["start_ns"],
            "transfer_us": _us(r["transfer_ns"]),
            "algbw_gbps": _gbps(r["algbw_gbps"]), "busbw_gbps": _gbps(r["busbw_gbps"]),
            "link_gbps": r["link_gbps"],
            "busbw_share": None if r["busbw_share"] is None else round(r["busbw_share"], 4),
            "overlap_us": [_us(v) for v in r["overlap_ns"]], "exposed_us": [_us(v) for v in r["exposed_ns"]],
            "late_work": _late(r["late_work"])})
    ranks = {int(r["rank"]): {"collectives": r["collectives"], "last": r["last"], "wait_us": _us(r["wait_ns"]),
                              "collective_us": _us(r["collective_ns"]), "transfer_us": _us(r["transfer_ns"]),
                              "exposed_us": _us(r["exposed_ns"]), "late_work": _late(r["late_work"])}
             for r in per_rank.iter_rows(named=True)}
    return out, ranks


def collectives_frame(calls: list[dict[str, Any]]) -> pl.DataFrame:
    """The collectives as a table, one row per call and rank (the per-rank lists exploded; the last
    rank's ``late_work`` on every row of its call), for the Parquet dataset (``table=collectives``)."""
    per_rank = ("ranks", "start_ns", "wait_us", "overlap_us", "exposed_us")
    late = pl.List(pl.Struct({"op": pl.Utf8, "excess_us": pl.Float64}))
    rows = pl.DataFrame(calls, infer_schema_length=None, schema_overrides={"late_work": late}).with_row_index("call")
    return rows.explode(list(per_rank)).rename({"ranks": "rank"})


def write_collectives(calls: list[dict[str, Any]], root: Path) -> None:
    """``root/table=collectives/part-00000.parquet`` beside the per-trace tables of the dataset."""
    from ..core.safe_write import write_file

    d = root / "table=collectives"
    d.mkdir(parents=True, exist_ok=True)
    write_file(d / "part-00000.parquet", collectives_frame(calls).write_parquet)


def _gbps(value: float | None) -> float | None:
    """A bandwidth to three decimals, or to three significant digits below 0.1 GB/s: a few hundred
    bytes over a CPU collective that waited milliseconds is a bandwidth, not 0.0 (which would read as
    nothing moved)."""
    if value is None or value == 0 or not math.isfinite(value):
        return value
    return round(value, max(3, 2 - math.floor(math.log10(abs(value)))))
