"""``shapes``: the op table per input shape, with the rates each shape achieved.

A GEMM that reaches half the device's TFLOP/s at one shape and a tenth at another is one line in the
per-op view and two here. Each op call counts as ``flops`` counts it (the call that owns the GPU time
of the kernels below it, its FLOPs and bytes by formula or estimate: :mod:`nongemm_trace.flops`);
calls of one op with the same ``Input Dims`` and ``Input type`` are one row. Traces recorded without
``record_shapes`` have no shapes: their calls fall into one row per op with empty dims.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core.fields import option
from .registry import AnalysisSpec, register

if TYPE_CHECKING:  # pragma: no cover
    from ..models.shapes import ShapesReport
    from ..pipeline.context import Context
    from ..pipeline.selection import Selection


@dataclass(frozen=True)
class ShapesParams:
    device_spec: str | None = option(None, "peak specs to use instead of the detected device", metavar="NAME|FILE.toml")


def shapes(sel: Selection, ctx: Context, params: ShapesParams) -> ShapesReport:
    """One row per (op, input dims, input types) of the calls that own GPU time or have FLOPs."""
    import polars as pl

    from ..models.shapes import ShapesReport
    from .flops import flops_of

    rep = flops_of(sel, ctx, params.device_spec)
    inputs = sel.linked.ops.select(
        "op_id", *(pl.col(c).cast(pl.String).fill_null("") if c in sel.linked.ops.columns else pl.lit("").alias(c)
                   for c in ("input_dims", "input_type")))
    calls = rep.calls.filter((pl.col("time_ns") > 0) | pl.col("flops").is_not_null()).join(
        inputs.cast({"op_id": rep.calls.schema["op_id"]}), on="op_id", how="left")
    keys = ["op", "input_dims", "input_type"]
    t = pl.col("time_ns").cast(pl.Float64)
    table = calls.group_by(keys).agg(
        pl.col("category").mode().sort().first(), pl.col("precision").drop_nulls().mode().sort().first(),
        pl.len().cast(pl.Int64).alias("calls"), pl.col("time_ns").sum().cast(pl.Int64),
        pl.col("flops").sum().alias("_flops"), pl.col("bytes").sum().alias("_bytes"),
        pl.col("flops").is_not_null().any().alias("_counted"),
    ).with_columns(
        (pl.col("time_ns") // pl.col("calls")).alias("mean_ns"),
        pl.when(pl.col("_counted")).then(pl.col("_flops") // pl.col("calls")).alias("flops_per_call"),
        pl.when(pl.col("_counted")).then(pl.col("_bytes") // pl.col("calls")).alias("bytes_per_call"),
        pl.when(pl.col("_counted") & (t > 0)).then(pl.col("_flops") / t / 1e3).alias("achieved_tflops"),
        pl.when(pl.col("_counted") & (t > 0)).then(pl.col("_bytes") / t).alias("achieved_gbps"),
    ).sort(["time_ns", *keys], descending=[True, False, False, False])
    from ..models.shapes import COLUMNS

    return ShapesReport(sel.trace, rep.device.name if rep.device else None, table.select(list(COLUMNS)),
                        list(rep.warnings))


SPEC = register(AnalysisSpec(
    "shapes", "the op table per input shape: calls, GPU time, and the TFLOP/s and GB/s each shape achieved",
    ShapesParams, "shapes", shapes, trace_help="a Kineto trace recorded with record_shapes=True",
    top="rows of op shapes in the table view (default 15)"))
