"""The HTML page says what the terminal says (issue #43 item 4): the launch verdicts, the estimate of the
run without the profiler and where it comes from, and for distributed ranks the rank table and the
straggler's sentence. Both renderers take their words from report/sentences.py; these tests hold the
two outputs to it on real traces."""

from __future__ import annotations

import html
import re

import pytest
from conftest import SAMPLES, shared

from nongemm_trace import cli
from nongemm_trace.report_page import build_page


def _page_text(page: str) -> list[str]:
    """The page's paragraphs and table cells as plain text."""
    return [html.unescape(re.sub(r"<[^>]+>", "", m)) for m in re.findall(r"<(?:p|td)[^>]*>(.*?)</(?:p|td)>", page)]


def _terminal(capsys, argv: list[str]) -> list[str]:
    assert cli.main(argv) == 0
    return [" ".join(ln.split()) for ln in capsys.readouterr().out.splitlines()]


def test_the_page_has_the_launch_verdicts_and_the_run_without_the_profiler(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    trace = str(SAMPLES / "unprofiled" / "resnet50_bs32__tf32__shapes.json.gz")
    terminal = _terminal(capsys, ["launch", trace])
    verdicts = [ln for ln in terminal[2:6] if ln.startswith(("profiled: ", "(")) or "without the profiler" in ln]
    assert len(verdicts) == 3 and "without the profiler" in verdicts[1]
    page = [" ".join(t.split()) for t in _page_text(build_page([trace]))]
    assert [v for v in verdicts if v not in page] == []


def test_the_page_has_the_rank_table_and_the_straggler(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    ranks = [str(shared("h200x2", f"bert_ddp_train_rank{i}.json.gz")) for i in (0, 1)]
    terminal = _terminal(capsys, ["analyze", *ranks, "-q", "--workers", "1"])
    straggler = next(ln for ln in terminal if ln.startswith("straggler: "))
    title = next(ln for ln in terminal if ln.startswith("Ranks: straggler rank"))
    ranks_part = terminal[:next((i for i, ln in enumerate(terminal) if ln.startswith("Collectives:")), len(terminal))]
    rows = [[c.strip() for c in ln.strip("│").split("│")] for ln in ranks_part if re.match(r"│ +[01] │ +\d+ │", ln)]
    assert len(rows) == 2
    page = build_page(ranks)
    text = [" ".join(t.split()) for t in _page_text(page)]
    assert straggler in text and title in text
    table = page[page.index('<table class="ranks">'):]
    table = table[:table.index("</table>")]
    body = table[table.index("<tbody>"):]
    cells = [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr)]
             for tr in re.findall(r"<tr>(.*?)</tr>", body)]
    assert cells == rows  # the same figures, cell by cell


def _sentences(lines: list[str]) -> list[str]:
    """The terminal's sentences: not its two head lines (the page has its own), not a table's rows,
    borders or title (the line right above a table's top border)."""
    return [ln for i, ln in enumerate(lines[2:], 2) if ln and ln[0] not in "┏┃┡│└"
            and not (i + 1 < len(lines) and lines[i + 1].startswith("┏"))]


@pytest.mark.parametrize("trace", [("h200", "llama_1b_bf16_bs1_s2048__compiled_cudagraphs.json.gz"),
                                   ("h200", "resnet50_fp32_bs8__eager.json.gz"),
                                   ("h200x2", "bert_ddp_train_rank0.json.gz")])
def test_every_sentence_of_launch_is_on_the_page(capsys, monkeypatch, trace):
    """The page had the verdicts but not the CUDA graphs' launch saving, the step time (the loop's
    period) or the device span per step, which ``launch`` prints under its tables."""
    monkeypatch.setenv("COLUMNS", "400")
    path = str(shared(*trace))
    said = _sentences(_terminal(capsys, ["launch", path, "-q"]))
    assert any(s.startswith("step time (the loop's period): mean ") for s in said)
    page = " ".join(html.unescape(re.sub(r"<[^>]+>", "", build_page([path]))).split())
    assert [s for s in said if s not in page] == []


def test_the_cuda_graph_sentence_prints_two_decimals(capsys, monkeypatch):
    """It printed the JSON's floats as they were: ``1.5668 us per replayed activity vs 31.297 us``."""
    monkeypatch.setenv("COLUMNS", "400")
    path = str(shared("h200", "llama_1b_bf16_bs1_s2048__compiled_cudagraphs.json.gz"))
    line = next(s for s in _terminal(capsys, ["launch", path, "-q"]) if s.startswith("CUDA graphs: "))
    assert re.search(r"launch call time \d+\.\d\d us per replayed activity vs \d[\d,]*\.\d\d us per", line), line


def test_a_trace_of_replays_only_has_no_eager_launch_to_compare(capsys, monkeypatch):
    """A decode step replayed from a CUDA graph launches nothing eagerly: the sentence says so (it
    failed with a TypeError formatting the missing figure), in the terminal and on the page."""
    monkeypatch.setenv("COLUMNS", "400")
    path = str(SAMPLES / "recipe_h100" / "bert4_bs1_s64__graph.json.gz")
    line = next(s for s in _terminal(capsys, ["launch", path, "-q"]) if s.startswith("CUDA graphs: "))
    assert line.endswith("per replayed activity (no activity was launched eagerly to compare with)"), line
    page = " ".join(html.unescape(re.sub(r"<[^>]+>", "", build_page([path]))).split())
    assert line in page


@pytest.mark.parametrize("trace", [("h200", "llama_1b_bf16_bs1_s2048__compiled_cudagraphs.json.gz"),
                                   ("h200x2", "bert_ddp_train_rank0.json.gz"),
                                   ("external/hta", "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")])
def test_every_sentence_of_analyze_is_on_the_page(capsys, monkeypatch, trace):
    """The page's head said the total its own way (no step marker, no op calls under the CPU metric),
    its evidence line without what the shares are of, and the step time's meaning only in brackets."""
    monkeypatch.setenv("COLUMNS", "400")
    path = str(shared(*trace))
    said = _sentences(_terminal(capsys, ["analyze", path, "-q"]))
    assert any(s.startswith("total: ") for s in said) and any(s.startswith("step time: ") for s in said)
    page = " ".join(html.unescape(re.sub(r"<[^>]+>", "", build_page([path]))).split())
    assert [s for s in said if s not in page] == []


@pytest.mark.parametrize("pair", [("gpt2_fp32_bs8_s128__eager.json.gz", "gpt2_fp32_bs8_s128__compiled.json.gz"),
                                  ("llama_1b_bf16_bs1_s2048__eager.json.gz",
                                   "llama_1b_fp8dyn_bs1_s2048__eager.json.gz")])
def test_every_sentence_of_compare_is_on_the_page(capsys, monkeypatch, pair):
    """The page named BASE without the level and taxonomy compared, and its fusion and quantization
    sentences in other words than the terminal's (``fusion name: …`` for ``fusion (name): …``)."""
    monkeypatch.setenv("COLUMNS", "400")
    paths = [str(shared("h200", name)) for name in pair]
    said = [ln for ln in _terminal(capsys, ["compare", *paths, "-q"]) if ln and ln[0] not in "┏┃┡│└"]
    said = [ln for ln in said if ln.startswith(("BASE: ", "fusion (", "quantization ("))]
    assert len(said) == 2
    page = " ".join(html.unescape(re.sub(r"<[^>]+>", "", build_page(paths))).split())
    assert [s for s in said if s not in page] == []
