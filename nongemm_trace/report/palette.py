"""The colours of every renderer: categories in figures, idle gaps, and the terminal's styles."""

from __future__ import annotations

#: one colour per category, the same in every figure. Every pair of these (and the idle greys) is
#: at least 25 CIELAB units apart (tests/test_figures.py): gemm and attention are blue and navy, and
#: communication is gold, never a grey that reads as idle time
CATEGORY_COLORS = {
    "gemm": "#1f77b4", "attention": "#000080", "normalization": "#2ca02c", "activation": "#98df8a",
    "arithmetic": "#ff7f0e", "memory": "#d62728", "logit": "#9467bd", "pooling": "#8c564b",
    "interpolation": "#ff9896", "embedding": "#e377c2", "roi": "#ffbb78", "qdq": "#637939", "other": "#17becf",
    "communication": "#ffd92f", "transfer": "#1b9e77", "unclassified": "#ff00ff",
}
#: one colour per class (the HTML report's class bars)
CLASS_COLORS = {"GEMM": "#1f77b4", "non-GEMM": "#ff7f0e", "communication": "#ffd92f", "transfer": "#1b9e77",
                "unclassified": "#ff00ff"}
#: a category the palette does not name (one a taxonomy file declares)
OTHER_CATEGORY = "#999999"
#: idle gaps in the timeline: waiting for a launch (host-bound), and the rest
IDLE_HOST_BOUND = "#444444"
IDLE_OTHER = "#bbbbbb"
#: the roofline's roofs and step boundaries: greys, so no roof reads as a category's points
ROOF = "#444444"
STEP_BOUNDARY = "#777777"
#: the FLOPs report's share bars: FLOPs and GPU time
SHARE_FLOPS = "#6baed6"
SHARE_TIME = "#08519c"

#: terminal styles (rich markup)
TITLE = "bold"
WARNING = "yellow"
WARNINGS_HEADING = "bold yellow"
FAILED = "red"


def category_color(category: str) -> str:
    return CATEGORY_COLORS.get(category, OTHER_CATEGORY)
