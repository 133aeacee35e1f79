"""Names from a trace are shown safely (report/escape.py): the hostile names of ../shared/fuzz/hostile
(S8-S9: markup, markdown, escape sequences, bidirectional overrides; S10: spreadsheet formulas) stay in
their markdown cells as plain code, reach the terminal without a control character or rich markup, and
are written to CSV as text. Each is checked on what a reader gets: the markdown rendered to HTML by
markdown-it (rich's own dependency), the CSV read back by Python's csv module."""

from __future__ import annotations

import csv
import io
import json
import shutil
import sys
from html.parser import HTMLParser

import pytest
from conftest import hostile

from nongemm_trace.analyses import specs
from nongemm_trace.cli import main
from nongemm_trace.errors import printable
from nongemm_trace.report.escape import csv_text, md_code

CONTROL = ({chr(c) for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]}
           | set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"))


def _run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _raw_names(path, cat):
    return [e["name"] for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == cat]


class _Tables(HTMLParser):
    """The cells of every HTML table (their text), and every tag seen."""

    def __init__(self):
        super().__init__()
        self.tables, self.tags, self._cell = [], set(), None

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _rendered(markdown: str) -> _Tables:
    from markdown_it import MarkdownIt

    parsed = _Tables()
    parsed.feed(MarkdownIt("commonmark").enable("table").render(markdown))  # raw HTML would pass through
    return parsed


SAFE_TAGS = {"h3", "p", "strong", "code", "table", "thead", "tbody", "tr", "th", "td", "ul", "li"}


def test_markdown_keeps_every_hostile_name_in_its_cell(capsys):
    path = hostile("S8-S9-hostile-names.json")
    code, out, err = _run(capsys, "analyze", path, "--format", "markdown", "--top", "50")
    assert code == 0, err
    html = _rendered(out)
    assert html.tags <= SAFE_TAGS  # no link, image, script or bold tag made of a name
    ops = next(t for t in html.tables if t[0][0] == "op")
    assert all(len(row) == 6 for row in ops)  # no name split a row or added a cell
    want = {printable(n) for n in _raw_names(path, "cpu_op")}
    assert {row[0] for row in ops[1:]} == want  # each name whole, as text (line breaks as spaces)
    assert not CONTROL & set(out)


def test_markdown_of_a_batch_and_a_comparison_keep_file_names_in_their_cells(tmp_path, capsys):
    import subprocess

    subprocess.run([sys.executable, hostile("S8-make-hostile-names.py"), tmp_path], check=True, capture_output=True)
    files = sorted(tmp_path.iterdir())
    assert len(files) == 2 and any("<script>" in f.name for f in files)
    code, out, err = _run(capsys, "analyze", *files, "--format", "markdown", "--quiet")
    assert code == 0, err
    html = _rendered(out)
    assert html.tags <= SAFE_TAGS
    (table,) = html.tables
    assert all(len(row) == 6 for row in table) and [row[0] for row in table[1:3]] == [f.name for f in files]
    code, out, err = _run(capsys, "compare", *files, "--format", "markdown")
    assert code == 0, err
    html = _rendered(out)
    assert html.tags <= SAFE_TAGS
    assert [len(set(map(len, t))) for t in html.tables] == [1] * len(html.tables)  # every row as wide as its head


#: the commands with a terminal view of a trace's names: every registered analysis with its spec's example
TERMINAL_COMMANDS = [("analyze",), ("explain", "aten"), ("explain", "--weak"), *((s.name, *s.example) for s in specs())]


@pytest.mark.parametrize("command", TERMINAL_COMMANDS)
def test_terminal_output_has_no_control_characters_and_no_markup_from_names(capsys, command):
    path = hostile("S8-S9-hostile-names.json")
    code, out, err = _run(capsys, command[0], path, *command[1:])
    assert code == 0, err
    assert not CONTROL & set(out + err)
    if command == ("analyze",):  # rich's markup in a name is shown, not applied
        assert "aten::[bold red]rich[/bold red] [link=https://evil]x[/link]" in out
        assert "aten::]0;pwned[31mRED[0m" in out  # the escape sequences without their ESC and BEL


def test_an_error_line_names_a_hostile_file_without_its_control_characters(tmp_path, capsys):
    bad = tmp_path / "\x1b]0;pwned\x07\u202etrace.json"
    bad.write_text('{"traceEvents": [')
    code, out, err = _run(capsys, "analyze", bad)
    assert code == 2 and out == ""
    assert not CONTROL & set(err) and len(err.strip().splitlines()) == 1
    assert f"{tmp_path}/]0;pwnedtrace.json: " in err


def test_csv_writes_formula_names_as_text(capsys):
    path = hostile("S10-csv-formula-names.json")
    code, out, err = _run(capsys, "analyze", path, "--format", "csv", "--table", "kernels")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    names = _raw_names(path, "kernel")
    assert all(n[0] in "=+-@" for n in names)
    assert sorted(r["name"] for r in rows) == sorted("'" + n for n in names)  # each one text, nothing else changed
    assert sorted(int(r["dur_ns"]) for r in rows) == [5000] * 4  # numbers as they are
    code, out, err = _run(capsys, "analyze", hostile("S8-S9-hostile-names.json"), "--format", "csv", "--table",
                          "kernels")
    cells = [c for row in csv.reader(io.StringIO(out)) for c in row]
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@")]
    assert "'-2+3 kernel 10" in cells and "'@SUM(1+1) kernel 11" in cells


def test_a_batch_csv_writes_a_formula_file_name_as_text(tmp_path, capsys, monkeypatch):
    src = hostile("S10-csv-formula-names.json")
    for name in ("=1+1.json", "plain.json"):
        shutil.copy(src, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, "analyze", "=1+1.json", "plain.json", "--format", "csv", "--quiet")
    assert code == 0, err
    assert [r[0] for r in csv.reader(io.StringIO(out))][1:] == ["'=1+1.json", "plain.json"]


def test_escape_helpers():
    assert printable("a\tb\nc\x1b[31md\x07\u202ee\x9b") == "a b c[31mde"
    assert md_code("x`y``z") == "```x`y``z```" and md_code("`x") == "`` `x ``" and md_code("") == ""
    assert md_code("a\nb") == "`a b`"
    assert [csv_text(v) for v in ("=1", "+1", "-1", "@1", "\t1", "1", -1, None)] == \
        ["'=1", "'+1", "'-1", "'@1", "'\t1", "1", -1, None]
