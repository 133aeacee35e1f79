"""Plain-text renderings of ``explain`` (which rule classified a name) and ``explain --weak``
(the kernels on weak evidence, with the rules that would classify them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..escape import printable_lines
from ..names import shorten

#: a name alone on its line: shortened to this (a log line stays under ~200 columns; JSON has it whole)
_LINE_NAME = 180

def render_explain(d: dict[str, Any], rule_text: Mapping[str, str]) -> str:
    """``rule_text``: what each rule means for a reader (the ladder's table; a renderer reads no
    classifier code, so the caller hands it over)."""
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
            lines.append(f"  {o['qdq_calls']} of its calls sit in a quantize/dequantize dataflow: qdq, "
                         "whatever the name says")
        _levels(lines, o["levels"], rule_text)
    for k in d["kernels"]:
        kr = k["kernel_rule"]
        lines.append(f"\nkernel {shorten(k['kernel'], _LINE_NAME)}")
        lines.append(f"  kernel rule: {kr['category'] or 'none'} ({kr['class'] or '-'})"
                     f"{' [authoritative]' if kr['authoritative'] else ''} — {kr['why']}")
        _levels(lines, k["levels"], rule_text)
    if d["more_ops"] or d["more_kernels"]:
        lines.append(f"\n(+{d['more_ops']} more ops, +{d['more_kernels']} more kernels match; give an exact name)")
    return printable_lines("\n".join(lines)) + "\n"


def _levels(lines: list[str], levels: dict[str, list[dict[str, Any]]], rule_text: Mapping[str, str]) -> None:
    for lvl, rows in levels.items():
        if not rows:
            continue
        lines.append(f"  at level {lvl}:")
        for r in rows[:8]:
            lines.append(f"    {r['category']:<13} {r['activities']:>6} activities {r['gpu_time_us']:>12,.1f} us  "
                         f"by {rule_text.get(r['decided_by'], r['decided_by'])} "
                         f"({'op ' + r['op'] if r['op'] is not None else 'no launching op'}, link {r['link']})")


def render_weak(d: dict[str, Any]) -> str:
    lines = [f"{d['trace']} — taxonomy {d['taxonomy']} v{d['taxonomy_version']}",
             f"{d['weak_share']:.1%} of {d['gpu_time_us']:,.1f} us of GPU time rests on generic words or no rule"]
    if not d["kernels"]:
        lines.append("no kernel is classified on weak evidence")
    for k in d["kernels"]:
        ops = ", ".join(shorten(o, 40) for o in k["launch_ops"][:4]) or "no launching op"
        if len(k["launch_ops"]) > 4:
            ops += f", +{len(k['launch_ops']) - 4} more"
        lines.append(f"\n{shorten(k['kernel'], _LINE_NAME)}")
        lines.append(f"  {k['gpu_time_us']:,.1f} us ({k['share']:.1%}), {k['activities']} activities, "
                     f"now {k['category']} [{k['evidence']}] by {k['rule']}; launched by {ops}")
        lines += ["  " + ln for ln in k["snippet"].rstrip().splitlines()]
    if d["more_kernels"]:
        lines.append(f"\n(+{d['more_kernels']} more kernels on weak evidence; --top N shows more)")
    lines.append("\nPut the snippets in a file that starts with: extends = \"default\" and pass it with "
                 "--taxonomy FILE.")
    return printable_lines("\n".join(lines)) + "\n"
