"""Stacked bars per category, one bar per trace (the NonGEMM paper's figure style)."""

from __future__ import annotations

from pathlib import Path

from ..errors import TraceError
from .timeline import COLORS


def plot_bars(cmp, output: str | Path, absolute: bool = False, title: str | None = None) -> None:
    """``cmp`` is a :class:`~nongemm_trace.compare.Comparison` (one trace is fine)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = cmp.to_dict()
    labels = [Path(t["trace"]).name.replace(".json.gz", "").replace(".json", "") for t in d["traces"]]
    totals = [t["gpu_time_us"] for t in d["traces"]]
    cats = [c for c in d["categories"] if any(c["gpu_time_us"])]
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(labels) + 3), 5.5))
    bottoms = [0.0] * len(labels)
    for c in cats:
        vals = [v if absolute else (100 * v / tot if tot else 0.0) for v, tot in zip(c["gpu_time_us"], totals)]
        ax.bar(range(len(labels)), vals, bottom=bottoms, color=COLORS.get(c["category"], "#999999"),
               label=f"{c['category']} ({c['class']})", edgecolor="white", linewidth=0.5)
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    for i, t in enumerate(d["traces"]):
        ax.text(i, bottoms[i], f"non-GEMM {100 * t['non_gemm_share']:.0f} %", ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, max(bottoms + [1.0]) * 1.12)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
    unit = "per step" if d["per_step"] else "total"
    ax.set_ylabel(f"GPU time ({unit}, us)" if absolute else "share of GPU time (%)")
    ax.set_title(title or f"GPU time by category ({d['level']} level, taxonomy {d['taxonomy']})", fontsize=10, pad=10)
    if cats:
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    fig.tight_layout()
    try:
        fig.savefig(output, dpi=120, bbox_inches="tight")
    except OSError as exc:
        raise TraceError(output, f"cannot write: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
