"""``explain``: which rule gave an op or kernel its category, in which taxonomy, at which level.

Answers from the same functions the classifier uses (``rules``), plus what the
trace's calls of that name actually got at each level, so a surprising category
can be traced back to the rule (or the call-level qdq dataflow) that produced it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from .analysis import Analysis
from .vocabulary import LEVELS
from .classify.rules import is_composite, is_wrapper, kernel_category, op_category
from .classify.taxonomy import Taxonomy
from .errors import TraceError


def explain(source: str | Path | Analysis, name: str, taxonomy: str | Path | Taxonomy | None = None) -> dict[str, Any]:
    """Explain how ``name`` (an op or a kernel name; exact, else the unique names containing it) is classified
    in ``source`` (a path or an :class:`Analysis`)."""
    analysis = Analysis.of(source, taxonomy=taxonomy, keep_python=True)
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
    return out


def _matches(col: pl.Series, name: str) -> list[str]:
    uniq = col.unique()
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


RULE_TEXT = {
    "launch_op": "the launching op's category",
    "enclosing_op": "the category of the specific op around its generic launching op",
    "op_pattern": "a written-out operation its launching op is part of (e.g. RMSNorm as pow/mean/rsqrt/mul)",
    "qdq_dataflow": "a quantize/dequantize dataflow its launching op is part of",
    "top_op": "the top-level op's category",
    "module": "the enclosing nn.Module's category",
    "kernel_name": "the kernel-name rules",
    "activity_kind": "its kind (memcpy/memset)",
    "none": "no rule (unclassified)",
}


def render_text(d: dict[str, Any]) -> str:
    lines = [f"{d['trace']} — taxonomy {d['taxonomy']} v{d['taxonomy_version']} — query {d['query']!r}"]
    for o in d["ops"]:
        nr = o["name_rule"]
        lines.append(f"\nop {o['op']}  ({o['calls']} calls; trace category {', '.join(o['trace_category'])})")
        lines.append(f"  name rule: {nr['category'] or 'none'} ({nr['class'] or '-'}) — {nr['why']}")
        if o["wrapper"]:
            lines.append("  a wrapper, not an operator: its activities are classified below it")
        if o["composite"]:
            lines.append("  composite: at the top level its activities keep their launch-level category")
        if o["qdq_calls"]:
            lines.append(f"  {o['qdq_calls']} of its calls sit in a quantize/dequantize dataflow: qdq, whatever the name says")
        _levels(lines, o["levels"])
    for k in d["kernels"]:
        kr = k["kernel_rule"]
        lines.append(f"\nkernel {k['kernel']}")
        lines.append(f"  kernel rule: {kr['category'] or 'none'} ({kr['class'] or '-'})"
                     f"{' [authoritative]' if kr['authoritative'] else ''} — {kr['why']}")
        _levels(lines, k["levels"])
    if d["more_ops"] or d["more_kernels"]:
        lines.append(f"\n(+{d['more_ops']} more ops, +{d['more_kernels']} more kernels match; give an exact name)")
    return "\n".join(lines) + "\n"


def _levels(lines: list[str], levels: dict[str, list[dict[str, Any]]]) -> None:
    for lvl, rows in levels.items():
        if not rows:
            continue
        lines.append(f"  at level {lvl}:")
        for r in rows[:8]:
            lines.append(f"    {r['category']:<13} {r['activities']:>6} activities {r['gpu_time_us']:>12,.1f} us  "
                         f"by {RULE_TEXT.get(r['decided_by'], r['decided_by'])} "
                         f"({'op ' + r['op'] if r['op'] is not None else 'no launching op'}, link {r['link']})")
