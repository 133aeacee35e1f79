"""``compare``: what changed between traces — per class and category, with the fusion
(eager vs torch.compile) and quantization (e.g. bf16 vs FP8) views.

Every trace is analysed with the same options; times and counts are whole-trace
totals, or per step with ``per_step=True`` (each trace divided by its own step
count). Ratios are trace / BASE; deltas are trace - BASE.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from ..core.frames import as_text, number
from ..core.trace import Anomaly
from ..errors import TraceError
from ..models.comparison import TRACE_COLUMNS, Comparison
from ..models.comparison import plain_number as _num
from ..models.report import Report
from ..models.stored import is_stored_report, read_stored_report
from ..pipeline.analysis import Analysis, open_analysis
from ..pipeline.options import AnalysisOptions, keywords_of
from ..vocabulary import CLASSES, METRIC_TEXT
from ..vocabulary import us as _us

#: metadata keys that must agree for a fair comparison
_ENV_KEYS = ("cuda_runtime_version", "cuda_driver_version", "hip_runtime_version", "schemaVersion")


@dataclass(frozen=True)
class _Side:
    """One compared trace: its report (the document's numbers: totals, steps, device, metric) and,
    when it was measured here, its selected activities (the launch counts and the fusion views
    read them); a report given as it is, live or stored, has its category table only."""

    report: Report
    acts: pl.DataFrame | None

    def categories(self) -> pl.DataFrame:
        """``category, class, time_ns, activities, launches`` of the categories with activities
        (``unclassified`` always); ``launches`` is null where only the document is read."""
        if self.acts is not None:
            g = as_text(self.acts.group_by("category").agg(  # keyed on codes, as text (a report's table is)
                pl.col("class").first(), pl.col("dur_ns").sum().alias("time_ns"), pl.len().alias("activities"),
                pl.col("launch_id").drop_nulls().n_unique().alias("launches")))
        else:
            r = self.report
            if r.metric == "cpu":
                raise TraceError(r.trace, "is a cpu-metric report: it holds no GPU activities per category to "
                                          "compare (store the report with metric gpu)")
            g = r.gpu_categories().filter(pl.col("activities") > 0).select(
                "category", "class", pl.col("gpu_time_ns").alias("time_ns"), "activities",
                pl.lit(None, pl.Int64).alias("launches"))
        if "unclassified" not in g["category"].to_list():
            g = pl.concat([g, pl.DataFrame({"category": ["unclassified"], "class": ["unclassified"], "time_ns": [0],
                                            "activities": [0], "launches": [0 if self.acts is not None else None]},
                                           schema=g.schema)])
        return g


def _side(src: str | Path | Analysis | Report, options: dict[str, Any]) -> _Side:
    if isinstance(src, Report):
        return _Side(src, None)
    if not isinstance(src, Analysis) and is_stored_report(src):
        return _Side(read_stored_report(src), None)
    analysis, typed = open_analysis(src, options, metric="gpu")
    return _Side(analysis.report(typed), analysis.selection(typed).activities)


def compare(sources: Sequence[str | Path | Analysis | Report], *, per_step: bool = False,
            options: AnalysisOptions | None = None, **old: Any) -> Comparison:
    """Compare ``sources[0]`` (BASE) with the others: paths, :class:`Analysis` objects, reports or
    stored reports' JSON files (``options``: the :class:`~nongemm_trace.pipeline.options.AnalysisOptions`
    of the traces; ``old``: its fields as keywords, as it took them before: deprecated). A
    report is taken as it is: its document's category table (the launch counts and the fusion views
    need the activities, so a report's are null or left out)."""
    given = keywords_of(options, old, "compare")
    sides = [_side(src, given) for src in sources]
    reports = [s.report for s in sides]
    warnings: list[Anomaly] = []
    divisors = [1.0] * len(reports)
    if per_step:
        for i, r in enumerate(reports):
            if r.steps.height:
                divisors[i] = float(r.steps.height)
            else:
                warnings.append(Anomaly("no_steps", 1, f"{r.trace} has no steps: its totals are not divided"))
    warnings += _environment_warnings(reports)
    metrics = list(dict.fromkeys(r.metric for r in reports))
    if len(metrics) > 1:
        warnings.append(Anomaly("metrics_differ", len(metrics), "the traces measure different times ("
                                + "; ".join(f"{m}: {METRIC_TEXT.get(m, m)}" for m in metrics)
                                + "): compare shares, not absolute times"))
    tables = [s.categories() for s in sides]
    long = pl.concat([t.select(pl.lit(i, pl.Int64).alias("trace_index"), "category",
                               *(pl.col(c).cast(pl.Float64) / divisors[i]
                                 for c in ("time_ns", "activities", "launches")))
                      for i, t in enumerate(tables)])
    class_of = {"unclassified": "unclassified"}
    for t in tables:
        class_of.update(dict(t.select("category", "class").unique().iter_rows()))
    stored = [i for i, s in enumerate(sides) if s.acts is None]
    long = _no_launches(_complete(long, len(reports)), stored)
    long = long.with_columns(pl.col("category").replace_strict(class_of, default="unclassified").alias("class"))
    long = long.with_columns((pl.col("time_ns") / pl.col("time_ns").sum().over("trace_index")).fill_nan(0.0)
                             .alias("share"))
    # the order the taxonomy declares (a measured side's), then a stored side's own
    declared = [c for s in sorted(sides, key=lambda s: s.acts is None) for c in s.report.category_names]
    order = {c: i for i, c in enumerate(dict.fromkeys(declared))}
    long = long.with_columns(pl.col("category").replace_strict(order, default=99).alias("_o")).sort(
        ["_o", "trace_index"]).drop("_o")
    classes = long.group_by(["trace_index", "class"]).agg(pl.col("time_ns").sum(), pl.col("activities").sum(),
                                                          pl.col("launches").sum(), pl.col("share").sum())
    classes = _no_launches(classes, stored)
    corder = {c: i for i, c in enumerate(CLASSES)}
    classes = classes.with_columns(pl.col("class").replace_strict(corder, default=9).alias("_o")).sort(
        ["_o", "trace_index"]).drop("_o")
    fusion = None if all(r.engine is not None for r in reports) else _fusion_view(sides, divisors)
    engine_fusion = _engine_fusion_view(sides, divisors)
    quant = _quantization_view(reports, divisors, long, classes)
    per_trace = pl.DataFrame([(r.trace, r.gpu_time_ns / divisors[i], r.gpu_activities / divisors[i], r.steps.height,
                               _class_share(classes, i, "non-GEMM"), (r.metadata.get("device") or {}).get("name"))
                              for i, r in enumerate(reports)], schema=TRACE_COLUMNS, orient="row")
    return Comparison(per_step, reports[0].level, reports[0].taxonomy, per_trace, _against_base(long, "category"),
                      _against_base(classes, "class"), fusion, quant, warnings, engine_fusion, reports)


