"""The per-shape op table (:class:`~nongemm_trace.models.shapes.ShapesReport`) in each format: the
terminal's table of the ``top`` shapes by GPU time, the JSON document, and the whole table as CSV.
Registered with :func:`.registry.renders`; each renderer imports what it draws with when it runs."""

from __future__ import annotations

from typing import Any

from .registry import TERMINAL, View, as_json, renders


def _f(x: Any) -> str:
    return "-" if x is None else f"{x:,.2f}"


@renders("shapes", TERMINAL)
def shapes_table(model: Any, view: View) -> Any:
    """The ``view.top`` shapes with the most GPU time, then the warnings."""
    def draw(console: Any) -> None:
        from rich.table import Table

        from .names import shorten
        from .palette import TITLE
        from .terminal import escape, si, warning_line

        console.print(f"[{TITLE}]{escape(model.trace)}[/{TITLE}]  device: {escape(model.device or 'unknown')}")
        t = Table(title=f"Top {view.top} op shapes by GPU time (of {model.shapes.height})", title_justify="left")
        # the category too: one op name runs under two (Llama's aten::mul: its RMSNorm and its rotary embedding)
        for c in ("op", "category", "input dims", "dtype", "calls", "GPU time (us)", "mean (us)", "FLOPs/call",
                  "TFLOP/s", "GB/s"):
            left = c in ("op", "category", "input dims", "dtype")
            t.add_column(c, justify="left" if left else "right", overflow="fold" if c == "input dims" else "ellipsis")
        for r in model.shapes.head(view.top).iter_rows(named=True):
            t.add_row(escape(shorten(r["op"])), escape(r["category"] or "-"), escape(shorten(r["input_dims"], 60)),
                      escape(shorten(r["input_type"], 40)), f"{r['calls']:,}", f"{r['time_ns'] / 1000:,.1f}",
                      f"{r['mean_ns'] / 1000:,.2f}", si(r["flops_per_call"]), _f(r["achieved_tflops"]),
                      _f(r["achieved_gbps"]))
        console.print(t)
        for w in model.warnings:
            console.print(warning_line(w.code, w.message, w.count), highlight=False)
    return draw


renders("shapes", "json")(as_json)


@renders("shapes", "csv")
def shapes_csv(model: Any, view: View) -> str:
    """The whole table, names kept whole and made safe for a spreadsheet (:mod:`.escape`)."""
    from .escape import csv_frame
    return str(csv_frame(model.shapes).write_csv())
