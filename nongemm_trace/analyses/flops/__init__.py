"""``flops``: FLOPs, bytes and the roofline per op, from the trace alone.

Each op call with a formula (:mod:`.formulas`) is the *owner* of the GPU
activities it launched and of those launched by ops inside it that have no
formula of their own (``aten::_scaled_dot_product_efficient_attention`` owns the
kernel its ``_efficient_attention_forward`` child launched). A call whose formula
is composite (``linear``, ``matmul``, ``conv2d``) counts only when no op inside it
has a formula, so FLOPs are never counted twice (``aten::addmm``, not again
``aten::linear``). Activities with no formula-owning op above them are owned by
their launching op and estimated by its category (bytes moved; a few FLOPs per
element); launching ops with neither are listed, never silently zero.

No call is classified here: a call's FLOPs and bytes count in the category that holds its
time, the category ``analyze`` gave the activities it owns (the most of their time, where
they differ), so RMSNorm's written-out ``pow``/``mean``/``rsqrt``/``mul`` count in
normalization and a Linear's bias-gradient ``sum`` in GEMM, and the category times are
``analyze``'s own. The op's own kind (its name's category, or qdq) only picks the estimate's
formula (an element-wise ``mul`` costs one FLOP per element wherever its time is counted).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ...classify.ladder import call_category
from ...core.frames import as_text, nearest_down, strict_ancestors
from ...core.trace import Anomaly
from ...devices import match_device
from ...models.flops import FlopsReport
from ...pipeline.analysis import Analysis, open_analysis
from ...pipeline.context import Context
from ...pipeline.options import AnalysisOptions, keywords_of
from ...pipeline.selection import Selection
from .fits import fit_models
from .formulas import OpCall, category_estimate, is_composite, lookup

_PRECISION = {"float": "fp32", "double": "fp32", "c10::Half": "fp16", "c10::BFloat16": "bf16",
              "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8", "c10::Float8_e4m3fnuz": "fp8",
              "c10::Float8_e5m2fnuz": "fp8", "signed char": "int8", "c10::qint8": "int8"}


def _owners(calls: pl.DataFrame, acts: pl.DataFrame) -> pl.DataFrame:
    """activity_id -> owner op_id (the nearest counted-formula call at or above the launching op,
    else the launching op itself)."""
    counted = calls.with_columns(pl.when(pl.col("counted")).then(pl.col("op_id")).alias("_owner"))
    owner = nearest_down(counted, "_owner").rename({"op_id": "launch_op_id"})
    base = acts.filter(pl.col("launch_op_id").is_not_null()).select("activity_id", "launch_op_id")
    return base.join(owner, on="launch_op_id", how="left", maintain_order="left").select(
        "activity_id", pl.coalesce("_owner", "launch_op_id").alias("owner"))


def flops_analysis(source: str | Path | Analysis, *, device_spec: str | None = None,
                   options: AnalysisOptions | None = None, **old: Any) -> FlopsReport:
    """FLOPs, bytes, achieved rates and the roofline per op of a path or an :class:`Analysis`;
    ``options``: the :class:`~nongemm_trace.pipeline.options.AnalysisOptions` (``old``: its fields as
    keywords, as it took them before: deprecated)."""
    analysis, typed = open_analysis(source, keywords_of(options, old, "flops_analysis"), metric="gpu")
    sel = analysis.selection(typed)
    return flops_of(sel, analysis.context(None, typed), device_spec)


def flops_of(sel: Selection, ctx: Context, device_spec: str | None = None) -> FlopsReport:
    """:func:`flops_analysis` of a selection (the analysis's ``run``)."""
    path = sel.trace
    warnings = sel.warnings_as("gpu")
    dev_props = (sel.metadata.get("devices") or [None])[0]
    device = match_device(dev_props, device_spec)
    if device is None:
        name = (sel.metadata.get("device") or {}).get("name")
        warnings.append(Anomaly("unknown_device", 1, f"no peak specs for device {name!r}: achieved rates are shown, "
                                                     f"roofline percentages are not (use --device-spec)"))
    calls = sel.linked.ops
    names = calls.select("name").unique()
    flags = [(n, lookup(n) is not None, is_composite(n)) for (n,) in names.iter_rows()]
    fl = pl.DataFrame(flags, schema={"name": pl.Utf8, "has_formula": pl.Boolean, "composite": pl.Boolean},
                      orient="row").with_columns(pl.col("name").cast(calls.schema["name"]))  # text or categorical
    calls = calls.join(fl, on="name", how="left")
    # composite formulas count only when nothing inside them has a formula
    has_inner = strict_ancestors(calls, calls.filter(pl.col("has_formula"))["op_id"])
    calls = calls.with_columns(pl.col("op_id").is_in(has_inner.implode()).alias("_inner"))
    calls = calls.with_columns((pl.col("has_formula") & ~(pl.col("composite") & pl.col("_inner"))).alias("counted"))
    # the op's own kind: which estimate applies to it (not where its numbers count)
    calls = calls.with_columns(
        pl.when(pl.col("qdq_call")).then(pl.lit("qdq")).otherwise(pl.col("op_category").cast(pl.String)).fill_null("unclassified")
        .alias("kind"))

    acts = sel.activities
    own = _owners(calls, acts)
    acts = acts.join(own, on="activity_id", how="left")
    owned = acts.filter(pl.col("owner").is_not_null())
    # the category that holds an owner's time: analyze's, of the most of its activities' time
    holder = (owned.group_by("owner", "category").agg(pl.col("dur_ns").sum().alias("_t"))
              .sort(["owner", "_t", "category"], descending=[False, True, False])
              .group_by("owner", maintain_order=True).agg(pl.col("category").first().alias("_held")))
    owner_time = owned.group_by("owner").agg(
        pl.col("dur_ns").sum().alias("time_ns"), pl.col("name").unique().alias("kernels")).join(
        holder, on="owner", how="left")
    targets = calls.filter(pl.col("counted")).select("op_id").vstack(
        owner_time.select(pl.col("owner").alias("op_id")).cast({"op_id": calls.schema["op_id"]})).unique()
    chosen = calls.join(targets, on="op_id", how="semi").join(
        owner_time.rename({"owner": "op_id"}), on="op_id", how="left").with_columns(
        # a call that owns no GPU time (it launched nothing) counts where analyze's rule puts the call
        pl.coalesce("_held", call_category(ctx.taxonomy.semantics.generic_categories), "kind").alias("category"))

    per_call = _per_call(chosen, device)
    tax_class = dict(acts.select("category", "class").unique().iter_rows())
    have = per_call.filter(pl.col("flops").is_not_null())
    no_formula = per_call.filter(pl.col("flops").is_null()).group_by("op").agg(
        pl.len().alias("calls"), pl.col("time_ns").sum()).sort(["time_ns", "op"], descending=[True, False])
    if no_formula.height:
        warnings.append(Anomaly("no_formula", int(no_formula["calls"].sum()),
                                f"{int(no_formula['calls'].sum())} op calls "
                                f"({no_formula['time_ns'].sum() / 1000:,.1f} us of GPU time) have no FLOP/byte formula "
                                f"and no shapes to estimate: listed in no_formula"))
    ops = have.group_by(["op", "category"]).agg(
        pl.len().alias("calls"), pl.col("flops").sum(), pl.col("bytes").sum(), pl.col("time_ns").sum(),
        pl.col("precision").mode().sort().first(), pl.col("formula").mode().sort().first(), pl.col("roofline_ns").sum(),
        (pl.col("compute_bound").cast(pl.Float64) * pl.col("time_ns")).sum().alias("_cb_time"))
    ops = _rates(ops).sort(["time_ns", "op"], descending=[True, False])
    cats = have.group_by("category").agg(pl.col("flops").sum(), pl.col("bytes").sum())
    # time per category: every GPU activity (not only those an estimate covers)
    cat_time = as_text(acts.group_by("category").agg(pl.col("dur_ns").sum().alias("time_ns")))  # codes, as text
    cats = cat_time.join(cats, on="category", how="full", coalesce=True).with_columns(
        pl.col("flops").fill_null(0), pl.col("bytes").fill_null(0), pl.col("time_ns").fill_null(0))
    cats = cats.with_columns(pl.col("category").replace_strict(tax_class, default="unclassified").alias("class"))
    cats = _rates(cats).sort(["time_ns", "category"], descending=[True, False])
    classes = cats.group_by("class").agg(pl.col("flops").sum(), pl.col("time_ns").sum())
    tf, tt = classes["flops"].sum(), classes["time_ns"].sum()
    classes = classes.with_columns((pl.col("flops") / tf if tf else pl.lit(0.0)).alias("flop_share"),
                                   (pl.col("time_ns") / tt if tt else pl.lit(0.0)).alias("time_share")).sort("class")
    gemm_calls = have.filter(pl.col("category").is_in(["gemm"]) & (pl.col("formula") == "formula")
                             & (pl.col("time_ns") > 0))
    shapes = gemm_calls.group_by(["op", "flops", "S", "K"]).agg(pl.col("time_ns").mean(), pl.len().alias("calls"))
    fits = fit_models([dict(r) for r in shapes.iter_rows(named=True)])
    equal = _equal_flops(gemm_calls)
    return FlopsReport(str(path), device, ops, cats, classes, per_call, no_formula, fits, equal, warnings)


#: what decides a call's formula, estimate, precision and spatial sizes (equal signatures, equal answers)
_SIGNATURE = ("name", "kind", "counted", "input_dims", "input_type", "concrete_inputs")


def _per_call(chosen: pl.DataFrame, device: Any) -> pl.DataFrame:
    """One row per chosen call: its FLOPs and bytes (formula or category estimate), precision, spatial
    sizes, first kernels and roofline time. The formulas are Python functions of the parsed call, run
    once per distinct signature (name, kind, recorded inputs): a loop repeats its shapes every step, so
    a 200 MB training trace holds 33,000 such calls and a few hundred signatures; the rest is columns."""
    sigs = chosen.select(*_SIGNATURE).unique(maintain_order=True)
    answers = []
    for r in sigs.iter_rows(named=True):
        call = OpCall.parse(r["name"], r["input_dims"], r["input_type"], r["concrete_inputs"])
        res, how = None, "none"
        if r["counted"]:
            formula = lookup(r["name"])
            assert formula is not None  # counted: it has one
            res = formula(call)
            how = "formula" if res else "formula (shapes missing)"
        if res is None and r["kind"] not in ("gemm", "attention"):
            res = category_estimate(call, r["kind"])
            how = f"estimate ({r['kind']})" if res else how
        inputs = call.tensor_inputs()
        spatial, kernel = _spatial(call)
        answers.append((res[0] if res else None, res[1] if res else None, how,
                        _PRECISION.get(call.types[inputs[0]] if inputs else "", None), spatial, kernel))
    found = pl.DataFrame(answers, schema={"flops": pl.Int64, "bytes": pl.Int64, "formula": pl.Utf8,
                                          "_prec": pl.Utf8, "S": pl.Float64, "K": pl.Float64}, orient="row")
    calls = chosen.select("op_id", "name", "category", *_SIGNATURE[1:], "time_ns", "kernels").join(
        pl.concat([sigs, found], how="horizontal"), on=list(_SIGNATURE), how="left", nulls_equal=True,
        maintain_order="left")
    kernels = pl.col("kernels").cast(pl.List(pl.String))
    # cuDNN / cuBLAS ran the fp32 op on TF32 tensor cores
    tf32 = kernels.list.eval(pl.element().str.to_lowercase().str.contains("tf32", literal=True)
                             | pl.element().str.contains("tensorop", literal=True)).list.any().fill_null(False)
    calls = calls.with_columns(pl.when((pl.col("_prec") == "fp32") & tf32).then(pl.lit("tf32"))
                               .otherwise(pl.col("_prec")).alias("precision"))
    roof = pl.repeat(None, calls.height, dtype=pl.Float64, eager=True).alias("roofline_ns")
    bound = pl.repeat(None, calls.height, dtype=pl.Boolean, eager=True).alias("compute_bound")
    if device is not None and calls.height:
        # numpy's true division, as the per-call Python arithmetic it replaces (polars divides by a
        # constant through its reciprocal: the last digit of a roofline time moved)
        prec = calls["precision"].fill_null("fp32")
        names = [*prec.unique().to_list(), "fp32"]
        # the roofline's peak falls back to fp32's; the compute-bound test's to 1
        peak = prec.replace_strict({n: float(device.peak_flops(n) or device.peak_flops("fp32") or 0.0)
                                    for n in names}, return_dtype=pl.Float64).to_numpy()
        bound_peak = prec.replace_strict({n: float(device.peak_flops(n) or 1) for n in names},
                                         return_dtype=pl.Float64).to_numpy()
        has = calls["flops"].is_not_null().to_numpy()
        flops = calls["flops"].cast(pl.Float64).fill_null(0.0).to_numpy()
        mem = calls["bytes"].cast(pl.Float64).fill_null(0.0).to_numpy() / (device.memory_tbps * 1e12)
        with np.errstate(divide="ignore", invalid="ignore"):
            per_flop = np.where(peak != 0, flops / np.where(peak != 0, peak, 1.0), 0.0)
            roof = pl.Series("roofline_ns", np.where(has, np.maximum(per_flop, mem) * 1e9, np.nan)).fill_nan(None)
            bound = pl.Series("compute_bound", flops / bound_peak >= mem).set(pl.Series(~has), None)
    return calls.select(
        "op_id", pl.col("name").cast(pl.String).alias("op"), pl.col("category").cast(pl.String), "flops", "bytes",
        pl.col("time_ns").fill_null(0).cast(pl.Int64), "formula", "precision", "S", "K",
        kernels.list.sort().list.head(3).list.join("\n").fill_null("").alias("kernels"),
        roof, bound)


def _spatial(c: OpCall) -> tuple[float | None, float | None]:
    base = c.name.rsplit("::", 1)[-1]
    x, w = c.shape(0), c.shape(1)
    if "conv" in base and x and w and len(x) >= 3 and len(w) == len(x):
        return float(math.prod(x[2:])), float(math.prod(w[2:]))
    if base in ("mm", "_scaled_mm") and x:
        return float(x[0]), 1.0
    if base in ("addmm", "baddbmm") and w:
        return float(w[-2]), 1.0
    if base == "bmm" and x:
        return float(x[0] * x[1]), 1.0
    return None, None


def _rates(df: pl.DataFrame) -> pl.DataFrame:
    """Achieved TFLOP/s and TB/s over the owned GPU time; with device peaks, the % of the
    roofline (the roofline's time for the calls / their measured time, so calls of mixed
    precision each meet their own roof) and whether most of the time is compute-bound."""
    t = pl.col("time_ns").cast(pl.Float64)
    df = df.with_columns(
        pl.when(t > 0).then(pl.col("flops") / t / 1e3).alias("achieved_tflops"),
        pl.when(t > 0).then(pl.col("bytes") / t / 1e3).alias("achieved_tbps"),
        pl.when(pl.col("bytes") > 0).then(pl.col("flops") / pl.col("bytes")).alias("arithmetic_intensity"),
    )
    if "roofline_ns" not in df.columns:
        return df.with_columns(pl.lit(None, pl.Utf8).alias("bound"), pl.lit(None, pl.Float64).alias("roofline_pct"))
    has = pl.col("roofline_ns") > 0
    return df.with_columns(
        pl.when(has & (t > 0)).then(100 * pl.col("roofline_ns") / t).alias("roofline_pct"),
        pl.when(has).then(pl.when(pl.col("_cb_time") * 2 >= pl.col("time_ns")).then(pl.lit("compute"))
                          .otherwise(pl.lit("memory"))).alias("bound"),
    ).drop("_cb_time")


def _equal_flops(gemm_calls: pl.DataFrame, top: int = 10) -> list[dict[str, Any]]:
    g = gemm_calls.group_by("flops").agg(
        pl.len().alias("calls"), pl.col("time_ns").min().alias("min_ns"), pl.col("time_ns").max().alias("max_ns"),
        pl.col("op").unique().alias("ops"), pl.col("kernels").unique().alias("kernels"))
    g = g.filter((pl.col("calls") >= 2) & (pl.col("min_ns") > 0)).with_columns(
        (pl.col("max_ns") / pl.col("min_ns")).alias("spread")).sort(["spread", "flops"], descending=[True, False])
    return [{"flops": int(r["flops"]), "calls": int(r["calls"]), "min_us": round(r["min_ns"] / 1000, 3),
             "max_us": round(r["max_ns"] / 1000, 3), "spread": round(r["spread"], 3), "ops": sorted(r["ops"]),
             "kernels": sorted({k for ks in r["kernels"] for k in (ks or "").split("\n") if k})[:6]}
            for r in g.head(top).iter_rows(named=True)]
