"""Categories of engine layers (TensorRT) and ONNX nodes (ONNX Runtime), from the taxonomy's
``[onnx]`` and ``[tensorrt]`` data.

A layer's evidence is the op types of the ONNX nodes it fused (``onnx_ops``), its TensorRT
layer type and its origin. The decision, per distinct evidence:

1. a layer that fused any op of a GEMM-class category counts wholly as that category
   (attention before gemm): the NonGEMM paper's rule for fused layers;
2. else a layer type of a GEMM-class category (a convolution layer whose name lists no node);
3. else a layer made for quantization (``Origin: QDQ``) is ``qdq``;
4. else the first category of ``[onnx] priority`` among its ops;
5. else its layer type's category.

A Myelin region (layer type ``Myelin``, or ``{ForeignNode[a...b]}`` known by its first and
last node only) is GEMM, after rules 1-2, when what it contains shows a GEMM: an input tensor
named after a GEMM node that consumes it (``onnx::MatMul_12``, the PyTorch exporter's names:
rule ``region_inputs``), or a tactic the kernel-name rules call GEMM (``region_tactic``). A
region known by its ends that shows no GEMM is non-GEMM on weak evidence (rule
``region_endpoints``): a GEMM between its ends would not show. What none of these name falls
through to the kernel-name rules. ``fused_ops`` lists the ops a multi-node layer folded (lower
case, as Inductor's fused kernels are listed), so the fusion views read TensorRT layers the way
they read compiled kernels.
"""

from __future__ import annotations

import polars as pl

from .rules import kernel_verdict
from .taxonomy import Taxonomy

#: the activity columns a stack's loader adds, read here
EVIDENCE_COLUMNS = ("layer_type", "origin", "onnx_ops", "origin_nodes", "input_ops", "tactic")


def _gemm_of(tax: Taxonomy, ops: list[str]) -> str | None:
    """The GEMM-class category of ONNX op types (attention before gemm), or None."""
    gemm_like = [c for c in (tax.engines.onnx_ops.get(o) for o in ops) if c and tax.class_of(c) == "GEMM"]
    return ("attention" if "attention" in gemm_like else gemm_like[0]) if gemm_like else None


def _region_gemm(tax: Taxonomy, input_ops: str | None, tactic: str | None) -> tuple[str | None, str | None]:
    """``(category, rule)`` when a region's contents show a GEMM: its input tensors' consumers, or
    its tactic by the kernel-name rules."""
    inside = _gemm_of(tax, [o for o in (input_ops or "").split(",") if o])
    if inside:
        return inside, "region_inputs"
    if tactic:
        cat = kernel_verdict(tax, tactic)[0]
        if cat and tax.class_of(cat) == "GEMM":
            return cat, "region_tactic"
    return None, None


def engine_verdict(tax: Taxonomy, layer_type: str | None, origin: str | None, onnx_ops: str | None,
                   region: bool = False, input_ops: str | None = None,
                   tactic: str | None = None) -> tuple[str | None, str | None]:
    """``(category, rule)`` of one layer or node; ``(None, None)`` when the data names neither.
    ``region``: a Myelin region, whose ``input_ops`` and ``tactic`` can show a GEMM inside."""
    rules = tax.engines
    ops = [o for o in (onnx_ops or "").split(",") if o]
    cats = [rules.onnx_ops.get(o) for o in ops]
    fused = _gemm_of(tax, ops)
    if fused:
        return fused, "onnx_nodes"
    by_type = rules.layer_types.get(layer_type or "")
    if by_type and tax.class_of(by_type) == "GEMM":
        return by_type, "layer_type"
    if region:
        inside = _region_gemm(tax, input_ops, tactic)
        if inside[0]:
            return inside
    if origin == "QDQ" and "qdq" in tax.categories:
        return "qdq", "layer_type"
    known = [c for c in cats if c]
    if known:
        ranked = sorted(known, key=lambda c: rules.priority.index(c) if c in rules.priority else len(rules.priority))
        return ranked[0], "onnx_nodes"
    if by_type:
        return by_type, "layer_type"
    return None, None


def engine_table(tax: Taxonomy, acts: pl.DataFrame) -> pl.DataFrame:
    """One row per distinct evidence of ``acts`` (engine activities): its category, rule and fused ops."""
    cols = [c for c in EVIDENCE_COLUMNS if c in acts.columns]
    uniq = acts.select(cols).unique()
    rows = []
    for r in uniq.iter_rows(named=True):
        region = r.get("origin_nodes") == "endpoints" or r.get("layer_type") == "Myelin"
        cat, rule = engine_verdict(tax, r.get("layer_type"), r.get("origin"), r.get("onnx_ops"), region,
                                   r.get("input_ops"), r.get("tactic"))
        if r.get("origin_nodes") == "endpoints" and cat is not None and tax.class_of(cat) != "GEMM":
            rule = "region_endpoints"  # a GEMM inside the region would not show: weak evidence
        ops = [o for o in (r.get("onnx_ops") or "").split(",") if o]
        fused = ",".join(o.lower() for o in ops) if len(ops) > 1 else None
        rows.append({**r, "engine_category": cat, "engine_rule": rule, "engine_fused": fused})
    schema = {**{c: pl.String for c in cols}, "engine_category": pl.String, "engine_rule": pl.String,
              "engine_fused": pl.String}
    return pl.DataFrame(rows, schema=schema, orient="row")


def with_engine_columns(tax: Taxonomy, acts: pl.DataFrame) -> pl.DataFrame:
    """``acts`` with ``engine_category``, ``engine_rule`` and ``engine_fused``; the profile's median
    time replaces the mean where the taxonomy says a layer's time is its median."""
    cols = [c for c in EVIDENCE_COLUMNS if c in acts.columns]
    acts = acts.join(engine_table(tax, acts), on=cols, how="left", nulls_equal=True, maintain_order="left")
    if tax.engines.layer_time == "median" and "median_ns" in acts.columns:
        start = pl.col("median_ns").cum_sum() - pl.col("median_ns")  # laid end to end again
        acts = acts.with_columns(start.alias("ts_ns"), pl.col("median_ns").alias("dur_ns"),
                                 pl.col("median_ns").cum_sum().alias("end_ns"))
    return acts


def is_engine(acts: pl.DataFrame) -> bool:
    """Whether ``acts`` come from a deployment stack's profile (they carry ONNX op types)."""
    return "onnx_ops" in acts.columns
