"""Phases of a serving run: its iterations split into prefill, decode, mixed and other.

A serving engine's time is two different workloads: a prefill iteration runs the prompt's tokens
through GEMMs large enough to be compute-bound, a decode iteration one token per request, where
the non-GEMM share and the launch cost grow. One breakdown over the whole run averages the two,
so each iteration is told by what the trace records of it (``facts/serving_phases.toml``): the
engine's annotation around the step (vLLM's request-shape range, SGLang's ``step[MODE bs=N]``),
for a plain ``generate()`` loop, the token embedding's indices that open each forward pass; for
a loop of CUDA-graph replays with neither (the forward pass's ops are inside the graph), the token
ids written into the graph's static input before each replay.

An iteration's GPU work is the activities launched inside its host span (the annotation's range;
for ``generate()``, from one forward pass's embedding to the next, sampling included), a graph
replay's kernels with their launch call. Its time runs from the span's start to the later of the
span's end and its work's end (a replayed graph runs on after the host has launched it), cut at
the next iteration's start: iterations never overlap, and each is in exactly one phase, so the
phases' times add up to the iterations' time.
"""

from __future__ import annotations

import re
import sys
from functools import lru_cache
from importlib import resources
from typing import Any

import polars as pl

from ..core.frames import per_value

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PHASES = ("prefill", "decode", "mixed", "other")
#: non-GEMM categories a phase lists, the largest first
TOP_CATEGORIES = 3

_ITERATION = {"start_ns": pl.Int64, "end_ns": pl.Int64, "phase": pl.Utf8, "batch": pl.Int64, "tokens": pl.Int64}
_GROUPS = ("mode", "prefill", "decode", "batch", "tokens", "prefill_tokens", "decode_tokens")


@lru_cache(maxsize=1)
def rules() -> dict[str, Any]:
    """The phase rules (``facts/serving_phases.toml``), read once."""
    text = (resources.files("nongemm_trace") / "facts" / "serving_phases.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def iterations(ops: pl.DataFrame, captures: pl.DataFrame | None = None,
               graphs: pl.DataFrame | None = None) -> tuple[str | None, pl.DataFrame]:
    """The engine the iterations were told by (``vllm``, ``sglang``, ``generate``, ``replay``; None:
    no iteration found) and one row per iteration: ``start_ns, end_ns, phase, batch, tokens``
    (batch and tokens null where the trace does not say them), in time order. ``captures``: the
    threads' CUDA-graph capture windows (``pid, tid, ts_ns, end_ns``), inside which a forward pass
    is recorded into a graph, not run: not an iteration. ``graphs``: the calls that replay a graph
    (``pid, tid, ts_ns``), for a loop of replays with no annotation (:func:`_replays`)."""
    if ops.height == 0:
        return None, pl.DataFrame(schema=_ITERATION)
    rule, hit = _annotation(ops)
    if rule is not None:
        return str(rule["engine"]), _annotated(hit, rule)
    found = _forward_passes(ops, rules().get("generate", {}), captures)
    if found.height:
        return "generate", found
    found = _replays(ops, rules().get("replay", {}), graphs, captures)
    return ("replay", found) if found.height else (None, found)


def engine_ranges(ops: pl.DataFrame, engine: str | None = None) -> tuple[str | None, pl.DataFrame]:
    """The engine whose annotation rule the trace is read by (the first that matches a range; with
    ``engine``, that engine's rule only) and its iteration ranges: the op rows themselves, every column
    kept, so that the steps (:func:`nongemm_trace.metrics.steps.find_steps`) are the very ranges the
    phases count. (None, no rows) when no rule matches."""
    rule, hit = _annotation(ops, engine)
    return (None, hit) if rule is None else (str(rule["engine"]), hit)


def _annotation(ops: pl.DataFrame, engine: str | None = None) -> tuple[dict[str, Any] | None, pl.DataFrame]:
    """The first annotation rule (of ``engine`` where given) that matches a range of ``ops``, and those ranges."""
    for rule in rules().get("annotation", []):
        if engine is not None and rule["engine"] != engine:
            continue
        pattern = rule["pattern"]
        hit = ops.filter(per_value(ops, "name", lambda e, p=pattern: e.str.contains(p), pl.Boolean))
        if hit.height:
            return rule, hit
    return None, ops.head(0)


