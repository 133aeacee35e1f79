"""The HTML page's collectives (distributed ranks): per rank how often it arrived last and how long it
waited, then the calls with the largest arrival skew; the terminal's two tables
(``report/terminal/batch.py``), each figure's JSON value kept in ``data-value``."""

from __future__ import annotations

from html import escape
from typing import Any

from .html import html_num, html_table, html_text
from .late_work import late_cell, late_sentences

#: the calls listed on the page (the JSON and the Parquet dataset have every one)
TOP_COLLECTIVES = 20


def collectives_section(calls: list[dict[str, Any]], ranks: list[dict[str, Any]]) -> str:
    """The two tables, or nothing when no collective was matched across the ranks."""
    if not calls:
        return ""
    rows = []
    for r in ranks:
        c = r.get("collectives")
        if c:
            rows.append(f"{html_text(r['rank'])}{html_num(c['collectives'])}{html_num(c['last'])}{html_num(c['wait_us'])}"
                        f"{html_num(c['collective_us'])}{html_num(c['transfer_us'])}{html_num(c['exposed_us'])}")
    per_rank = html_table("collective-ranks", ["rank", "calls", "last", "wait (us)", "in collectives (us)",
                                           "transfer (us)", "exposed (us)"], rows)
    per_rank += "".join(f'<p class="late">{escape(line)}</p>' for line in late_sentences(ranks))
    top = sorted(calls, key=lambda c: -(c["skew_us"] or 0))[:TOP_COLLECTIVES]
    body = []
    for c in top:
        share = c["busbw_share"]
        body.append(f"{html_text(c['name'])}{html_text(c['process_group'] or '-')}{html_text(c['step'] or '-')}"
                    f"{html_num(c['index'])}{html_num(c['bytes'])}{html_num(c['skew_us'])}{html_num(c['last_rank'])}"
                    f"{html_num(c['busbw_gbps'])}{html_num(None if share is None else round(100 * share, 2))}"
                    f"{html_text(late_cell(c.get('late_work')))}")
    calls_table = html_table("collectives", ["collective", "group", "step", "#", "bytes", "skew (us)", "last rank",
                                         "busbw (GB/s)", "of link (%)", "the last rank's host work beyond the others'"],
                             body, numeric_from=3)
    return (f'<p class="meta">{len(calls)} collective calls matched across ranks (wait: from a rank\'s arrival '
            f"to the last one's)</p>{per_rank}"
            f'<p class="meta">the {len(top)} with the largest arrival skew</p>{calls_table}')
