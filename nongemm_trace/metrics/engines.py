"""The fusion view of a deployment stack's profile: what the engine folded into its GEMMs and
what non-GEMM work still runs on its own.

TensorRT: for each ONNX op type that GEMM layers fused (``Relu``, ``Add``, ``QuantizeLinear`` …)
how many GEMM layers folded it and their time; the standalone non-GEMM layers per category
and per layer type (reformats, Q/DQ, pointwise regions, pooling, Myelin regions without GEMMs).
ONNX Runtime: time per op type that is ORT's own fusion (``FusedConv``, ``SkipLayerNormalization``
…) and per execution provider.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from ..classify.taxonomy import Taxonomy
from ..vocabulary import us


def _share(ns: int, total: int) -> float:
    return round(ns / total, 6) if total else 0.0


def engine_view(acts: pl.DataFrame, tax: Taxonomy, source_format: str) -> dict[str, Any]:
    """The fusion view of ``acts`` (classified layers or nodes) of a ``tensorrt`` or ``onnxruntime`` profile."""
    total = int(acts["dur_ns"].sum() or 0)
    ops = acts.select("dur_ns", "class", "category", pl.col("onnx_ops").fill_null("").str.split(",").alias("op"))
    out: dict[str, Any] = {"format": source_format, "time_us": us(total)}
    if source_format == "tensorrt":
        gemm = ops.filter(pl.col("class") == "GEMM").explode("op").filter(pl.col("op") != "")
        gemm = gemm.with_columns(pl.col("op").replace_strict(tax.engines.onnx_ops, default=None,
                                                             return_dtype=pl.String).alias("op_category"))
        folded = gemm.filter(pl.col("op_category").is_null()
                             | ~pl.col("op_category").replace_strict(tax.classes, default="unclassified").eq("GEMM"))
        folded = folded.group_by("op", "op_category").agg(pl.len().alias("layers"), pl.col("dur_ns").sum()) \
            .sort(["layers", "op"], descending=[True, False])
        out["folded_into_gemm_layers"] = [
            {"op": r["op"], "category": r["op_category"], "gemm_layers": int(r["layers"]),
             "gemm_layer_time_us": us(r["dur_ns"])} for r in folded.iter_rows(named=True)]
        alone = acts.filter(pl.col("class") != "GEMM")
        by_cat = alone.group_by("category").agg(pl.len().alias("layers"), pl.col("dur_ns").sum()) \
            .sort(["dur_ns", "category"], descending=[True, False])
        out["standalone_non_gemm"] = [
            {"category": r["category"], "layers": int(r["layers"]), "time_us": us(r["dur_ns"]),
             "share": _share(int(r["dur_ns"]), total)} for r in by_cat.iter_rows(named=True)]
        kind = alone.group_by(pl.col("layer_type").fill_null("(unknown)")).agg(
            pl.len().alias("layers"), pl.col("dur_ns").sum()).sort(["dur_ns", "layer_type"], descending=[True, False])
        out["standalone_by_layer_type"] = [
            {"layer_type": r["layer_type"], "layers": int(r["layers"]), "time_us": us(r["dur_ns"]),
             "share": _share(int(r["dur_ns"]), total)} for r in kind.iter_rows(named=True)]
        gemm_ns = int(acts.filter(pl.col("class") == "GEMM")["dur_ns"].sum() or 0)
        out["gemm_share_paper_rule"] = _share(gemm_ns, total)
        out["layers"] = acts.height
    else:
        node_ops = acts.with_columns(pl.col("onnx_ops").fill_null("(none)"))
        fused = node_ops.filter(pl.col("onnx_ops").is_in(list(tax.engines.fused_ops)))
        g = fused.group_by("onnx_ops", "category").agg(pl.len().alias("n"), pl.col("dur_ns").sum()) \
            .sort(["dur_ns", "onnx_ops"], descending=[True, False])
        out["fused_ops"] = [{"op": r["onnx_ops"], "category": r["category"], "activities": int(r["n"]),
                             "time_us": us(r["dur_ns"]), "share": _share(int(r["dur_ns"]), total)}
                            for r in g.iter_rows(named=True)]
        if "provider" in acts.columns:
            p = acts.group_by(pl.col("provider").fill_null("(not recorded)")).agg(pl.col("dur_ns").sum()) \
                .sort(["dur_ns", "provider"], descending=[True, False])
            out["providers"] = [{"provider": r["provider"], "time_us": us(r["dur_ns"]),
                                 "share": _share(int(r["dur_ns"]), total)} for r in p.iter_rows(named=True)]
    return out
