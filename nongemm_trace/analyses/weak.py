"""``explain --weak``: the kernels whose category rests on weak evidence, with the rule to add.

The evidence ladder (docs/taxonomy.md) ranks what an activity's category rests on; the two
lowest rungs are ``generic`` (a generic word such as ``copy`` or ``elementwise`` in the kernel
name) and ``none`` (unclassified). For the kernels with the most GPU time on those rungs this
lists the rule that fired and a TOML snippet — a kernel rule on the tokens of the kernel's own
name — that a user puts in a taxonomy file (``extends = "default"``) to classify their stack.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from ..classify.rules import kernel_verdict
from ..classify.taxonomy import Taxonomy
from ..classify.tokens import tokens
from ..models.verdicts import WeakKernels
from ..pipeline.analysis import Analysis
from ..pipeline.options import AnalysisOptions

WEAK_RUNGS = ("generic", "none")
#: the priority suggested rules get: above every generic rule, below the communication rule
SNIPPET_PRIORITY = 88

_HEAD = re.compile(r"^(?:void\s+)?([^<(]*)")
_ANON = re.compile(r"\((?:anonymous|unnamed) namespace\)::")


def weak_kernels(source: str | Path | Analysis, taxonomy: str | Path | Taxonomy | None = None,
                 top: int = 20) -> WeakKernels:
    """The ``top`` kernel names with the most GPU time on weak evidence, each with its rule, its
    launching ops and a snippet that would classify it."""
    analysis = Analysis.of(source, AnalysisOptions(taxonomy=taxonomy))
    tax = analysis.taxonomy
    sel = analysis.selection(AnalysisOptions(level="launch"))
    path = sel.trace
    acts = sel.activities
    total = int(acts["dur_ns"].sum() or 0)
    weak = acts.filter(pl.col("evidence").is_in(list(WEAK_RUNGS)))
    g = (weak.group_by("name").agg(pl.col("dur_ns").sum().alias("gpu_time_ns"), pl.len().alias("activities"),
                                   pl.col("category").first(), pl.col("evidence").first(),
                                   pl.col("launch_op").drop_nulls().unique().sort().head(3).alias("launch_ops"))
         .sort(["gpu_time_ns", "name"], descending=[True, False]))
    rows = []
    for r in g.head(max(top, 0)).iter_rows(named=True):
        _, _, _, why = kernel_verdict(tax, r["name"])
        rows.append({"kernel": r["name"], "category": r["category"], "evidence": r["evidence"], "rule": why,
                     "activities": int(r["activities"]), "gpu_time_us": round(r["gpu_time_ns"] / 1000, 3),
                     "share": round(r["gpu_time_ns"] / total, 6) if total else 0.0,
                     "launch_ops": r["launch_ops"], "snippet": snippet(r["name"], r["category"])})
    weak_ns = int(weak["dur_ns"].sum() or 0)
    return WeakKernels({"trace": str(path), "taxonomy": tax.name, "taxonomy_version": tax.version,
                        "gpu_time_us": round(total / 1000, 3), "weak_gpu_time_us": round(weak_ns / 1000, 3),
                        "weak_share": round(weak_ns / total, 6) if total else 0.0, "kernels": rows,
                        "more_kernels": max(0, g.height - len(rows))})


def name_run(kernel: str) -> str:
    """The token run of a kernel's own function name: its last ``::`` part before template
    arguments and parameters (``void ns::foo_bar_kernel<…>(…)`` -> ``foo bar kernel``)."""
    head = _HEAD.match(_ANON.sub("", kernel.strip()))
    text = head.group(1) if head and head.group(1).strip() else kernel
    last = text.strip().split("::")[-1] or text
    run = tokens(last) or tokens(kernel)
    return " ".join(run[:8])


def snippet(kernel: str, category: str) -> str:
    """A kernel rule (TOML) that classifies ``kernel``: its current category when one is known (to
    confirm or change), else a placeholder the user must replace (the file will not load until then)."""
    cat = category if category and category != "unclassified" else "CHOOSE"
    return ("[[kernels]]\n"
            f"tokens = [{_toml_str(name_run(kernel))}]\n"
            f"category = {_toml_str(cat)}  # gemm, attention, normalization, activation, arithmetic, memory, logit, "
            "pooling, interpolation, embedding, roi, qdq, other, communication\n"
            f"priority = {SNIPPET_PRIORITY}\n")


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
