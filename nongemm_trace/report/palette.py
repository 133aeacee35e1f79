"""The colours of every renderer: categories in figures, idle gaps, and the terminal's styles."""

from __future__ import annotations

#: one colour per category, the same in every figure
CATEGORY_COLORS = {
    "gemm": "#1f77b4", "attention": "#6baed6", "normalization": "#2ca02c", "activation": "#98df8a",
    "arithmetic": "#ff7f0e", "memory": "#d62728", "logit": "#9467bd", "pooling": "#8c564b",
    "interpolation": "#c49c94", "embedding": "#e377c2", "roi": "#7f7f7f", "qdq": "#bcbd22", "other": "#17becf",
    "communication": "#000000", "unclassified": "#ff00ff",
}
#: one colour per class (the HTML report's class bars)
CLASS_COLORS = {"GEMM": "#1f77b4", "non-GEMM": "#ff7f0e", "communication": "#333333", "unclassified": "#ff00ff"}
#: a category the palette does not name (one a taxonomy file declares)
OTHER_CATEGORY = "#999999"
#: idle gaps in the timeline: waiting for a launch (host-bound), and the rest
IDLE_HOST_BOUND = "#444444"
IDLE_OTHER = "#bbbbbb"

#: terminal styles (rich markup)
TITLE = "bold"
WARNING = "yellow"
WARNINGS_HEADING = "bold yellow"
FAILED = "red"


def category_color(category: str) -> str:
    return CATEGORY_COLORS.get(category, OTHER_CATEGORY)
