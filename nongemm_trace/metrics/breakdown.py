"""Breakdowns: time per category and class, per op, per kernel and per step.

All functions take the classified activities (and ops) tables and return
polars DataFrames; nothing here formats or prints (renderers do that).

Definitions
-----------
* ``gpu`` metric: the summed duration of GPU activities (kernels, memcpys,
  memsets). Overlapping activities on different streams are each counted.
* ``cpu`` metric: the CPU time of operators. At level ``launch`` each real
  operator's *self* CPU time (its duration minus its child ops') goes to its own
  category; at level ``top`` each top-level operator's whole duration goes to its
  category. Wrappers (steps, annotations, compiled-region markers) are not counted.
* ops table, one row per (op name, category of the activities):
  ``self_gpu_time`` = activities the op launched itself; ``gpu_time`` = activities
  launched by the op or any op inside it (each activity counted once per op name);
  ``calls`` = calls of that op name that contributed; ops that launched nothing
  appear with the category of their name and zero time. ``cpu_time`` /
  ``self_cpu_time``: the host time of the calls (metrics/op_cpu.py), each call in
  one row of its name.
"""

from __future__ import annotations

import polars as pl

from ..classify import EVIDENCE
from ..classify.taxonomy import Taxonomy
from ..core.frames import add_columns, as_text, int_scalar, is_row_index, lookup_columns, walk_up
from .op_cpu import CPU_COLUMNS
from .subtrees import inclusive_times, outermost_of_name, subtree_ranges


def category_table(acts: pl.DataFrame, tax: Taxonomy, value: str = "dur_ns") -> pl.DataFrame:
    """``category, class, time_ns, activities, share`` sorted by time; ``unclassified`` always present."""
    # keyed on the activities' categorical codes, the result's rows as text (the models hold text)
    g = as_text(acts.group_by("category").agg(pl.col(value).sum().alias("time_ns"), pl.len().alias("activities")))
    if "unclassified" not in g["category"].to_list():
        g = pl.concat([g, pl.DataFrame({"category": ["unclassified"], "time_ns": [0], "activities": [0]},
                                       schema=g.schema)])
    total = g["time_ns"].sum()
    g = g.with_columns(
        pl.col("category").replace_strict(tax.classes, default="unclassified", return_dtype=pl.Utf8).alias("class"),
        (pl.col("time_ns") / total if total else pl.lit(0.0)).alias("share"),
    )
    return g.select("category", "class", pl.col("time_ns").cast(pl.Int64), pl.col("activities").cast(pl.Int64),
                    "share").sort(["time_ns", "category"], descending=[True, False])


def class_table(categories: pl.DataFrame) -> pl.DataFrame:
    g = categories.group_by("class").agg(pl.col("time_ns").sum(), pl.col("activities").sum(), pl.col("share").sum())
    order = {"GEMM": 0, "non-GEMM": 1, "communication": 2, "transfer": 3, "unclassified": 4}
    return g.with_columns(pl.col("class").replace_strict(order, default=9, return_dtype=pl.Int32).alias("_o")) \
        .sort("_o").drop("_o")


