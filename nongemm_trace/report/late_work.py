"""One sentence per rank that arrived last at collectives: the host work that made it late (the
JSON's ``late_work``: :mod:`nongemm_trace.metrics.late_work`), said alike by the terminal and the
HTML page."""

from __future__ import annotations

from typing import Any


def late_sentences(ranks: list[dict[str, Any]]) -> list[str]:
    """``rank R, last on N of M calls: beyond the other ranks' host work before those calls, OP +X ms,
    …`` for each rank that was last at least once and whose excess the trace shows."""
    out = []
    for r in ranks:
        c = r.get("collectives") or {}
        late = c.get("late_work") or []
        if not c.get("last") or not late:
            continue
        parts = ", ".join(f"{w['op']} +{w['excess_us'] / 1000:,.1f} ms" for w in late)
        out.append(f"rank {r['rank']}, last on {c['last']} of {c['collectives']} calls: beyond the other ranks' "
                   f"host work before those calls, {parts}")
    return out


def late_cell(late: list[dict[str, Any]] | None) -> str:
    """The largest excess of one call's last rank, ``OP +X us`` (``-``: none the trace shows)."""
    if not late:
        return "-"
    return f"{late[0]['op']} +{late[0]['excess_us']:,.1f} us"
