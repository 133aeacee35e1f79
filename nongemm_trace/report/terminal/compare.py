"""A comparison in the terminal: the traces, classes and categories against BASE, the fusion view."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from ...models.comparison import Comparison
from ..names import shorten, shorten_list
from ..palette import TITLE
from ..sentences import base_sentence, pair_sentence
from . import escape, warning_line


def render_compare(cmp: Comparison, console: Console) -> None:
    d = cmp.to_dict()
    names = [Path(t["trace"]).name.replace(".json.gz", "") for t in d["traces"]]
    unit = "us per step" if d["per_step"] else "us"
    basis, things = cmp.time_basis
    lead, rest = base_sentence(names[0], basis, unit, d["level"], d["taxonomy"])  # the page's words too
    console.print(f"[{TITLE}]{escape(lead)}[/{TITLE}]{escape(rest)}")
    t = Table(title="Traces", title_justify="left")
    t.add_column("trace")
    for c in (basis, things, "steps", "non-GEMM share"):
        t.add_column(c, justify="right")
    for n, tr in zip(names, d["traces"]):
        t.add_row(escape(n), f"{tr['gpu_time_us']:,.1f}", f"{tr['activities']:,}", str(tr["steps"]),
                  f"{100 * tr['non_gemm_share']:.1f} %")
    console.print(t)
    for title, rows, key in (("Classes", d["classes"], "class"), ("Categories", d["categories"], "category")):
        t = Table(title=title, title_justify="left")
        t.add_column(key)
        for i in range(len(names)):
            t.add_column(("BASE" if i == 0 else f"#{i}") + " time", justify="right")
            if i:
                t.add_column(f"#{i} ratio", justify="right")
        for r in rows:
            if not any(r["gpu_time_us"]):
                continue
            cells = [f"{r['gpu_time_us'][0]:,.1f}"]
            for tm, ra in zip(r["gpu_time_us"][1:], r["ratio"][1:]):
                cells += [f"{tm:,.1f}", "new" if ra is None else f"{ra:.2f}x"]
            t.add_row(escape(r[key]), *cells)
        console.print(t)
    for section in ("quantization", "fusion"):
        for p in (d.get(section) or {}).get("pairs", []):
            lead, rest = pair_sentence(section, Path(p["trace"]).name, p["summary"])
            console.print(f"[{TITLE}]{escape(lead)}[/{TITLE}]{escape(rest)}")
    fus = (d.get("fusion") or {}).get("pairs", [])
    if fus:
        t = Table(title="Eager non-GEMM ops and the fused kernels that replaced them", title_justify="left")
        for c in ("eager op", "category", "eager us", "remaining us", "fused into"):
            t.add_column(c, justify="right" if c.endswith(" us") else "left", overflow="ellipsis",
                         no_wrap=c == "fused into",
                         max_width=max(20, console.width - 70) if c == "fused into" else None)
        for o in fus[0]["ops"][:15]:
            k = o["fused_into"]
            t.add_row(escape(shorten(o["op"])), o["category"], f"{o['eager_time_us']:,.1f}",
                      f"{o['remaining_time_us']:,.1f}",
                      escape(f"{len(k)}: " + shorten_list(", ".join(k), 100)) if k else "-")
        console.print(t)
    for view in d.get("engine_fusion") or []:
        _engine_fusion(view, f"#{d['traces'].index(next(t for t in d['traces'] if t['trace'] == view['trace']))}",
                       console)
    for w in d["warnings"]:
        console.print(warning_line(w["code"], w["message"]), highlight=False)


def _engine_fusion(view: dict, label: str, console: Console) -> None:
    """A deployment stack's fusion against BASE: time and count per fused ONNX op type."""
    t = Table(title=f"Fused ONNX op types, {label} against BASE", title_justify="left")
    for c in ("ONNX op types", "category", "BASE count", "BASE us", f"{label} count", f"{label} us"):
        t.add_column(c, justify="left" if c in ("ONNX op types", "category") else "right")
    for r in view["op_types"]:
        t.add_row(escape(shorten(r["op"])), r["category"] or "-", f"{r['base_nodes']:,}", f"{r['base_time_us']:,.1f}",
                  f"{r['nodes']:,}", f"{r['time_us']:,.1f}")
    console.print(t)