def op_table(ops: pl.DataFrame, acts: pl.DataFrame, cpu: pl.DataFrame | None = None,
             order: str = "gpu") -> pl.DataFrame:
    """Per (op name, category): calls, gpu_time_ns, self_gpu_time_ns, activities, cpu_time_ns,
    self_cpu_time_ns and ``wrapper`` (the name is a wrapper range: steps, annotations). ``cpu``:
    the calls whose CPU time counts (``op_id, cpu_ns, self_cpu_ns``, from
    :func:`~nongemm_trace.metrics.op_cpu.call_cpu_times`; none: zero). ``order``: the rows sorted by
    self GPU time (``gpu``) or self CPU time (``cpu``)."""
    by_row = is_row_index(ops["op_id"])
    # op names as small integer codes: the walk up the tree, the de-duplication and the grouping
    # handle ints, and the names come back once per result row
    code = ops["name"].cast(pl.Categorical).to_physical().alias("op") if by_row else None
    names = ops.select("op_id", (code if code is not None else pl.col("name").cast(pl.String)).alias("op"))

    def named(df: pl.DataFrame) -> pl.DataFrame:
        if code is not None:  # ids are rows (by_row): gathered, not joined
            return df.with_columns(code.gather(df["op_id"]))
        return df.join(names, on="op_id")

    # the category as a categorical code while the rows are repeated for every op above them (4
    # bytes a row, not a text view of 16), text again once grouped
    base = acts.select("activity_id", pl.col("category").cast(pl.Categorical), "dur_ns",
                       pl.col("launch_op_id").alias("op_id")).filter(pl.col("op_id").is_not_null())
    text = pl.col("category").cast(pl.String)
    self_rows = named(base).group_by(["op", "category"]).agg(
        pl.col("dur_ns").sum().alias("self_gpu_time_ns"), pl.len().alias("activities")).with_columns(text)
    per_call, incl_t = _inclusive(ops, base, named, code, by_row)
    # the calls' CPU rows first, so that their per-call CPU times are let go before the group-bys below
    cpu_rows = _cpu_rows(ops, per_call, named(cpu)) if cpu is not None and cpu.height else None
    del cpu
    calls = per_call.group_by(["op", "category"]).agg(pl.len().alias("calls")).with_columns(text)
    incl_t = incl_t.with_columns(text)
    busy = calls.join(incl_t, on=["op", "category"], how="left").join(self_rows, on=["op", "category"], how="left")
    # calls that launched nothing, anywhere below them
    if by_row:  # ids are rows: the touched ones marked by position
        touched = pl.repeat(False, ops.height, eager=True).scatter(per_call["op_id"], True)
        idle = names.with_columns(ops["op_category"]).filter(~touched)
    else:
        idle = names.with_columns(ops["op_category"]).join(per_call.select("op_id"), on="op_id", how="anti")
    # streamed too: a million steps are a million idle calls of a million names (+200 MB in memory)
    idle = _streamed(idle.lazy().select("op", pl.col("op_category").fill_null("unclassified").alias("category"))
                     .group_by(["op", "category"]).agg(pl.len().alias("calls"))) \
        .with_columns(pl.col("category").cast(pl.String))
    parts = [busy, idle] + ([cpu_rows] if cpu_rows is not None else [])
    out = pl.concat(parts, how="diagonal_relaxed")
    out = out.with_columns([pl.lit(0, pl.Int64).alias(c) for c in CPU_COLUMNS if c not in out.columns]
                           + ([] if "wrapper" in out.columns else [pl.lit(False).alias("wrapper")]))
    # by the streaming engine: a row per op name (a million steps) made this group-by the report's
    # peak, +310 MB of scratch in memory
    out = _streamed(out.lazy().group_by(["op", "category"]).agg(
        pl.col("calls").sum().cast(pl.Int64), pl.col("gpu_time_ns").sum().cast(pl.Int64),
        pl.col("self_gpu_time_ns").sum().cast(pl.Int64), pl.col("activities").sum().cast(pl.Int64),
        *(pl.col(c).sum().cast(pl.Int64) for c in CPU_COLUMNS), pl.col("wrapper").any()))
    keys = ["self_gpu_time_ns", "gpu_time_ns"] if order == "gpu" else ["self_cpu_time_ns", "cpu_time_ns"]
    out = out.with_columns(*(pl.col(c).fill_null(0) for c in ("gpu_time_ns", "self_gpu_time_ns", "activities",
                                                              *CPU_COLUMNS)),
                           pl.col("wrapper").fill_null(False).any().over("op"))
    columns = ["op", "category", "calls", "gpu_time_ns", "self_gpu_time_ns", "activities", *CPU_COLUMNS, "wrapper"]
    if code is None:
        return out.sort([*keys, "op", "category"], descending=[True, True, False, False]).select(columns)
    # codes back to names once sorted (the first op of each code: unique on ints, not on the names); the
    # names' order is their rank among the distinct names, so the sort and the group above move integers,
    # not a text per row (a million steps: a million distinct names, this table's peak)
    first = code.arg_unique()
    names_of = ops["name"].gather(first).cast(pl.String)
    back = pl.DataFrame({"op": code.gather(first), "_rank": names_of.rank("ordinal")})
    out = add_columns(out, back, "op")
    # sorted a column at a time, each let go once gathered (a table sorted whole is held twice: +100 MB)
    rows = out.select(pl.arg_sort_by([*keys, "_rank", "category"], descending=[True, True, False, False])).to_series()
    done = []
    for name in out.columns:
        done.append(out.get_column(name).gather(rows))
        out = out.drop(name)
    out = pl.DataFrame(done)
    back = pl.DataFrame({"op": code.gather(first), "_name": names_of})
    return out.join(back, on="op", how="left", maintain_order="left").drop("op", "_rank") \
        .rename({"_name": "op"}).select(columns)