def _annotated(hit: pl.DataFrame, rule: dict[str, Any]) -> pl.DataFrame:
    """The ranges ``hit`` (whose names match ``rule['pattern']``), their phase and sizes from its groups."""
    pattern = rule["pattern"]
    index = re.compile(pattern).groupindex
    named = set(index)
    hit = hit.select("ts_ns", "end_ns", pl.col("name").cast(pl.String)).with_columns(
        pl.col("name").str.extract(pattern, index[g]).alias(g) for g in _GROUPS if g in named)
    ints = {g: pl.col(g).cast(pl.Int64) for g in _GROUPS if g in named and g != "mode"}
    hit = hit.with_columns(**ints)
    col = hit.columns
    if "mode" in col:
        phase = pl.col("mode").replace_strict(rule.get("modes", {}), default="other", return_dtype=pl.Utf8)
    elif "prefill" in col and "decode" in col:
        p, d = pl.col("prefill") > 0, pl.col("decode") > 0
        phase = pl.when(p & d).then(pl.lit("mixed")).when(p).then(pl.lit("prefill")) \
            .when(d).then(pl.lit("decode")).otherwise(pl.lit("other"))
    else:
        phase = pl.lit("other")
    if "tokens" in col:
        tokens = pl.col("tokens")
    elif "prefill_tokens" in col and "decode_tokens" in col:
        tokens = pl.col("prefill_tokens") + pl.col("decode_tokens")
    elif "mode" in col and "batch" in col:
        tokens = pl.when(pl.col("mode").is_in(rule.get("one_token", []))).then(pl.col("batch"))
    else:
        tokens = pl.lit(None, pl.Int64)
    batch = pl.col("batch") if "batch" in col else pl.lit(None, pl.Int64)
    return hit.select(pl.col("ts_ns").alias("start_ns"), "end_ns", phase.alias("phase"), batch.alias("batch"),
                      tokens.alias("tokens")).cast(_ITERATION).sort("start_ns")  # type: ignore[arg-type]


def _forward_passes(ops: pl.DataFrame, rule: dict[str, Any], captures: pl.DataFrame | None = None) -> pl.DataFrame:
    """A ``generate()`` loop's forward passes: each opened by the first embedding call after a GEMM
    or attention call (or the first of the trace), its batch and query tokens from the indices'
    shape ``[batch, tokens]``; ending where the next one opens, the last at the end of the ops that
    start in it on its thread. A pass opened inside a graph capture window of its thread is left out
    (a decode step captured once to be replayed ran nothing). None when no forward pass decodes (one
    query token)."""
    emb_names, compute = rule.get("embedding", []), rule.get("compute", [])
    if not emb_names or "op_category" not in ops.columns:
        return pl.DataFrame(schema=_ITERATION)
    is_emb = per_value(ops, "name", lambda e: e.is_in(emb_names), pl.Boolean)
    if not ops.select(is_emb.any()).item():  # most traces: no embedding, no forward pass to find
        return pl.DataFrame(schema=_ITERATION)
    is_compute = per_value(ops, "op_category", lambda e: e.is_in(compute), pl.Boolean)
    # the columns read selected before the rows are filtered: a filter of the whole op table copies
    # every one of its columns for the rows kept (every GEMM and embedding call)
    marks = ops.select("ts_ns", "pid", "tid", is_emb.alias("emb"), is_compute.alias("_compute"),
                       "input_dims").filter(pl.col("emb") | pl.col("_compute")).select(
        "ts_ns", "pid", "tid", "emb", pl.col("input_dims").cast(pl.String)).sort("ts_ns")
    opens = marks.filter(pl.col("emb") & ~pl.col("emb").shift(1, fill_value=False))
    if captures is not None and captures.height:
        opens = opens.filter(~_inside(opens, captures))
    if opens.height == 0:
        return pl.DataFrame(schema=_ITERATION)
    # the indices are the embedding's second input: [[vocab, dim], [batch, tokens], ...]
    dims = pl.col("input_dims").str.replace_all(r"\s", "").str.extract(r"^\[\[\d+,\d+\],\[(\d+(?:,\d+)*)\]", 1)
    shape = opens.with_columns(dims.str.split(",").cast(pl.List(pl.Int64)).alias("shape"))
    last = ops.select("ts_ns", "tid", "end_ns").filter(pl.col("ts_ns") >= shape["ts_ns"].max(),
                                                      pl.col("tid") == shape["tid"][-1])["end_ns"].max()
    shape = shape.with_columns(
        pl.when(pl.col("shape").list.len() == 2).then(pl.col("shape").list.first()).alias("batch"),
        pl.col("shape").list.last().alias("query"),
        pl.col("ts_ns").shift(-1).fill_null(pl.lit(last, pl.Int64)).alias("end_ns"))
    if shape.filter(pl.col("query") == 1).height == 0:
        return pl.DataFrame(schema=_ITERATION)
    phase = pl.when(pl.col("query") == 1).then(pl.lit("decode")).when(pl.col("query") > 1) \
        .then(pl.lit("prefill")).otherwise(pl.lit("other"))
    return shape.select(pl.col("ts_ns").alias("start_ns"), "end_ns", phase.alias("phase"), "batch",
                        (pl.col("batch").fill_null(1) * pl.col("query")).alias("tokens")).cast(_ITERATION)  # type: ignore[arg-type]