def _no_launches(long: pl.DataFrame, stored: list[int]) -> pl.DataFrame:
    """Launch counts null for the sides read from a document (it holds none), not zero."""
    if not stored:
        return long
    return long.with_columns(pl.when(pl.col("trace_index").is_in(stored)).then(None)
                             .otherwise(pl.col("launches")).alias("launches"))


def _class_share(classes: pl.DataFrame, i: int, name: str) -> float:
    c = classes.filter((pl.col("trace_index") == i) & (pl.col("class") == name))
    return float(c["share"].sum()) if c.height else 0.0


def _against_base(long: pl.DataFrame, key: str) -> pl.DataFrame:
    """``delta_ns`` (trace - BASE) and ``ratio`` (trace / BASE; 1 when both are 0, null when only
    BASE is) per row of a long table."""
    base = pl.col("time_ns").sort_by("trace_index").first().over(key)
    return long.with_columns(
        (pl.col("time_ns") - base).alias("delta_ns"),
        pl.when(base != 0).then(pl.col("time_ns") / base)
        .when(pl.col("time_ns") == 0).then(pl.lit(1.0)).otherwise(pl.lit(None, pl.Float64)).alias("ratio"))


def _complete(long: pl.DataFrame, n: int) -> pl.DataFrame:
    """Every category that appears in any trace gets a row (zeros) in every trace."""
    cats = long.select("category").unique()
    grid = cats.join(pl.DataFrame({"trace_index": list(range(n))}), how="cross")
    out = grid.join(long, on=["trace_index", "category"], how="left")
    return out.with_columns(pl.col(c).fill_null(0.0) for c in ("time_ns", "activities", "launches"))


def _environment_warnings(reports: list[Report]) -> list[Anomaly]:
    out = []
    base = reports[0]
    bdev = (base.metadata.get("device") or {}).get("name")
    for r in reports[1:]:
        dev = (r.metadata.get("device") or {}).get("name")
        if dev != bdev:
            out.append(Anomaly("different_device", 1, f"{r.trace} ran on {dev or 'an unknown device'}, "
                                                      f"BASE on {bdev or 'an unknown device'}"))
        for k in _ENV_KEYS:
            a, b = base.metadata.get("trace", {}).get(k), r.metadata.get("trace", {}).get(k)
            if a != b:
                out.append(Anomaly("different_environment", 1, f"{r.trace}: {k} is {b}, BASE has {a}"))
        # torch's version is in traces made by our collectors (nongemm_run metadata)
        ta = (base.metadata.get("trace", {}).get("nongemm_run") or {}).get("torch")
        tb = (r.metadata.get("trace", {}).get("nongemm_run") or {}).get("torch")
        if ta and tb and ta != tb:
            out.append(Anomaly("different_torch", 1, f"{r.trace} was captured with torch {tb}, BASE with torch {ta}"))
    return out


