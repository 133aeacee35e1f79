"""``whatif --autocast``: what ``torch.autocast`` adds to a step recorded without it.

Autocast makes the GEMM kernels faster (the user's ``--scale GEMM=r``), but it also adds host work
and small kernels the fp32 trace does not have: every fp32 input of an op that runs in the lower
precision (a weight, a bias, an activation that comes out of an fp32 op) is cast first, an op that
runs in fp32 casts a lower-precision input back up, and every op autocast wraps is recorded twice.
Measured on H200 pairs, a bf16 run of a model whose fp32 step is device-bound becomes host-bound
this way (docs/latency.md, "Autocast"), which no device-time scale predicts.

Which inputs are cast follows the op sequence of each thread, since a trace records no tensor
identities: a lower-precision op's weights and biases (its recorded fp32 inputs outside its
activation positions) always; its activation input when an fp32 op (a norm, a softmax, a pow) or a
broadcasting op with a buffer or parameter operand (``x * cos``) ran since the previous
lower-precision op, or when it is the thread's first, and then for every next lower-precision op
that reads an activation of the same shape (autocast caches no activation cast: the query, key and
value projections of one normalized input each cast it); an fp32 op's input when a
lower-precision op ran before it with neither an fp32 op nor a two-tensor promoting op (a residual
add, which yields fp32) in between. Each cast costs the trace's own host time per op event times
the events a cast records, and a copy kernel of its bytes (data: ``facts/autocast.toml``). The ops
counted are the outermost listed ones (autocast steps aside inside an op it wrapped) and the
top-level ones; a backward pass is autograd's and is not cast.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np
import polars as pl

from ...core.frames import nearest_down
from . import fused_attention as fused
from .graph import Graph

#: what the trace's ``input_type`` calls fp32
_FP32 = '"float"'
#: the host pieces that are host work of the ops (not waits, not the time between ops)
_WORK_KINDS = ("op", "launch", "call")


@functools.lru_cache(maxsize=1)
def facts() -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10 (requires-python), tomli as everywhere else
        import tomli as tomllib
    return tomllib.loads((resources.files("nongemm_trace") / "facts" / "autocast.toml").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Casts:
    """Where autocast's work goes in the graph: ``piece`` (host piece row) and ``events`` (op events
    it adds there), ``act`` (activity row) and ``cast_ns`` (the cast kernels' device time that runs
    before it on its stream), and the counts per step for the report."""

    host: pl.DataFrame     # piece, events, step
    device: pl.DataFrame   # act, cast_ns
    per_step: pl.DataFrame  # step, casts, wrapped_ops, cast_bytes, lower_input_ops
    math: fused.MathAttention  # the attention calls that run fused under autocast

    def host_lengths(self, g: Graph, piece_len: np.ndarray) -> np.ndarray:
        """``piece_len`` (ns per host piece: the profiled run's lengths, or the run without the
        profiler's) under autocast: the math attention calls' host work replaced by a fused call's and
        the casts' host time added, both at the trace's own cost per op event measured in ``piece_len``."""
        per_event = event_cost_ns(g, piece_len)
        out = fused.host_lengths(self.math, g.pieces, piece_len, per_event)
        if self.host.height:
            out = out.copy() if out is piece_len else out
            np.add.at(out, self.host["piece"].to_numpy(),
                      np.rint(self.host["events"].to_numpy() * per_event).astype(np.int64))
        return out

    def device_durations(self, durations: np.ndarray) -> np.ndarray:
        """The activities' durations under autocast: the math attention's non-GEMM kernels fused away,
        then each cast kernel's time before the activity it feeds."""
        out = fused.device_durations(self.math, durations)
        if self.device.height:
            out = out.copy() if out is durations else out
            np.add.at(out, self.device["act"].to_numpy(), self.device["cast_ns"].to_numpy())
        return out


def event_cost_ns(g: Graph, piece_len: np.ndarray) -> float:
    """The host time per op event in the steps: the ops' own host work on each step's thread
    (the pieces inside ops, launch and other calls included; not the time between ops nor the
    wrappers' own) over the op events recorded there. It carries the host's
    speed and the profiler's cost per event, both of which a cast's events pay too."""
    if g.steps.height == 0:
        return 0.0
    p = g.pieces.select("row", "kind", "op_id")
    bounds = g.steps.select("first", "last")
    inside = np.zeros(p.height, bool)
    for first, last in bounds.iter_rows():  # one slice per step
        inside[first:last + 1] = True
    work = inside & p["kind"].is_in(_WORK_KINDS).to_numpy()
    events = p.filter(pl.Series(inside))["op_id"].drop_nulls().n_unique()
    return float(piece_len[work].sum()) / events if events else 0.0


def _input_lists(ops: pl.DataFrame) -> pl.DataFrame:
    """One row per (op, input position): ``op_id, pos, is_fp32, numel`` from the recorded input types
    and dims (a trace without ``record_shapes`` has neither: its rows are left out)."""
    t = ops.select("op_id", pl.col("input_type").cast(pl.String).str.extract_all(r'"[^"]*"').alias("t"),
                   pl.col("input_dims").cast(pl.String).str.extract_all(r"\[[0-9, ]*\]").alias("d"))
    t = t.filter(pl.col("t").list.len() > 0)
    types = t.select("op_id", pl.col("t")).explode("t").with_columns(pl.int_range(pl.len()).over("op_id").alias("pos"))
    dims = t.select("op_id", pl.col("d")).explode("d").with_columns(pl.int_range(pl.len()).over("op_id").alias("pos"))
    numel = dims.select("op_id", "pos", pl.col("d").str.extract_all(r"\d+").list.eval(
        pl.element().cast(pl.Int64)).list.eval(pl.element().product()).list.first().fill_null(1).alias("numel"))
    return types.select("op_id", "pos", (pl.col("t") == _FP32).alias("is_fp32")).join(
        numel, on=["op_id", "pos"], how="left").with_columns(pl.col("numel").fill_null(1))


def _broadcasts(broadcasting: list[str]) -> pl.Expr:
    """A broadcasting op whose two tensor operands differ in shape (``x * cos``, ``x + bias``): the smaller
    one is a buffer or a parameter, fp32 under autocast, so the result is fp32 and the next
    lower-precision op casts it. Same-shaped operands (a gated product of two activations) may both
    be lower-precision results: left as they are."""
    dims = pl.col("input_dims").str.extract_all(r"\[[0-9]+[0-9, ]*\]")
    return pl.col("name").is_in(broadcasting) & (dims.list.len() >= 2) & (dims.list.get(0, null_on_oob=True)
                                                            != dims.list.get(1, null_on_oob=True)).fill_null(False)


def _shared_inputs(top: pl.DataFrame, activation_inputs: dict, views: list[str], thread: list[str]) -> pl.DataFrame:
    """``act_cast_run``: whether a lower-precision op's activation input is an fp32 tensor. Autocast
    caches no activation cast, so every reader of an fp32 tensor casts it: the query, key and value
    projections of one normalized input each cast, though only the first follows the fp32 op. A
    lower-precision op whose activation input has the shape of the previous lower-precision op's on
    its thread reads the same tensor (nothing a lower-precision op produced since has that shape),
    so a run of such ops takes the first one's answer. Without recorded shapes, an op of the previous
    one's name with only ``views`` between them does (no op between made a value it could read)."""
    first_pos = {k: min(v) for k, v in activation_inputs.items()}
    pos = pl.col("name").replace_strict(first_pos, default=0, return_dtype=pl.Int64)
    dims = pl.col("input_dims").str.extract_all(r"\[[0-9, ]*\]").list.get(pos, null_on_oob=True)
    computed = (~pl.col("is_lower") & ~pl.col("name").is_in(views)).cast(pl.Int64).cum_sum().over(thread)
    lower = top.with_columns(computed.alias("computed")).filter(pl.col("is_lower")).select(
        "op_id", *thread, "had_f32", "name", "computed", dims.fill_null("").alias("act_dims"))
    prev = [pl.col(c).shift(1).over(thread) for c in ("act_dims", "name", "computed")]
    same = pl.when(pl.col("act_dims") != "").then(pl.col("act_dims") == prev[0]).otherwise(
        (pl.col("name") == prev[1]) & (pl.col("computed") == prev[2]))
    lower = lower.with_columns((pl.col("had_f32") | ~same.fill_null(False)).cast(pl.Int64).cum_sum().over(thread)
                               .alias("run"))
    lower = lower.with_columns(pl.col("had_f32").first().over([*thread, "run"]).alias("act_cast_run"))
    return top.join(lower.select("op_id", "act_cast_run"), on="op_id", how="left")


def find_casts(ops: pl.DataFrame, acts: pl.DataFrame, launch_op_of: pl.DataFrame, cast_ns_of) -> Casts:
    """Autocast's casts in a trace recorded without it. ``ops``: the linked ops (``op_id, top_id, cat,
    name, pid, tid, ts_ns, input_type, input_dims``); ``acts``: the graph's activities (``row, activity_id,
    lp, step``); ``launch_op_of``: ``activity_id, launch_op_id``; ``cast_ns_of(bytes)``: a cast kernel's time."""
    f = facts()
    lower, fp32, promote = set(f["lower_precision"]), set(f["fp32"]), set(f["promote"])
    cost = f["cost"]
    cpu = ops.filter(pl.col("cat").cast(pl.String) == "cpu_op").with_columns(pl.col("name").cast(pl.String))
    listed = pl.col("name").is_in(list(lower | fp32))
    # the ops autocast sees: a listed op inside another listed one runs under its cast (autocast steps aside
    # for the ops a wrapped op calls), one inside an unlisted op (a fused fast path) is wrapped itself
    owner = nearest_down(cpu.select("op_id", "parent_id", "depth", pl.when(listed).then(pl.col("op_id"))
                                    .alias("owner")), "owner")
    cpu = cpu.join(owner.select(pl.col("op_id").alias("parent_id"), pl.col("owner").alias("listed_above")),
                   on="parent_id", how="left")
    seen = pl.col("listed_above").is_null() & (listed | (pl.col("op_id") == pl.col("top_id")))
    # each op's outermost listed op (itself or above): whose casts its kernels follow
    owner = nearest_down(cpu.select("op_id", "parent_id", "depth", pl.when(listed & pl.col("listed_above").is_null())
                                    .then(pl.col("op_id")).alias("owner")), "owner")
    top = cpu.filter(seen).select(
        "op_id", "name", pl.col("pid").cast(pl.String), pl.col("tid").cast(pl.String), "ts_ns",
        pl.col("input_dims").cast(pl.String).fill_null(""), "input_type")
    top = top.sort("pid", "tid", "ts_ns")
    tensors = pl.col("input_dims").str.count_matches(r"\[[0-9]+[0-9, ]*\]")
    top = top.with_columns(pl.col("name").is_in(list(lower)).alias("is_lower"),
                           pl.col("name").is_in(list(fp32)).alias("is_f32"),
                           (pl.col("name").is_in(list(promote)) & ((tensors >= 2) | (pl.col("input_dims") == "")))
                           .alias("is_promote"))
    thread = ["pid", "tid"]
    top = top.with_columns(pl.col("is_lower").cast(pl.Int64).cum_sum().over(thread).alias("seg"),
                           _broadcasts(f["broadcasting"]).alias("makes_f32"))
    seg_f32 = top.group_by([*thread, "seg"]).agg((pl.col("is_f32") | pl.col("makes_f32")).any().alias("had_f32"))
    top = top.join(seg_f32.with_columns(pl.col("seg") + 1), on=[*thread, "seg"], how="left").with_columns(
        pl.col("had_f32").fill_null(True))
    blocker = (pl.col("is_f32") | pl.col("is_promote")).cast(pl.Int64)
    top = top.with_columns((blocker.cum_sum().over([*thread, "seg"]) - blocker).alias("blockers_before"))
    # an op that takes a lower-precision result it has no autocast rule for (batch norm after a conv)
    promotes = (pl.col("is_f32") | pl.col("is_promote") | pl.col("makes_f32")).cast(pl.Int64)
    top = top.with_columns(((pl.col("seg") >= 1) & (promotes.cum_sum().over([*thread, "seg"]) == 0)
                            & pl.col("name").is_in(list(f["lower_input_events"]))).alias("lower_input"))
    top = _shared_inputs(top, f["activation_inputs"], f["views"], thread)
    act_cast = pl.col("is_lower") & pl.col("act_cast_run")
    up_cast = pl.col("is_f32") & (pl.col("seg") >= 1) & (pl.col("blockers_before") == 0)
    wrapped = top.filter(pl.col("is_lower") | pl.col("is_f32")).with_columns(act_cast.alias("act_cast"),
                                                                            up_cast.alias("up_cast"))
    # which recorded inputs are cast
    act_pos = pl.DataFrame([{"name": k, "pos": p} for k, v in f["activation_inputs"].items() for p in v],
                           schema={"name": pl.String, "pos": pl.Int64})
    inputs = _input_lists(wrapped.select("op_id", "input_type", "input_dims")).join(
        wrapped.select("op_id", "name", "is_lower", "act_cast", "up_cast"), on="op_id")
    named = act_pos["name"].unique().implode()
    is_act = (pl.when(pl.col("name").is_in(named)).then(pl.struct("name", "pos").is_in(
        act_pos.select(pl.struct("name", "pos")).to_series().implode())).otherwise(pl.col("pos") == 0))
    cast = (pl.when(pl.col("is_lower")).then(pl.col("is_fp32") & (~is_act | pl.col("act_cast")))
            .otherwise(pl.col("up_cast") & (pl.col("pos") == 0)))
    per_op = inputs.filter(cast).group_by("op_id").agg(pl.len().cast(pl.Int64).alias("casts"),
                                                               (pl.col("numel") * 6).alias("bytes"))
    # a trace without recorded inputs: the floating inputs assumed per op, the activation as above
    shaped = inputs["op_id"].unique().implode()
    guess = f["floating_inputs_without_shapes"]
    n_float = pl.col("name").replace_strict({k: v for k, v in guess.items() if k != "default"},
                                            default=guess["default"],
                                            return_dtype=pl.Int64)
    # an optional bias is there when the op ran the call a bias takes (``bias_children_without_shapes``)
    bias_calls = pl.DataFrame([{"parent": op, "name": k} for op, ks in f["bias_children_without_shapes"].items()
                               for k in ks], schema={"parent": pl.String, "name": pl.String})
    with_bias = cpu.select("parent_id", "name").join(
        cpu.select(pl.col("op_id").alias("parent_id"), pl.col("name").alias("parent")), on="parent_id").join(
        bias_calls, on=["parent", "name"])["parent_id"].unique()
    n_float = n_float + pl.col("op_id").is_in(with_bias.implode()).cast(pl.Int64)
    # its activation inputs (``activation_inputs``: all three of an attention call's) are cast or not together
    n_act = pl.min_horizontal(pl.col("name").replace_strict(
        {k: len(v) for k, v in f["activation_inputs"].items()}, default=1, return_dtype=pl.Int64), n_float)
    unshaped = wrapped.filter(~pl.col("op_id").is_in(shaped)).select(
        "op_id", pl.when(pl.col("is_lower")).then(n_float - n_act * (~pl.col("act_cast")).cast(pl.Int64))
        .otherwise(pl.col("up_cast").cast(pl.Int64)).alias("casts"), pl.lit([], pl.List(pl.Int64)).alias("bytes"))
    per_op = pl.concat([per_op, unshaped.filter(pl.col("casts") > 0)])
    ops_cast = wrapped.select("op_id").join(per_op, on="op_id", how="left").with_columns(
        pl.col("casts").fill_null(0).cast(pl.Int64))
    # where it lands: the piece before the op's first launch (the op's own host work), and its first activity
    first = acts.select("row", "activity_id", "lp", "step").join(launch_op_of, on="activity_id").join(
        owner.rename({"op_id": "launch_op_id"}), on="launch_op_id").filter(pl.col("lp").is_not_null()).sort(
        "lp").unique("owner", keep="first").rename({"owner": "op_id"})
    placed = ops_cast.join(first, on="op_id")
    events = (pl.col("casts") * (cost["op_events_per_cast"] + cost["launches_per_cast"])
              + cost["extra_events_per_wrapped_op"])
    host = placed.select(pl.max_horizontal(pl.col("lp") - 1, pl.lit(0)).alias("piece"), events.cast(pl.Float64)
                         .alias("events"), "step")
    kernels = placed.filter(pl.col("casts") > 0).select("row", "casts", "bytes")
    sized = kernels.select("row", "bytes").explode("bytes").drop_nulls("bytes")
    sized = sized.with_columns(cast_ns_of(sized["bytes"]).alias("ns")).group_by("row").agg(
        pl.col("ns").sum(), pl.len().alias("known"))
    floor = int(cost["cast_kernel_floor_ns"])
    device = kernels.join(sized, on="row", how="left").select(
        pl.col("row").alias("act"), (pl.col("ns").fill_null(0) + (pl.col("casts") - pl.col("known").fill_null(0))
                                     .clip(lower_bound=0) * floor).cast(pl.Int64).alias("cast_ns"))
    per_step = placed.group_by("step").agg(pl.col("casts").sum(), pl.len().alias("wrapped_ops"),
                                           pl.col("bytes").list.sum().sum().alias("cast_bytes")).sort("step")
    other_host, other_device = _lower_input_work(top, cpu, acts, launch_op_of, f)
    per_step = per_step.join(other_host.group_by("step").agg(pl.len().alias("lower_input_ops")), on="step",
                             how="full", coalesce=True).with_columns(
        pl.col("casts", "wrapped_ops", "cast_bytes", "lower_input_ops").fill_null(0)).sort("step")
    math = fused.find_math_attention(cpu.select("op_id", "parent_id", "depth", "name"), acts, launch_op_of, f)
    return Casts(pl.concat([host, other_host.cast(host.schema)]),
                 pl.concat([device, other_device.cast(device.schema)]), per_step, math)


def _lower_input_work(top: pl.DataFrame, cpu: pl.DataFrame, acts: pl.DataFrame, launch_op_of: pl.DataFrame,
                      f: dict[str, Any]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """What an op autocast does not wrap costs more when its input is a lower-precision result
    (``lower_input_events``): a batch norm after a conv takes a bf16 input with fp32 weights, which
    cuDNN's kernel does not, and runs PyTorch's own with a copy of its statistics. Its host work grows
    by that many op events at the trace's own cost per event, placed before the op's first launch,
    and its first activity gains a copy kernel."""
    events = f["lower_input_events"]
    hit = top.filter(pl.col("lower_input")).select("op_id", pl.col("name").replace_strict(
        events, return_dtype=pl.Float64).alias("events"))
    empty_host = pl.DataFrame(schema={"piece": pl.Int64, "events": pl.Float64, "step": acts.schema["step"]})
    empty_device = pl.DataFrame(schema={"act": pl.Int64, "cast_ns": pl.Int64})
    if hit.height == 0:
        return empty_host, empty_device
    # the op's first launch: its activities' launching ops lie under it (``top_id``)
    under = launch_op_of.join(cpu.select(pl.col("op_id").alias("launch_op_id"), pl.col("top_id").alias("op_id")),
                              on="launch_op_id").join(hit, on="op_id")
    first = acts.select("row", "activity_id", "lp", "step").join(under, on="activity_id").filter(
        pl.col("lp").is_not_null()).sort("lp").unique("op_id", keep="first")
    host = first.select(pl.max_horizontal(pl.col("lp") - 1, pl.lit(0)).cast(pl.Int64).alias("piece"), "events", "step")
    device = first.select(pl.col("row").cast(pl.Int64).alias("act"),
                          pl.lit(int(f["cost"]["cast_kernel_floor_ns"]), pl.Int64).alias("cast_ns"))
    return host, device


def cast_kernel_ns(memory_tbps: float | None):
    """A cast kernel's time from its bytes: the floor plus the bytes at the share of the device's
    memory bandwidth that H200 copies of this size reach (``facts/autocast.toml``)."""
    cost = facts()["cost"]
    bw = (memory_tbps or cost["fallback_memory_tbps"]) * 1e12 * cost["cast_bandwidth_share"]  # bytes/s
    floor = int(cost["cast_kernel_floor_ns"])

    def ns(b: pl.Series) -> pl.Series:
        return (floor + b.cast(pl.Float64) / bw * 1e9).round().cast(pl.Int64)
    return ns