def _replays(ops: pl.DataFrame, rule: dict[str, Any], graphs: pl.DataFrame | None,
             captures: pl.DataFrame | None = None) -> pl.DataFrame:
    """A loop of graph replays: each opened by the write of integer token ids ``[batch, tokens]``
    into the graph's static input (``rule['inputs']`` of ``rule['types']``) that the next graph
    launch of its thread follows (the latest such write before a launch), ending where the next one
    opens, the last at the end of the ops that start in it on its thread. Writes inside a capture
    window are the capture's. None when no iteration decodes (one query token): a graph replaying a
    prompt alone (``torch.compile``'s CUDA graphs of one forward pass) is an inference."""
    names, types = rule.get("inputs", []), rule.get("types", [])
    if graphs is None or graphs.height == 0 or not names or "input_type" not in ops.columns:
        return pl.DataFrame(schema=_ITERATION)
    is_input = per_value(ops, "name", lambda e: e.is_in(names), pl.Boolean)
    cand = ops.filter(is_input)
    if cand.height == 0:
        return pl.DataFrame(schema=_ITERATION)
    # the written tensor is the first input: [[batch, tokens], ...] of an integer type
    dims = pl.col("input_dims").cast(pl.String).str.replace_all(r"\s", "").str.extract_groups(
        r"^\[\[(?P<batch>\d+),(?P<query>\d+)\]")
    first_type = pl.col("input_type").cast(pl.String).str.extract(r'^\[\s*"([^"]*)"', 1)
    thread = [pl.col("pid").cast(pl.String), pl.col("tid").cast(pl.String)]
    writes = cand.select(pl.col("ts_ns"), *thread, dims.alias("_d"), first_type.alias("_t")).unnest("_d") \
        .filter(pl.col("_t").is_in(types) & pl.col("query").is_not_null()) \
        .with_columns(pl.col("batch").cast(pl.Int64), pl.col("query").cast(pl.Int64)).drop("_t")
    if captures is not None and captures.height and writes.height:
        writes = writes.filter(~_inside(writes, captures))
    if writes.height == 0:
        return pl.DataFrame(schema=_ITERATION)
    writes = writes.sort("ts_ns").with_row_index("_w")
    launches = graphs.select(pl.col("ts_ns").alias("_g"), *thread).sort("_g")
    followed = launches.join_asof(writes.select("_w", "ts_ns", "pid", "tid"), left_on="_g", right_on="ts_ns",
                                  by=["pid", "tid"], strategy="backward", check_sortedness=False)
    opens = writes.join(followed.select("_w").drop_nulls().unique(), on="_w", how="semi").sort("ts_ns")
    if opens.height == 0 or opens.filter(pl.col("query") == 1).height == 0:
        return pl.DataFrame(schema=_ITERATION)
    tail = opens.tail(1)
    last = ops.filter(pl.col("ts_ns") >= tail["ts_ns"][0], pl.col("pid").cast(pl.String) == tail["pid"][0],
                      pl.col("tid").cast(pl.String) == tail["tid"][0])["end_ns"].max()
    phase = pl.when(pl.col("query") == 1).then(pl.lit("decode")).otherwise(pl.lit("prefill"))
    return opens.select(pl.col("ts_ns").alias("start_ns"), pl.col("ts_ns").shift(-1).fill_null(pl.lit(last, pl.Int64))
                        .alias("end_ns"), phase.alias("phase"), "batch",
                        (pl.col("batch") * pl.col("query")).alias("tokens")).cast(_ITERATION)  # type: ignore[arg-type]


def _inside(rows: pl.DataFrame, windows: pl.DataFrame) -> pl.Series:
    """Whether each row's ``ts_ns`` falls inside a window of its own thread (``pid, tid, ts_ns,
    end_ns``; windows of one thread do not overlap)."""
    thread = [pl.col("pid").cast(pl.String), pl.col("tid").cast(pl.String)]
    left = rows.select(pl.int_range(pl.len()).alias("_row"), *thread, "ts_ns").sort("ts_ns")
    right = windows.select(*thread, pl.col("ts_ns").alias("_ws"), pl.col("end_ns").alias("_we")).sort("_ws")
    got = left.join_asof(right, left_on="ts_ns", right_on="_ws", by=["pid", "tid"], strategy="backward",
                          check_sortedness=False)  # sorted by time overall, so within each thread too
    return got.sort("_row").select(pl.col("_we").is_not_null() & (pl.col("ts_ns") < pl.col("_we"))).to_series()