def _inclusive(ops: pl.DataFrame, base: pl.DataFrame, named, code: pl.Series | None,
               by_row: bool) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(``op_id, op, category, dur_ns``: per call and category, the time of the activities
    launched by the call or below it, pairs with none left out; ``op, category, gpu_time_ns``: per
    op name and category, each activity counted once however many calls of the name lie above
    it). By the calls' subtree ranges (:mod:`.subtrees`: linear whatever the depth); by walking up
    the tree where the ranges do not describe it."""
    ranges = subtree_ranges(ops)
    if ranges is None:
        return _inclusive_walked(ops, base, named, code)
    if by_row:
        rows = base["op_id"].cast(pl.Int64)
    else:
        rows = base.select("op_id").join(ops.select("op_id", pl.int_range(pl.len(), dtype=pl.Int64).alias("_row")),
                                         on="op_id", how="left", maintain_order="left")["_row"]
    got = inclusive_times(ranges, base.select("category", "dur_ns", rows.alias("_row")).filter(
        pl.col("_row").is_not_null()))
    op_of_row = code if code is not None else ops["name"].cast(pl.String)
    per_call = got.select(ops["op_id"].gather(got["_row"]).alias("op_id"), op_of_row.gather(got["_row"]).alias("op"),
                          "category", "dur_ns")
    outermost = outermost_of_name(ranges, op_of_row).gather(got["_row"])
    incl_t = per_call.filter(outermost).group_by(["op", "category"]).agg(pl.col("dur_ns").sum().alias("gpu_time_ns"))
    return per_call, incl_t


def _inclusive_walked(ops: pl.DataFrame, base: pl.DataFrame, named,
                      code: pl.Series | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`_inclusive` by repeating each activity for every op above its launching op (rows x
    depth: only for a tree the ranges do not describe)."""
    incl = named(pl.concat([base, *walk_up(ops, base)]))
    per_call = _streamed(incl.lazy().group_by(["op_id", "op", "category"]).agg(pl.col("dur_ns").sum()))
    # each activity once per op name above it (a name can recur on the way up)
    once = ((pl.col("activity_id").cast(pl.Int64) * (int_scalar(code.max() or 0) + 1) + pl.col("op").cast(pl.Int64))
            if code is not None else pl.struct("activity_id", "op")).is_first_distinct()
    incl_t = _streamed(incl.lazy().filter(once).group_by(["op", "category"])
                       .agg(pl.col("dur_ns").sum().alias("gpu_time_ns")))
    return per_call, incl_t


