"""A serving run's phases in the terminal: per phase its iterations, step time, batch and tokens,
the GEMM / non-GEMM shares of its GPU time and its largest non-GEMM categories."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from . import escape


def _us(ns: int) -> str:
    return f"{ns / 1000:,.1f}"


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "-"


def render_phases(rows: list[dict[str, Any]], engine: str | None, console: Console) -> None:
    """One row per phase (nothing when the trace has none)."""
    if not rows:
        return
    t = Table(title=f"Phases — iterations told by {engine}'s marks (time: host span to GPU end)",
              title_justify="left")
    for c in ("phase", "iterations", "time (us)", "iteration (us)", "batch", "tokens", "GPU time (us)", "GEMM",
              "non-GEMM", "top non-GEMM categories"):
        t.add_column(c, justify="left" if c in ("phase", "top non-GEMM categories") else "right")
    for r in rows:
        by_class = {c["class"]: c["time_ns"] for c in r["classes"]}
        gpu = r["gpu_time_ns"]
        cats = ", ".join(f"{c['category']} {_share(c['time_ns'], gpu)}" for c in r["categories"])
        t.add_row(r["phase"], f"{r['iterations']:,}", _us(r["time_ns"]), _us(r["iteration_ns"]),
                  "-" if r["batch"] is None else f"{r['batch']:g}",
                  "-" if r["tokens"] is None else f"{r['tokens']:,}", _us(gpu),
                  _share(by_class.get("GEMM", 0), gpu), _share(by_class.get("non-GEMM", 0), gpu), escape(cats))
    console.print(t)