def _engine_fusion_view(sides: list[_Side], div: list[float]) -> list[dict[str, Any]] | None:
    """For deployment-stack profiles (ONNX op types on their activities): nodes and time per op type,
    BASE against each other profile, so what a higher optimization level fused away shows."""
    def has_ops(s: _Side) -> bool:
        return s.acts is not None and "onnx_ops" in s.acts.columns

    if not has_ops(sides[0]):
        return None

    def per_op(acts: pl.DataFrame | None) -> dict[str, tuple[int, int, str]]:
        assert acts is not None  # has_ops
        g = acts.group_by(pl.col("onnx_ops").fill_null("(none)")).agg(
            pl.len(), pl.col("dur_ns").sum(), pl.col("category").mode().sort().first())
        return {op: (n, t, cat) for op, n, t, cat in g.iter_rows()}

    base = per_op(sides[0].acts)
    out = []
    for i, side in enumerate(sides[1:], start=1):
        if not has_ops(side):
            continue
        r, mine = side.report, per_op(side.acts)
        rows: list[dict[str, Any]] = []
        for op in sorted(set(base) | set(mine)):
            bn, bt, bc = base.get(op, (0, 0, None))
            n, t, c = mine.get(op, (0, 0, None))
            rows.append({"op": op, "category": c or bc, "base_nodes": _num(bn / div[0]),
                         "base_time_us": _us(bt / div[0]),
                         "nodes": _num(n / div[i]), "time_us": _us(t / div[i])})
        rows.sort(key=lambda x: (-x["base_time_us"], x["op"]))
        out.append({"trace": r.trace, "op_types": rows})
    return out or None


def _base(name: str | None) -> str | None:
    return None if name is None else name.rsplit("::", 1)[-1]


def _fused_names(op: str) -> list[str]:
    """The names a fused Triton kernel writes for eager op ``op`` (its base name): itself, itself
    without a trailing ``_``, and Inductor's renamings (data: ``facts/inductor.toml``)."""
    return [op, op.rstrip("_"), *_inductor_renamings().get(op, [])]


