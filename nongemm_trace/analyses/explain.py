"""``explain``: which rule gave an op or kernel its category, in which taxonomy, at which level.

Answers from the same functions the classifier uses (``rules``), plus what the
trace's calls of that name actually got at each level, so a surprising category
can be traced back to the rule (or the call-level qdq dataflow) that produced it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from ..classify.ladder import RULE_TEXT
from ..classify.rules import is_composite, is_wrapper, kernel_category, op_category
from ..classify.taxonomy import Taxonomy
from ..errors import TraceError
from ..models.verdicts import Explanation
from ..pipeline.analysis import Analysis
from ..pipeline.options import AnalysisOptions
from ..vocabulary import LEVELS


def explain(source: str | Path | Analysis, name: str, taxonomy: str | Path | Taxonomy | None = None) -> Explanation:
    """Explain how ``name`` (an op or a kernel name; exact, else the unique names containing it) is classified
    in ``source`` (a path or an :class:`Analysis`): an :class:`~nongemm_trace.models.verdicts.Explanation`,
    whose document ``explain --format json`` writes (indexing the model reads it)."""
    analysis = Analysis.of(source, AnalysisOptions(taxonomy=taxonomy, keep_python=True))
    tax, path = analysis.taxonomy, analysis.path
    linked = analysis.linked()
    per_level = {lvl: analysis.activities(lvl) for lvl in LEVELS}
    ops = linked.ops
    acts = per_level["launch"]

    op_names = _matches(ops["name"], name)
    kernel_names = _matches(acts["name"], name)
    if not op_names and not kernel_names:
        raise TraceError(path, f"no op or kernel named (or containing) {name!r}")
    out: dict[str, Any] = {"trace": str(path), "taxonomy": tax.name, "taxonomy_version": tax.version,
                           "query": name, "ops": [], "kernels": []}
    for op in op_names[:20]:
        calls = ops.filter(pl.col("name") == op)
        cat, why = op_category(tax, op)
        cats = sorted(set(calls["cat"].to_list()))
        entry: dict[str, Any] = {
            "op": op, "calls": calls.height, "trace_category": cats,
            "name_rule": {"category": cat, "class": tax.class_of(cat) if cat else None, "why": why},
            "wrapper": any(is_wrapper(tax, op, c, cat) for c in cats),
            "composite": is_composite(tax, op),
            "qdq_calls": int(calls["qdq_call"].sum()),
            "levels": {},
        }
        for lvl, a in per_level.items():
            key = {"launch": "launch_op", "top": "top_op", "module": "launch_op"}[lvl]
            mine = a.filter(pl.col(key) == op)
            entry["levels"][lvl] = _by_rule(mine)
        out["ops"].append(entry)
    for k in kernel_names[:20]:
        cat, auth, why = kernel_category(tax, k)
        entry = {"kernel": k, "kernel_rule": {"category": cat, "class": tax.class_of(cat) if cat else None,
                                              "authoritative": auth, "why": why}, "levels": {}}
        for lvl, a in per_level.items():
            entry["levels"][lvl] = _by_rule(a.filter(pl.col("name") == k))
        out["kernels"].append(entry)
    out["more_ops"] = max(0, len(op_names) - 20)
    out["more_kernels"] = max(0, len(kernel_names) - 20)
    return Explanation(out, RULE_TEXT)


def _matches(col: pl.Series, name: str) -> list[str]:
    uniq = col.unique().cast(pl.String)  # op names are categorical (schema.py)
    if (uniq == name).any():
        return [name]
    return sorted(uniq.filter(uniq.str.contains(name, literal=True)).to_list())


def _by_rule(a: pl.DataFrame) -> list[dict[str, Any]]:
    """How the activities got their category: grouped by category, deciding rule, link and op."""
    if a.height == 0:
        return []
    g = a.group_by(["category", "class", "rule", "attribution", "op"]).agg(
        pl.len().alias("activities"), pl.col("dur_ns").sum().alias("gpu_time_ns"))
    g = g.sort(["gpu_time_ns", "category"], descending=[True, False])
    return [{"category": r["category"], "class": r["class"], "decided_by": r["rule"], "link": r["attribution"],
             "op": r["op"], "activities": int(r["activities"]), "gpu_time_us": round(r["gpu_time_ns"] / 1000, 3)}
            for r in g.iter_rows(named=True)]
