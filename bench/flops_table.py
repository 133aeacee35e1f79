#!/usr/bin/env python3
"""Markdown table of FLOP share vs GPU-time share (GEMM / non-GEMM) for traces.

    python3 bench/flops_table.py ../shared/traces/h200/*.json.gz
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nongemm_trace.analyses.flops import flops_analysis


def main(paths: list[str]) -> int:
    print("| trace | GEMM FLOPs | GEMM FLOP share | GEMM time share | non-GEMM FLOP share | non-GEMM time share "
          "| best FLOPs→time model (held-out MAPE) |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for p in paths:
        rep = flops_analysis(p)
        cl = {r["class"]: r for r in rep.classes.iter_rows(named=True)}
        g, n = cl.get("GEMM", {}), cl.get("non-GEMM", {})
        models = rep.fits.get("models") or {}
        best = min(models.items(), key=lambda kv: kv[1]["mape"]) if models else None
        fit = f"{best[0]} ({100 * best[1]['mape']:.1f} %, {rep.fits['distinct_shapes']} shapes)" if best else "-"
        print(f"| {Path(p).name.replace('.json.gz', '')} | {g.get('flops', 0) / 1e9:,.1f} G "
              f"| {100 * g.get('flop_share', 0):.2f} % | {100 * g.get('time_share', 0):.1f} % "
              f"| {100 * n.get('flop_share', 0):.2f} % | {100 * n.get('time_share', 0):.1f} % | {fit} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
