"""A batch of traces in the terminal: one row per trace, the combined categories, the ranks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ...models.batch import BatchResult
from ..late_work import late_cell, late_sentences
from ..palette import FAILED
from ..sentences import ranks_lines, ranks_table, ranks_title
from . import escape


def render_batch(result: BatchResult, console: Console) -> None:
    d = result.to_dict()
    t = Table(title=f"{len(d['traces'])} traces", title_justify="left")
    for c in ("trace", "rank", "GPU time (us)", "activities", "GEMM", "non-GEMM", "communication", "top non-GEMM"):
        t.add_column(c, justify="left" if c in ("trace", "top non-GEMM") else "right", overflow="ellipsis",
                     no_wrap=c == "trace", max_width=max(20, console.width - 70) if c == "trace" else None)
    for r in d["traces"]:
        cls = {c["class"]: c["share"] for c in r["classes"]}
        non = [c for c in r["categories"] if c["class"] == "non-GEMM" and c["share"] > 0]
        t.add_row(escape(Path(r["trace"]).name), "" if r.get("rank") is None else str(r["rank"]),
                  f"{r['gpu_time_us']:,.1f}", f"{r['gpu_activities']:,}", f"{100 * cls.get('GEMM', 0):.1f} %",
                  f"{100 * cls.get('non-GEMM', 0):.1f} %", f"{100 * cls.get('communication', 0):.1f} %",
                  non[0]["category"] if non else "-")
    console.print(t)
    c = d["combined"]
    t = Table(title=f"Combined: {c['gpu_time_us']:,.1f} us of GPU time over {c['traces']} traces", title_justify="left")
    for col in ("category", "class", "GPU time (us)", "share"):
        t.add_column(col, justify="left" if col in ("category", "class") else "right")
    for e in c["categories"]:
        t.add_row(e["category"], e["class"], f"{e['gpu_time_us']:,.1f}", f"{100 * e['share']:.1f} %")
    console.print(t)
    ranks = d.get("ranks")
    if ranks:
        head, rows = ranks_table(ranks)
        t = Table(title=ranks_title(ranks), title_justify="left")
        for col in head:
            t.add_column(col, justify="right")
        for row in rows:
            t.add_row(*row)
        console.print(t)
        for line in ranks_lines(ranks):
            console.print(escape(line))
    if d.get("collectives"):
        _render_collectives(d["collectives"], (ranks or {}).get("ranks") or [], console)
    for f in d["failed"]:
        console.print(f"[{FAILED}]failed[/{FAILED}] {escape(f['error'])}", highlight=False)


#: the collectives listed in the terminal (the JSON has every one)
TOP_COLLECTIVES = 10


def _render_collectives(calls: list[dict[str, Any]], ranks: list[dict[str, Any]], console: Console) -> None:
    """Per rank how often it arrived last and how long it waited; the collectives with the largest skew."""
    t = Table(title=f"Collectives: {len(calls)} calls matched across ranks (wait: from a rank's arrival to the "
                    "last one's)", title_justify="left")
    for col in ("rank", "calls", "last", "wait (us)", "in collectives (us)", "transfer (us)", "exposed (us)"):
        t.add_column(col, justify="right")
    for r in ranks:
        c = r.get("collectives")
        if c:
            exposed = "-" if c["exposed_us"] is None else f"{c['exposed_us']:,.1f}"
            t.add_row(str(r["rank"]), str(c["collectives"]), str(c["last"]), f"{c['wait_us']:,.1f}",
                      f"{c['collective_us']:,.1f}", f"{c['transfer_us']:,.1f}", exposed)
    console.print(t)
    for line in late_sentences(ranks):
        console.print(escape(line))
    top = sorted(calls, key=lambda c: -(c["skew_us"] or 0))[:TOP_COLLECTIVES]
    t = Table(title=f"The {len(top)} collectives with the largest arrival skew", title_justify="left")
    for col in ("collective", "group", "step", "#", "bytes", "skew (us)", "last rank", "busbw (GB/s)", "of link",
                "the last rank's host work beyond the others'"):
        t.add_column(col, justify="left" if col in ("collective", "group", "step") or col.startswith("the last")
                     else "right")
    dash = lambda v, f: "-" if v is None else f.format(v)  # noqa: E731
    for c in top:
        t.add_row(escape(c["name"]), escape(str(c["process_group"] or "-")), escape(str(c["step"] or "-")),
                  str(c["index"]), dash(c["bytes"], "{:,}"), f"{c['skew_us']:,.1f}", str(c["last_rank"]),
                  dash(c["busbw_gbps"], "{:,.1f}"), dash(c["busbw_share"] and 100 * c["busbw_share"], "{:.1f} %"),
                  escape(late_cell(c.get("late_work"))))
    console.print(t)
