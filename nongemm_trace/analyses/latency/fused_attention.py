"""``whatif --autocast``: the attention kernel that changes with the precision.

``scaled_dot_product_attention`` picks its implementation by the inputs' dtype. In fp32 the fused
kernels that need bf16/fp16 inputs (flash, cuDNN) are out, and where the memory-efficient kernel
does not take the call either (grouped-query attention, ``enable_gqa``) the op falls back to its
*math* path, recorded as ``aten::_scaled_dot_product_attention_math``: a matmul, a softmax, masking
and copies, each its own op with its own kernels. Under autocast the same call gets bf16/fp16
inputs and runs one fused kernel. So a what-if that only casts the inputs and scales the GEMM time
keeps a host cost and kernels the run under autocast does not have (on a Llama-shaped prefill, the
math path was a quarter of the step's host time and the autocast run's step no longer than fp32's;
docs/latency.md, "Autocast").

What the run under autocast does instead, per math call: the call's own host work and kernels go,
and one fused op takes their place, costing the trace's own host time per op event times the events
a fused call records (``facts/autocast.toml``, ``[fused_attention]``), with one kernel whose time is
the math path's GEMM kernels' time after the user's scales (the matmuls it fuses; the softmax,
masks and copies run inside it, on data that stays on chip). The assumption is a device whose
fused kernels take the call (flash and cuDNN attention need compute capability 8.0 or newer).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ...core.frames import nearest_down


@dataclass(frozen=True)
class MathAttention:
    """The math-path attention calls of a trace: ``ops`` (``op_id, math_root``: every op inside a
    math call, the call included, and the call), ``events`` (the op events a fused call records in
    their place) and ``acts`` (activity rows of the math path's kernels that are not GEMMs)."""

    ops: pl.DataFrame
    events: float
    acts: np.ndarray

    @property
    def calls(self) -> int:
        return self.ops["math_root"].n_unique()


def find_math_attention(ops: pl.DataFrame, acts: pl.DataFrame, launch_op_of: pl.DataFrame,
                        facts: dict) -> MathAttention:
    """``ops``: the cpu ops (``op_id, parent_id, depth, name`` as text); ``acts``: the graph's activities
    (``row, activity_id, class``); ``launch_op_of``: ``activity_id, launch_op_id``."""
    none = MathAttention(pl.DataFrame(schema={"op_id": pl.UInt32, "math_root": pl.UInt32}), 0.0,
                         np.zeros(0, np.int64))
    spec = facts.get("fused_attention")
    if not spec or ops.height == 0:
        return none
    is_math = pl.col("name") == spec["math"]
    if not ops.select(is_math.any()).item():
        return none
    root = nearest_down(ops.select("op_id", "parent_id", "depth",
                                   pl.when(is_math).then(pl.col("op_id")).alias("math_root")), "math_root")
    inside = root.filter(pl.col("math_root").is_not_null())
    kernels = acts.select("row", "activity_id", "class").join(launch_op_of, on="activity_id").join(
        inside.rename({"op_id": "launch_op_id"}), on="launch_op_id")
    dropped = kernels.filter(pl.col("class") != "GEMM")["row"].to_numpy().astype(np.int64)
    return MathAttention(inside.select("op_id", "math_root"), float(spec["op_events"] + spec["launches"]), dropped)


def host_lengths(math: MathAttention, pieces: pl.DataFrame, piece_len: np.ndarray, per_event_ns: float) -> np.ndarray:
    """``piece_len`` with the math calls' host pieces gone and each call's fused op in its first
    piece (``pieces``: the graph's ``row, op_id``)."""
    if math.calls == 0:
        return piece_len
    inside = pieces.select("row", pl.col("op_id").cast(math.ops["op_id"].dtype)).join(math.ops, on="op_id")
    if inside.height == 0:
        return piece_len
    out = piece_len.copy()
    out[inside["row"].to_numpy()] = 0
    first = inside.group_by("math_root").agg(pl.col("row").min())["row"].to_numpy()
    out[first] += int(round(math.events * per_event_ns))
    return out


def device_durations(math: MathAttention, durations: np.ndarray) -> np.ndarray:
    """The activities' durations with the math path's non-GEMM kernels fused away."""
    if math.acts.size == 0:
        return durations
    out = durations.copy()
    out[math.acts] = 0
    return out