def _cpu_rows(ops: pl.DataFrame, per_call: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """CPU time per (op, category): each call counted once, in one row of its name: the category
    holding most of the GPU time it launched (itself or below; ties: the first name), or, for a
    call that launched nothing, its name's category (``unclassified`` when no rule names it)."""
    # the categories as one Enum of their names in sorted order: every call's row holds a code, not a
    # text (a text key over every call was this report's peak: +250 MB at 1 GB of JSON), the tie on the
    # name is a sort on the code, and the texts come back once per result row
    names = {"unclassified"}
    for col in (per_call["category"], ops["op_category"]):
        names.update(col.unique().drop_nulls().cast(pl.String).to_list())
    codes = pl.Enum(sorted(names))
    times = per_call.select("op_id", pl.col("category").cast(codes), pl.col("dur_ns").alias("_t"))
    main = times.sort(["op_id", "_t", "category"], descending=[False, True, False]).unique("op_id", keep="first")
    own = ops.select("op_id", pl.col("op_category").cast(codes).fill_null("unclassified").alias("_own"), "is_wrapper")
    # by row number where the ids are rows (no hash join over every call), else joined
    rows = lookup_columns(add_columns(calls, main.select("op_id", "category"), "op_id"), "op_id", own, "op_id")
    return _streamed(rows.lazy().group_by(["op", pl.coalesce("category", "_own").alias("category")]).agg(
        pl.col("cpu_ns").sum().alias("cpu_time_ns"), pl.col("self_cpu_ns").sum().alias("self_cpu_time_ns"),
        pl.col("is_wrapper").any().alias("wrapper"))).with_columns(pl.col("category").cast(pl.String))


def _streamed(plan: pl.LazyFrame) -> pl.DataFrame:
    """A group-by over rows repeated per call or per op above them, by the streaming engine: its
    scratch memory is a third of the in-memory engine's, whose group-bys were the measure stage's
    peak (the order of groups is no promise of either: every table here is sorted before it is shown)."""
    return plan.collect(engine="streaming")


def kernel_summary(acts: pl.DataFrame) -> pl.DataFrame:
    """Per (kernel name, kind, category): activities, total/mean/min/max duration."""
    # keyed on codes (the category and class texts of every activity as categorical: a hash of
    # integers, not of texts), the result's rows as text
    keys = [pl.col(c).cast(pl.Categorical) for c in ("name", "kind", "category", "class")]
    return as_text(_streamed(acts.lazy().group_by(keys).agg(
        pl.len().cast(pl.Int64).alias("activities"), pl.col("dur_ns").sum().cast(pl.Int64).alias("gpu_time_ns"),
        pl.col("dur_ns").mean().alias("mean_ns"), pl.col("dur_ns").min().alias("min_ns"),
        pl.col("dur_ns").max().alias("max_ns"),
    ))).sort(["gpu_time_ns", "name", "kind", "category"], descending=[True, False, False, False])


def step_table(acts: pl.DataFrame, steps: pl.DataFrame, times: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per step: CPU span, GPU time and activities of the activities assigned to it, and, where the
    trace has a host timeline, the step's period (``step_ns``) and queueing latency (``latency_ns``)
    from ``times`` (:func:`nongemm_trace.metrics.period.step_times`; null without one)."""
    if steps.height == 0:
        return pl.DataFrame(schema={"step": pl.Int64, "name": pl.Utf8, "cpu_time_ns": pl.Int64,
                                    "gpu_time_ns": pl.Int64, "activities": pl.Int64, "step_ns": pl.Int64,
                                    "latency_ns": pl.Int64})
    g = acts.filter(pl.col("step").is_not_null()).group_by("step").agg(
        pl.col("dur_ns").sum().alias("gpu_time_ns"), pl.len().alias("activities"))
    out = steps.select("step", "name", (pl.col("end_ns") - pl.col("ts_ns")).alias("cpu_time_ns")).join(
        g, on="step", how="left")
    if times is not None and times.height:
        out = out.join(times.select("step", pl.col("wall").alias("step_ns"), pl.col("latency").alias("latency_ns")),
                       on="step", how="left")
    else:
        out = out.with_columns(pl.lit(None, pl.Int64).alias("step_ns"), pl.lit(None, pl.Int64).alias("latency_ns"))
    return out.with_columns(pl.col("gpu_time_ns").fill_null(0).cast(pl.Int64),
                            pl.col("activities").fill_null(0).cast(pl.Int64)).sort("step")


def cpu_op_times(ops: pl.DataFrame, level: str, generic: frozenset[str] = frozenset()) -> pl.DataFrame:
    """CPU time per op for the ``cpu`` metric: columns ``op_id, category, cpu_ns``. At level
    ``launch`` a call's category is the one the launch level gives its activities
    (:func:`~nongemm_trace.classify.ladder.call_category`, ``generic`` the taxonomy's generic
    categories: RMSNorm's written-out calls are normalization here too); at ``top`` its name's."""
    from ..classify.ladder import call_category

    # lazily: only the columns read are filtered (a filter of the whole op table copies all of it)
    real = ops.lazy().filter(~pl.col("is_wrapper"))
    if level == "top":
        sel = real.filter(pl.col("top_id") == pl.col("op_id"))
        return sel.select("op_id", pl.col("op_category").cast(pl.String).fill_null("unclassified").alias("category"),
                          pl.col("dur_ns").alias("cpu_ns")).collect()
    child = ops.select("parent_id", "dur_ns").filter(pl.col("parent_id").is_not_null()).group_by("parent_id").agg(
        pl.col("dur_ns").sum().alias("_kids")).rename({"parent_id": "op_id"})
    sel = real.join(child.lazy(), on="op_id", how="left", maintain_order="left")
    own = pl.col("op_category").cast(pl.String)
    cat = call_category(generic) if generic and "chain_category" in ops.columns else own
    return sel.select("op_id", cat.fill_null("unclassified").alias("category"),
                      (pl.col("dur_ns") - pl.col("_kids").fill_null(0)).clip(lower_bound=0).alias("cpu_ns")).collect()


def evidence_time(acts: pl.DataFrame) -> dict[str, int]:
    """GPU time (ns) per rung of the evidence ladder, every rung listed, strongest first."""
    got = dict(acts.group_by("evidence").agg(pl.col("dur_ns").sum()).iter_rows()) if acts.height else {}
    return {rung: int(got.get(rung, 0) or 0) for rung in EVIDENCE}