@lru_cache(maxsize=1)
def _inductor_renamings() -> dict[str, list[str]]:
    text = (resources.files("nongemm_trace") / "facts" / "inductor.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)["eager_to_fused"]


def _fusion_view(sides: list[_Side], div: list[float]) -> dict[str, Any] | None:
    """Eager (BASE) vs compiled: which eager ops disappeared into which fused Triton kernels (the
    measured sides only: it reads their activities)."""
    base, bk = sides[0].report, sides[0].acts
    if bk is None:
        return None
    out = []
    for i, side in enumerate(sides[1:], start=1):
        r, rk = side.report, side.acts
        if rk is None:
            continue
        fused = rk.filter(pl.col("fused_ops").is_not_null())
        if fused.height == 0 or bk.filter(pl.col("fused_ops").is_not_null()).height >= fused.height:
            continue
        eager_ops = (bk.filter(pl.col("class") == "non-GEMM").group_by("launch_op").agg(
            pl.len().alias("activities"), pl.col("dur_ns").sum().alias("time_ns"),
            pl.col("category").mode().sort().first())
            .filter(pl.col("launch_op").is_not_null()))
        new_ops = rk.group_by("launch_op").agg(pl.len().alias("n"), pl.col("dur_ns").sum().alias("t"))
        new_by_op = {o: (n, t) for o, n, t in new_ops.iter_rows()}
        kern = fused.group_by("name", maintain_order=True).agg(pl.len().alias("activities"),
                                                               pl.col("dur_ns").sum().alias("time_ns"),
                                          pl.col("fused_ops").first(), pl.col("category").first())
        by_token: dict[str, list[str]] = {}
        for name, _, _, ops, _ in kern.iter_rows():
            for tok in (ops or "").split(","):
                by_token.setdefault(tok, []).append(name)
        ops_rows = []
        for op, n, t, cat in eager_ops.sort(["time_ns", "launch_op"], descending=[True, False]).iter_rows():
            b = _base(op)
            left = new_by_op.get(op, (0, 0))
            ops_rows.append({
                "op": op, "category": cat, "eager_activities": _num(n / div[0]), "eager_time_us": _us(t / div[0]),
                "remaining_activities": _num(left[0] / div[i]), "remaining_time_us": _us(left[1] / div[i]),
                "fused_into": sorted({k for tok in _fused_names(b) for k in by_token.get(tok, [])})[:20] if b else [],
            })
        kernels = []
        eager_bases = {_base(o) for o in eager_ops["launch_op"].to_list()}
        for name, n, t, ops, cat in kern.sort(["time_ns", "name"], descending=[True, False]).iter_rows():
            toks = (ops or "").split(",")
            kernels.append({"kernel": name, "category": cat, "activities": _num(n / div[i]), "time_us": _us(t / div[i]),
                            "fused_ops": toks,
                            "replaces_eager_ops": sorted({e for e in eager_bases
                                                          if e and set(_fused_names(e)) & set(toks)})})
        b_ng, n_ng = (k.filter(pl.col("class") == "non-GEMM") for k in (bk, rk))
        b_share = b_ng["dur_ns"].sum() / base.gpu_time_ns if base.gpu_time_ns else 0.0
        n_share = n_ng["dur_ns"].sum() / r.gpu_time_ns if r.gpu_time_ns else 0.0
        out.append({
            "trace": r.trace, "trace_index": i,
            "activities": [_num(base.gpu_activities / div[0]), _num(r.gpu_activities / div[i])],
            "non_gemm_activities": [_num(b_ng.height / div[0]), _num(n_ng.height / div[i])],
            "non_gemm_time_us": [_us(number(b_ng["dur_ns"].sum()) / div[0]),
                                 _us(number(n_ng["dur_ns"].sum()) / div[i])],
            "non_gemm_share": [round(b_share, 6), round(n_share, 6)],
            "fused_kernels": kern.height,
            "summary": (f"with fusion, GPU activities went from {base.gpu_activities / div[0]:,.0f} to "
                        f"{r.gpu_activities / div[i]:,.0f} and non-GEMM time from "
                        f"{number(b_ng['dur_ns'].sum()) / div[0] / 1000:,.1f} us to "
                        f"{number(n_ng['dur_ns'].sum()) / div[i] / 1000:,.1f} us; "
                        f"non-GEMM is still {100 * n_share:.1f} % of GPU time (was {100 * b_share:.1f} %)"),
            "ops": ops_rows[:50],
            "kernels": kernels[:50],
        })
    return {"pairs": out} if out else None


def _quantization_view(reports: list[Report], div: list[float], long: pl.DataFrame,
                       classes: pl.DataFrame) -> dict[str, Any] | None:
    """GEMM time against quantize/dequantize time, BASE against each other trace (the long
    category table: times already divided per step when asked)."""
    def time_of(i: int, category: str) -> float:
        return float(long.filter((pl.col("trace_index") == i) & (pl.col("category") == category))["time_ns"].sum())

    base = reports[0]
    bq, bg = time_of(0, "qdq"), time_of(0, "gemm")
    out = []
    for i, r in enumerate(reports[1:], start=1):
        nq, ng = time_of(i, "qdq"), time_of(i, "gemm")
        total_b, total_n = base.gpu_time_ns / div[0], r.gpu_time_ns / div[i]
        if max(bq, nq) < 0.01 * max(total_b, total_n, 1):
            continue
        share = lambda idx: float(classes.filter((pl.col("trace_index") == idx)  # noqa: E731
                                                 & (pl.col("class") == "non-GEMM"))["share"].sum())
        gemm_delta, qdq_delta, net = ng - bg, nq - bq, total_n - total_b
        pct = lambda d, b: f"{100 * d / b:+.0f} %" if b else "n/a"  # noqa: E731
        sentence = (f"GEMM time {'fell' if gemm_delta < 0 else 'rose'} by {abs(gemm_delta) / 1000:,.1f} us "
                    f"({pct(gemm_delta, bg)}) while quantize/dequantize work "
                    f"{'added' if qdq_delta >= 0 else 'removed'} {abs(qdq_delta) / 1000:,.1f} us; net "
                    f"{net / 1000:+,.1f} us ({pct(net, total_b)} GPU time); non-GEMM share "
                    f"{100 * share(0):.1f} % -> {100 * share(i):.1f} %")
        out.append({"trace": r.trace, "trace_index": i, "gemm_time_us": [_us(bg), _us(ng)],
                    "qdq_time_us": [_us(bq), _us(nq)], "gemm_delta_us": _us(gemm_delta),
                    "qdq_delta_us": _us(qdq_delta), "net_delta_us": _us(net),
                    "non_gemm_share": [round(share(0), 6), round(share(i), 6)], "summary": sentence})
    return {"pairs": out} if out else None
