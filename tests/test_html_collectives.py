"""The HTML page of distributed ranks lists the collectives matched across them (issue #45 item 3), with
the figures ``analyze RANK0 RANK1 --format json`` gives: per rank how often it was last, and the calls
with the largest arrival skew; a serving trace's page has its phases."""

from __future__ import annotations

import json
import re

from conftest import shared

from nongemm_trace.cli import main
from nongemm_trace.report_page import build_page


def _values(html: str, table: str) -> list[list[str]]:
    body = re.search(rf'<table class="{table}">.*?<tbody>(.*?)</tbody>', html).group(1)
    cells = [re.findall(r"<td([^>]*)>([^<]*)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", body)]
    return [[(m.group(1) if (m := re.search(r'data-value="([^"]*)"', attrs)) else "", text) for attrs, text in row]
            for row in cells]


def test_the_page_lists_the_collectives_as_the_json_does(capsys):
    ddp = shared("h200x2")
    ranks = [ddp / f"bert_ddp_train_rank{r}.json.gz" for r in (0, 1)]
    assert main(["analyze", *map(str, ranks), "--format", "json", "--quiet", "--workers", "1"]) == 0
    d = json.loads(capsys.readouterr().out)
    html = build_page(ranks)
    rows = _values(html, "collective-ranks")
    want = {r["rank"]: r["collectives"] for r in d["ranks"]["ranks"]}
    assert len(rows) == 2
    for row in rows:
        rank = int(row[0][1])
        assert (int(row[1][0]), int(row[2][0])) == (want[rank]["collectives"], want[rank]["last"])
        assert float(row[3][0]) == want[rank]["wait_us"]
    top = sorted(d["collectives"], key=lambda c: -c["skew_us"])
    calls = _values(html, "collectives")
    assert [float(c[5][0]) for c in calls] == [c["skew_us"] for c in top[:len(calls)]]
    assert [int(c[6][0]) for c in calls] == [c["last_rank"] for c in top[:len(calls)]]
    assert f"{len(d['collectives'])} collective calls matched" in html


def test_a_single_trace_page_has_no_collectives_and_a_serving_one_its_phases():
    html = build_page([shared("external2/kineto", "tracelens__inference__vllm_decode_full__graph_execution.json.gz")])
    assert 'class="collectives"' not in html
    (row,) = _values(html, "phases")
    assert (row[0][1], row[1][0], row[4][0], row[5][0]) == ("decode", "1", "32.0", "32")
