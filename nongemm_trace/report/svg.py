"""Inline SVG figures for the HTML report: stacked share bars and the GPU timeline.

No network and no plotting library: each figure is an ``<svg>`` element written as text,
so the HTML page stays one self-contained file. Every name that reaches the markup is
escaped. The timeline draws what the launch model holds; activities (and idle gaps)
narrower than a pixel are drawn per pixel column, in the colour of the category with most
time there and shaded by the share of the column they fill, so a trace of any size gives a
figure of bounded size that does not overstate busy or idle time.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

import polars as pl

from ..core.frames import int_scalar
from .palette import CLASS_COLORS, IDLE_HOST_BOUND, IDLE_OTHER, category_color


def color(name: str) -> str:
    """A class's or category's colour (:mod:`.palette`)."""
    return CLASS_COLORS.get(name) or category_color(name)


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _segments(parts: Iterable[tuple[str, float]], x: float, y: int, width: int, height: int, prefix: str) -> list[str]:
    """The rectangles of one stacked bar from ``x``: one per (name, share) with a share above zero."""
    out = []
    for name, share in parts:
        if share <= 0:
            continue
        w = share * width
        out.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{height}" fill="{color(name)}">'
                   f'<title>{escape(prefix)}{escape(name)}: {_pct(share)}</title></rect>')
        x += w
    return out


def stacked_bar(parts: Iterable[tuple[str, float]], width: int = 640, height: int = 22, label: str = "") -> str:
    """One horizontal bar split by share: ``parts`` are (name, share 0..1)."""
    rects = _segments(parts, 0.0, 0, width, height, "")
    return (f'<svg class="bar" role="img" aria-label="{escape(label)}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">'
            f'<rect width="{width}" height="{height}" fill="#eee"/>{"".join(rects)}</svg>')


def share_cell(name: str, share: float, width: int = 160, height: int = 12) -> str:
    """A small bar for a table row: the share of one class or category."""
    w = max(0.0, min(1.0, share)) * width
    return (f'<svg class="cell" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'xmlns="http://www.w3.org/2000/svg"><rect width="{width}" height="{height}" fill="#eee"/>'
            f'<rect width="{w:.2f}" height="{height}" fill="{color(name)}"/></svg>')


def legend(names: Iterable[str]) -> str:
    return '<p class="legend">' + " ".join(
        f'<span><i style="background:{color(n)}"></i>{escape(n)}</span>' for n in names) + "</p>"


def bars_by_trace(rows: list[tuple[str, list[tuple[str, float]]]], width: int = 640) -> str:
    """One stacked share bar per trace (the comparison): ``rows`` are (trace label, [(name, share)])."""
    bar_h, gap, label_w = 20, 8, 260
    h = len(rows) * (bar_h + gap)
    out = [f'<svg class="traces" role="img" aria-label="share by trace" width="{label_w + width}" height="{h}" '
           f'viewBox="0 0 {label_w + width} {h}" xmlns="http://www.w3.org/2000/svg">']
    for i, (label, parts) in enumerate(rows):
        y = i * (bar_h + gap)
        short = label if len(label) <= 40 else "…" + label[-39:]
        out.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end" font-size="11">{escape(short)}'
                   f'<title>{escape(label)}</title></text>')
        out.append(f'<rect x="{label_w}" y="{y}" width="{width}" height="{bar_h}" fill="#eee"/>')
        out += _segments(parts, float(label_w), y, width, bar_h, f"{label} · ")
    out.append("</svg>")
    return "".join(out)


def _fmt_time(ns: float) -> str:
    return f"{ns / 1e6:,.2f} ms" if ns >= 1e6 else f"{ns / 1e3:,.1f} us"


def timeline(acts: pl.DataFrame, width: int = 1000, lane_h: int = 16) -> str:
    """The GPU timeline of a launch model's ``activities``: one lane per (device, stream), coloured
    by category, and per device an idle lane (gaps between activities; dark where the GPU waited
    for a launch from the CPU). Step starts are marked."""
    if acts.height == 0:
        return '<p class="empty">no GPU activities: nothing ran on the device</p>'
    t0 = int_scalar(acts["ts_ns"].min())
    span = max(int((acts["ts_ns"] + acts["dur_ns"]).max()) - t0, 1)
    scale = width / span
    label_w, axis_h = 110, 22
    acts = acts.with_columns(pl.col("device").fill_null(-1), pl.col("stream").fill_null(-1),
                             ((pl.col("ts_ns") - t0) * scale).alias("_x"), (pl.col("dur_ns") * scale).alias("_w"))
    lanes = acts.select("device", "stream").unique().sort(["device", "stream"]).rows()
    devices = sorted({d for d, _ in lanes})
    rows: list[tuple[str, str, int, int | None]] = []  # (label, kind, device, stream)
    for dev in devices:
        rows += [(f"dev {dev} stream {s}", "stream", dev, s) for d, s in lanes if d == dev]
        rows.append((f"dev {dev} idle", "idle", dev, None))
    height = len(rows) * (lane_h + 4) + axis_h
    out = [f'<svg class="timeline" role="img" aria-label="GPU timeline" width="{label_w + width}" height="{height}" '
           f'viewBox="0 0 {label_w + width} {height}" xmlns="http://www.w3.org/2000/svg">']
    for i, (label, kind, dev, stream) in enumerate(rows):
        y = i * (lane_h + 4)
        out.append(f'<text x="{label_w - 6}" y="{y + lane_h - 4}" text-anchor="end" font-size="11">'
                   f'{escape(label)}</text>')
        out.append(f'<rect x="{label_w}" y="{y}" width="{width}" height="{lane_h}" fill="#f6f6f6"/>')
        if kind == "stream":
            lane = acts.filter((pl.col("device") == dev) & (pl.col("stream") == stream))
            out += _lane_rects(lane, label_w, y, lane_h, scale)
        else:
            out += _idle_rects(acts.filter(pl.col("device") == dev), label_w, y, lane_h, scale)
    if "step" in acts.columns:
        starts = acts.filter(pl.col("step").is_not_null()).group_by("step").agg(pl.col("_x").min()).sort("step")
        for step, x in starts.iter_rows():
            out.append(f'<line x1="{label_w + x:.2f}" x2="{label_w + x:.2f}" y1="0" y2="{height - axis_h}" '
                       f'stroke="#555" stroke-dasharray="3,3"><title>step {step}</title></line>')
    y_axis = height - axis_h + 14
    for k in range(6):
        x = label_w + k * width / 5
        anchor = "start" if k == 0 else "end" if k == 5 else "middle"
        out.append(f'<text x="{x:.1f}" y="{y_axis}" font-size="11" text-anchor="{anchor}">'
                   f'{_fmt_time(k * span / 5)}</text>')
    out.append("</svg>")
    return "".join(out)


def _clip(name: str, n: int = 90) -> str:
    """A kernel name short enough for a tooltip (templated C++ names run to thousands of characters)."""
    return name if len(name) <= n else name[: n - 1] + "…"


def _column(x: float, col: int, y: int, h: int, fill: str, filled_ns: float, scale: float, title: str) -> str:
    """One pixel column standing for what was too short to draw: its opacity is the share of the
    column's time that it fills (a column 5 % busy is drawn faint, not solid)."""
    return (f'<rect x="{x + col}" y="{y}" width="1" height="{h}" fill="{fill}" '
            f'fill-opacity="{min(1.0, max(0.15, filled_ns * scale)):.2f}"><title>{title}</title></rect>')