def assign(acts: pl.DataFrame, its: pl.DataFrame) -> pl.DataFrame:
    """``iteration`` (its row in ``its``) of each activity launched inside an iteration's span (by
    its launch call's start); activities launched outside every iteration, or without a launch call
    in the trace, are left out."""
    spans = its.with_row_index("iteration").select(pl.col("iteration").cast(pl.Int64), pl.col("start_ns").alias("_s"),
                                                   pl.col("end_ns").alias("_e"))
    launched = acts.filter(pl.col("launch_ts_ns").is_not_null()).sort("launch_ts_ns")
    got = launched.join_asof(spans, left_on="launch_ts_ns", right_on="_s", strategy="backward")
    return got.filter(pl.col("launch_ts_ns") < pl.col("_e")).drop("_s", "_e")


def _until_work_ends(its: pl.DataFrame, work: pl.DataFrame) -> pl.DataFrame:
    """``its`` with each ``end_ns`` moved to the end of its GPU work when that is later, never past
    the next iteration's start."""
    ends = work.group_by("iteration").agg(pl.col("end_ns").max().alias("work_end"))
    got = its.with_row_index("iteration").with_columns(pl.col("iteration").cast(pl.Int64)) \
        .join(ends, on="iteration", how="left").sort("iteration")
    end = pl.max_horizontal("end_ns", pl.col("work_end").fill_null(pl.col("end_ns")))
    nxt = pl.col("start_ns").shift(-1)
    return got.with_columns(pl.when(nxt.is_not_null() & (end > nxt)).then(nxt).otherwise(end).alias("end_ns")) \
        .select(its.columns)


def phase_table(acts: pl.DataFrame, ops: pl.DataFrame, captures: pl.DataFrame | None = None,
                graphs: pl.DataFrame | None = None) -> tuple[str | None, list[dict]]:
    """The engine and, per phase with iterations (in :data:`PHASES` order), a row of integer ns:
    ``phase, iterations, time_ns, iteration_ns`` (mean), ``batch`` (mean, where said), ``tokens`` (sum, where
    said), ``gpu_time_ns, activities, classes`` (``class, time_ns``) and ``categories`` (the top
    non-GEMM ones: ``category, time_ns``), each activity in the class and category the report counts
    it in. ``captures`` and ``graphs``: the graph capture windows and replay calls (:func:`iterations`)."""
    engine, its = iterations(ops, captures, graphs)
    if its.height == 0:
        return None, []
    if "launch_ts_ns" in acts.columns:
        work = assign(acts.select("launch_ts_ns", "dur_ns", "end_ns", pl.col("category").cast(pl.String),
                                  pl.col("class").cast(pl.String)), its)
    else:
        work = pl.DataFrame(schema={"iteration": pl.Int64, "dur_ns": pl.Int64, "end_ns": pl.Int64,
                                    "category": pl.Utf8, "class": pl.Utf8})
    its = _until_work_ends(its, work)
    work = work.join(its.with_row_index("iteration").select(pl.col("iteration").cast(pl.Int64), "phase"),
                     on="iteration")
    per = its.group_by("phase").agg(
        pl.len().alias("iterations"), (pl.col("end_ns") - pl.col("start_ns")).sum().alias("time_ns"),
        pl.col("batch").mean().alias("batch"), pl.col("tokens").sum().alias("tokens"),
        pl.col("tokens").is_not_null().any().alias("said"))
    by_class = work.group_by("phase", "class").agg(pl.col("dur_ns").sum().alias("time_ns"))
    by_cat = work.filter(pl.col("class") == "non-GEMM").group_by("phase", "category") \
        .agg(pl.col("dur_ns").sum().alias("time_ns"))
    out = []
    for row in per.iter_rows(named=True):
        name = row["phase"]
        cls = by_class.filter(pl.col("phase") == name).sort(["time_ns", "class"], descending=[True, False])
        cats = by_cat.filter(pl.col("phase") == name).sort(["time_ns", "category"], descending=[True, False])
        out.append({
            "phase": name, "iterations": int(row["iterations"]), "time_ns": int(row["time_ns"]),
            "iteration_ns": int(row["time_ns"] // row["iterations"]),
            "batch": None if row["batch"] is None else round(float(row["batch"]), 3),
            "tokens": int(row["tokens"]) if row["said"] else None,
            "gpu_time_ns": int(cls["time_ns"].sum()), "activities": int(work.filter(pl.col("phase") == name).height),
            "classes": [{"class": c, "time_ns": int(t)} for c, t in cls.select("class", "time_ns").iter_rows()],
            "categories": [{"category": c, "time_ns": int(t)}
                           for c, t in cats.head(TOP_CATEGORIES).select("category", "time_ns").iter_rows()]})
    return engine, sorted(out, key=lambda r: PHASES.index(r["phase"]))
