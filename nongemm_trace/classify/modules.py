"""Module level: the nn.Module an activity was launched in (``with_stack`` / ``with_modules`` traces).

``nn.Module: LlamaRMSNorm_0`` python events nest on the launching thread like ops.
An activity takes the category of the innermost enclosing module whose class a
taxonomy ``[modules]`` rule names, so a norm written as pow/mean/rsqrt/mul counts
as normalization. Containers (decoder layers, attention blocks) are named by no
rule and are looked through.
"""

from __future__ import annotations

import polars as pl

from ..core.frames import starts_with
from ..link.nesting import innermost_containing
from .rules import module_category, module_class
from .taxonomy import Taxonomy


def module_table(python: pl.DataFrame, tax: Taxonomy) -> pl.DataFrame:
    """The python events that are modules a rule names: ``op_id, pid, tid, ts_ns, dur_ns, end_ns,
    module, module_category`` (``op_id`` is the python event's row)."""
    if python.height == 0:
        return pl.DataFrame(schema={"op_id": pl.UInt32, "pid": pl.Utf8, "tid": pl.Utf8, "ts_ns": pl.Int64,
                                    "dur_ns": pl.Int64, "end_ns": pl.Int64, "module": pl.Utf8,
                                    "module_category": pl.Utf8})
    mods = python.filter(starts_with(python, "name", "nn.Module: "))
    rows = []
    for (name,) in mods.select("name").unique().iter_rows():
        cls = module_class(name)
        cat, _ = module_category(tax, cls) if cls else (None, "")
        rows.append((name, cls, cat))
    names = pl.DataFrame(rows, schema={"name": pl.Utf8, "module": pl.Utf8, "module_category": pl.Utf8}, orient="row") \
        .with_columns(pl.col("name").cast(mods.schema["name"]))  # as the python table holds them (the join key)
    mods = mods.join(names, on="name", how="left").filter(pl.col("module_category").is_not_null())
    return mods.select("op_id", "pid", "tid", "ts_ns", "dur_ns", "end_ns", "module", "module_category")


def module_of_activities(acts: pl.DataFrame, modules: pl.DataFrame) -> pl.DataFrame:
    """``activity_id, module, module_category`` for activities launched inside a named module."""
    pts = acts.filter(pl.col("launch_ts_ns").is_not_null()).select(
        pl.col("activity_id").alias("qid"), pl.col("launch_pid").alias("pid"), pl.col("launch_tid").alias("tid"),
        pl.col("launch_ts_ns").alias("ts_ns"), (pl.col("launch_ts_ns") + pl.col("launch_dur_ns")).alias("end_ns"))
    hit = innermost_containing(modules, pts)
    return hit.rename({"qid": "activity_id"}).join(
        modules.select("op_id", "module", "module_category"), on="op_id", how="inner").drop("op_id")