def _lane_rects(lane: pl.DataFrame, x0: int, y: int, h: int, scale: float) -> list[str]:
    """Activities of at least a pixel drawn one by one; narrower ones per pixel column, in the colour
    of the category with most time in that column."""
    wide = lane.filter(pl.col("_w") >= 1.0)
    out = [f'<rect x="{x0 + x:.1f}" y="{y}" width="{w:.1f}" height="{h}" fill="{color(c)}">'
           f'<title>{escape(_clip(n))} ({escape(c)}): {d / 1000:,.1f} us</title></rect>'
           for x, w, c, n, d in wide.select("_x", "_w", "category", "name", "dur_ns").iter_rows()]
    narrow = lane.filter(pl.col("_w") < 1.0)
    if narrow.height:
        cols = (narrow.with_columns(pl.col("_x").floor().cast(pl.Int64).alias("_col"))
                .group_by(["_col", "category"]).agg(pl.col("dur_ns").sum(), pl.len().alias("n"))
                .sort(["_col", "dur_ns", "category"], descending=[False, True, False])
                .group_by("_col", maintain_order=True).agg(pl.col("category").first(), pl.col("n").sum(),
                                                           pl.col("dur_ns").sum()))
        out += [_column(x0, col, y, h, color(c), d, scale, (f"{n} short activities, mostly {escape(c)}" if n != 1
                                                             else f"1 short activity ({escape(c)})")
                        + f": {d / 1000:,.1f} us") for col, c, n, d in cols.iter_rows()]
    return out


def _idle_rects(dev_acts: pl.DataFrame, x0: int, y: int, h: int, scale: float) -> list[str]:
    """The gap before each activity on its device (a pixel or wider: drawn; narrower: summed per
    pixel column); dark where most of it was the GPU waiting for a launch (host-bound)."""
    if "gap_device_ns" not in dev_acts.columns:
        return []
    gaps = dev_acts.select("_x", pl.col("gap_device_ns").fill_null(0).alias("gap"),
                           pl.col("host_bound_gap_ns").fill_null(0).alias("host")).filter(pl.col("gap") > 0)
    out = []
    for x, gap, host in gaps.filter(pl.col("gap") * scale >= 1.0).iter_rows():
        w = gap * scale
        out.append(f'<rect x="{x0 + x - w:.2f}" y="{y}" width="{w:.2f}" height="{h}" '
                   f'fill="{IDLE_HOST_BOUND if host * 2 >= gap else IDLE_OTHER}"><title>idle {gap / 1000:,.1f} us'
                   f'{", host-bound " + f"{host / 1000:,.1f} us" if host else ""}</title></rect>')
    narrow = (gaps.filter(pl.col("gap") * scale < 1.0).with_columns(pl.col("_x").floor().cast(pl.Int64).alias("_col"))
              .group_by("_col").agg(pl.col("gap").sum(), pl.col("host").sum(), pl.len().alias("n")).sort("_col"))
    out += [_column(x0, col, y, h, IDLE_HOST_BOUND if host * 2 >= gap else IDLE_OTHER, gap, scale,
                    f"{n} short gap{'s' if n != 1 else ''}: idle {gap / 1000:,.1f} us, "
                    f"host-bound {host / 1000:,.1f} us")
            for col, gap, host, n in narrow.iter_rows()]
    return out
