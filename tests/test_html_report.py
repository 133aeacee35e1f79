"""The HTML report (``nongemm-trace report``) and the notebook views (``_repr_html_``).

The page is parsed with the standard library's html.parser and every number cell is
compared with the JSON report of the same trace; names are checked to arrive escaped;
the page must need no network. Where a headless Chromium is installed, it loads the
page and its DOM is checked (skipped, saying why, where none is).
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser

import pytest
from conftest import SAMPLES, shared

from nongemm_trace.analyses.changes import WhatIfParams

HOSTILE_OP = 'aten::add<script>alert("op")</script>&amp;'
HOSTILE_KERNEL = 'void k<img src=x onerror=alert(1)>("x")'


class Tables(HTMLParser):
    """Each table (by class) as rows of cells; a cell is (text, data-value or None)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[str, list[list[tuple[str, str | None]]]]] = []
        self.tags: list[str] = []
        self._cell: list[str] | None = None
        self._value: str | None = None
        self._row: list[tuple[str, str | None]] | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if tag == "table":
            self.tables.append((a.get("class", ""), []))
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell, self._value = [], a.get("data-value")

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(("".join(self._cell).strip(), self._value))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row and self.tables:
                self.tables[-1][1].append(self._row)
            self._row = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def named(self, cls: str) -> list[list[list[tuple[str, str | None]]]]:
        return [rows[1:] for c, rows in self.tables if c == cls]  # without the header row


def parse(html: str) -> Tables:
    p = Tables()
    p.feed(html)
    p.close()
    return p


@pytest.fixture(scope="module")
def pair():
    from nongemm_trace.analyses.compare import compare
    from nongemm_trace.analyses.launch import launch_analysis
    from nongemm_trace.pipeline.analysis import Analysis
    from nongemm_trace.report_page import build_page

    paths = [shared("h200", "bert_base_fp32_bs8_s128__eager.json.gz"),
             shared("h200", "bert_base_fp32_bs8_s128__compiled.json.gz")]
    analyses = [Analysis(p) for p in paths]
    html = build_page(analyses, top=10)
    return {"html": html, "parsed": parse(html), "reports": [a.report() for a in analyses],
            "launches": [launch_analysis(a) for a in analyses], "comparison": compare(analyses)}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """The bundled BERT sample with an op and a kernel renamed to markup."""
    doc = json.loads(gzip.decompress((SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz").read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("name") == "aten::add":
            e["name"] = HOSTILE_OP
        elif e.get("cat") == "kernel" and "gelu" in e.get("name", "").lower():
            e["name"] = HOSTILE_KERNEL
    p = tmp_path_factory.mktemp("hostile") / "hostile<b>.json"
    p.write_text(json.dumps(doc))
    from nongemm_trace.pipeline.analysis import Analysis
    from nongemm_trace.report_page import build_page
    a = Analysis(p)
    return p, build_page([a]), a


def _num_text(v: float, digits: int = 1) -> str:
    return f"{v:,}" if isinstance(v, int) else f"{v:,.{digits}f}"


def test_every_number_of_the_breakdown_equals_the_json_report(pair):
    parsed = pair["parsed"]
    for i, rep in enumerate(pair["reports"]):
        d = rep.to_dict(max_ops=None, max_kernels=10)
        cats = parsed.named("categories")[i]
        assert [r[0][0] for r in cats] == [c["category"] for c in d["categories"]]
        for row, c in zip(cats, d["categories"]):
            assert float(row[2][1]) == c["gpu_time_us"] and row[2][0] == _num_text(c["gpu_time_us"])
            assert float(row[3][1]) == c["share"] and row[3][0] == f"{100 * c['share']:.1f} %"
            assert int(row[5][1]) == c["activities"]
        classes = parsed.named("classes")[i]
        assert [(r[0][0], float(r[1][1]), float(r[2][1])) for r in classes] == \
            [(c["class"], c["time_us"], c["share"]) for c in d["classes"]]
        ops = [o for o in d["ops"] if o["self_gpu_time_us"] > 0][:10]
        assert [(r[0][0], r[1][0], int(r[2][1]), float(r[3][1]), float(r[4][1])) for r in parsed.named("ops")[i]] == \
            [(o["op"], o["category"], o["calls"], o["gpu_time_us"], o["self_gpu_time_us"]) for o in ops]
        assert [(r[0][0], float(r[4][1])) for r in parsed.named("kernels")[i]] == \
            [(k["name"], k["gpu_time_us"]) for k in d["kernels"]]
        assert [float(r[2][1]) for r in parsed.named("steps")[i]] == [s["cpu_time_us"] for s in d["steps"]]


def test_launch_verdict_and_measures_equal_the_launch_json(pair):
    parsed = pair["parsed"]
    text = "".join(parsed.text)
    for i, lrep in enumerate(pair["launches"]):
        d = lrep.to_dict()
        assert d["verdict"] in text
        rows = {r[0][0]: float(r[1][1]) for r in parsed.named("launch")[i]}
        assert rows["span (first start to last end)"] == d["span_us"]
        assert rows["host-bound idle (waiting for a launch)"] == d["host_bound_idle_us"]
        assert rows["activities"] == d["activities"]
    # the timeline: one lane per stream and an idle lane per device, a rect per activity or pixel column
    assert parsed.tags.count("svg") >= 2 * 3 and "dev 0 idle" in text


def test_the_comparison_equals_the_compare_json(pair):
    d = pair["comparison"].to_dict()
    rows = pair["parsed"].named("compare")[0]
    shown = [c for c in d["categories"] if any(c["gpu_time_us"])]
    assert [r[0][0] for r in rows] == [c["category"] for c in shown]
    for row, c in zip(rows, shown):
        assert float(row[2][1]) == c["gpu_time_us"][0] and float(row[3][1]) == c["gpu_time_us"][1]
        assert row[4][0] == ("new" if c["ratio"][1] is None else f"{c['ratio'][1]:.2f}x")
    traces = pair["parsed"].named("traces")[0]
    assert [(r[0][0], float(r[5][1])) for r in traces] == [("BASE", d["traces"][0]["non_gemm_share"]),
                                                          ("#1", d["traces"][1]["non_gemm_share"])]
    assert "fusion" in "".join(pair["parsed"].text)  # eager vs compiled: the fusion sentence


def test_the_page_needs_no_network(pair):
    html = pair["html"]
    assert html.startswith("<!DOCTYPE html>")
    for needle in ("<script", "<link", "<img", "<iframe", "@import", "url(", "src=", "https://"):
        assert needle not in html, needle
    # the only URL is the SVG namespace (an identifier, never fetched); links stay in the page
    assert set(html.split("http://")[1:]) and all(x.startswith("www.w3.org/2000/svg")
                                                  for x in html.split("http://")[1:])
    assert all(h.startswith("#") for h in __import__("re").findall(r'href="([^"]*)"', html))


def test_names_are_escaped(hostile):
    path, html, _ = hostile
    assert "<script" not in html and "<img" not in html
    parsed = parse(html)
    text = "".join(parsed.text)
    assert HOSTILE_OP in text and HOSTILE_KERNEL in text and path.name in text
    assert "script" not in parsed.tags and "img" not in parsed.tags and "b" not in parsed.tags[:5]


def test_repr_html_of_report_launch_and_comparison(pair, hostile):
    from nongemm_trace.analyses.launch import launch_analysis

    rep, lrep, cmp = pair["reports"][0], pair["launches"][0], pair["comparison"]
    for obj, expect in ((rep, "aten::addmm"), (lrep, lrep.verdict), (cmp, "ratio")):
        html = obj._repr_html_()
        assert html.startswith('<div class="nongemm">') and expect in "".join(parse(html).text)
        assert len(html) < 100_000  # bounded: short activities and gaps are drawn per pixel column
    top = parse(rep._repr_html_()).named("ops")[0]
    assert len(top) <= 10 and float(top[0][4][1]) == rep.to_dict()["ops"][0]["self_gpu_time_us"]
    bad = hostile[2].report()._repr_html_() + launch_analysis(hostile[2])._repr_html_()
    assert "<script" not in bad and "<img" not in bad and HOSTILE_KERNEL in "".join(parse(bad).text)


def test_command_line(tmp_path, capsys):
    from nongemm_trace.cli import main

    trace = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"
    out = tmp_path / "sub" / "r.html"
    assert main(["report", str(trace), "-o", str(out), "--top", "5", "--title", "BERT <eager>"]) == 0
    html = out.read_text(encoding="utf-8")
    assert "<title>BERT &lt;eager&gt;</title>" in html and len(parse(html).named("ops")[0]) == 5
    assert f"wrote {out}" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing.json"), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing.json" in err[0]
    assert main(["report", str(trace), "-o", str(out), "--top", "-1"]) == 2
    assert "--top must be >= 0" in capsys.readouterr().err


def _browser() -> str | None:
    return next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome", "chrome")
                 if shutil.which(b)), None)


def test_a_headless_browser_renders_the_page(pair, hostile, tmp_path):
    browser = _browser()
    if browser is None:
        pytest.skip("no headless browser installed (Debian: apt-get install chromium)")
    page = tmp_path / "report.html"
    page.write_text(pair["html"].replace("</main>", hostile[1].split('<main class="nongemm">')[1].split("</main>")[0]
                                         + "</main>"), encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        r = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                            "--disable-component-update", "--disable-sync", "--no-first-run",
                            f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                           capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = parse(r.stdout)
    written = parse(page.read_text(encoding="utf-8"))
    # the browser kept every table row, figure and rectangle we wrote, and made no element of a name
    assert [len(rows) for _, rows in dom.tables] == [len(rows) for _, rows in written.tables]
    assert dom.tags.count("rect") == written.tags.count("rect") > 300
    assert dom.tags.count("svg") == written.tags.count("svg")
    assert "script" not in dom.tags and "img" not in dom.tags
    assert HOSTILE_OP in "".join(dom.text)


def test_a_cpu_only_trace_shows_cpu_time_and_no_timeline():
    from nongemm_trace.pipeline.analysis import Analysis
    from nongemm_trace.report_page import build_page

    a = Analysis(shared("external", "hta", "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"))
    html = build_page([a])
    parsed = parse(html)
    d = a.report().to_dict()
    assert d["metric"] == "cpu"
    rows = parsed.named("categories")[0]
    assert [(r[0][0], float(r[2][1])) for r in rows] == [(c["category"], c["cpu_time_us"]) for c in d["categories"]]
    head = [c[0] for c in next(rows for cls, rows in parsed.tables if cls == "categories")[0]]
    assert head[-1] == "op calls" and "operator CPU time" in html
    assert "no GPU activities: nothing ran on the device" in html and 'class="timeline"' not in html
    assert html.count("no_gpu_activities") == 1  # the warnings once, not again under launch


def test_a_tensorrt_profile_shows_its_fusion_view_and_no_timeline():
    from nongemm_trace.pipeline.analysis import Analysis
    from nongemm_trace.report_page import build_page

    a = Analysis(shared("external2", "tensorrt",
                        "trex__examples__pytorch__resnet__A100__fp16__resnet.onnx.engine.profile.json"))
    parsed = parse(build_page([a]))
    view = a.report().to_dict()["engine"]
    assert [(r[0][0], int(r[2][1]), float(r[3][1])) for r in parsed.named("folded")[0]] == \
        [(r["op"], r["gemm_layers"], r["gemm_layer_time_us"]) for r in view["folded_into_gemm_layers"][:15]]
    assert [r[0][0] for r in parsed.named("standalone")[0]] == [r["layer_type"]
                                                                for r in view["standalone_by_layer_type"]]
    text = "".join(parsed.text)
    assert "engine layers by time" in text and "Launch overhead" not in text and parsed.named("launch") == []


def test_the_timeline_shades_a_pixel_column_by_how_much_of_it_is_busy_or_idle():
    """Hand-made edge case: a 1,000 us span on 100 pixels (10 us a pixel). The first column holds ten
    0.5 us kernels (5 us: half busy) and nine 0.5 us gaps; the 500 us kernel at the end is drawn as itself."""
    import polars as pl

    from nongemm_trace.report.svg import timeline

    ts = [1_000 * i for i in range(10)] + [500_000]
    acts = pl.DataFrame({"ts_ns": ts, "dur_ns": [500] * 10 + [500_000], "category": ["memory"] * 10 + ["gemm"],
                         "name": ["copy"] * 10 + ["<gemm>"], "device": [0] * 11, "stream": [7] * 11,
                         "gap_device_ns": [0] + [500] * 9 + [490_500], "host_bound_gap_ns": [0] * 10 + [490_500],
                         "step": [None] * 11})
    svg = timeline(acts, width=100)
    rects = parse(svg)
    assert svg.count('fill-opacity="0.50"') == 1 and "10 short activities, mostly memory: 5.0 us" in svg
    assert '<title>&lt;gemm&gt; (gemm): 500.0 us</title>' in svg  # drawn as itself, name escaped
    assert "idle 490.5 us, host-bound 490.5 us" in svg  # the wide gap: dark
    assert "9 short gaps: idle 4.5 us, host-bound 0.0 us" in svg and rects.tags.count("svg") == 1


def test_repr_html_of_latency_and_whatif():
    from nongemm_trace.analyses.latency import latency_analysis, whatif_analysis

    trace = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"
    lat = latency_analysis(trace)
    d = lat.to_dict()
    page = parse(lat._repr_html_())
    steps = page.named("latency-steps")[0]
    assert [float(r[2][1]) for r in steps] == [s["wall_us"] for s in d["steps"]]
    by_class = {r[0][0]: float(r[1][1]) for r in page.named("latency-by")[0]}
    assert by_class == d["total"]["by_class_us"]
    w = whatif_analysis(trace, WhatIfParams(scale={"GEMM": 0.5}))
    wd = w.to_dict()
    page = parse(w._repr_html_())
    rows = page.named("whatif-steps")[0]
    assert [(float(r[2][1]), float(r[3][1])) for r in rows] == [(s["measured_us"], s["predicted_us"])
                                                                for s in wd["steps"]]
    assert "GEMM x0.5" in "".join(page.text)
    for html in (lat._repr_html_(), w._repr_html_()):
        assert html.startswith('<div class="nongemm">') and "LatencyReport(" not in html


def test_page_for_sharing_cpu_ops_one_line_names_no_absolute_path(tmp_path):
    from nongemm_trace.cli import main

    cpu_only = shared("external", "hta", "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz").absolute()
    out = tmp_path / "cpu.html"
    assert main(["report", str(cpu_only), "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    assert str(cpu_only.parent) not in html and cpu_only.name in html
    ops = parse(html).named("ops")[0]
    assert ops and not any(r[0][0].startswith("ProfilerStep") for r in ops)
    assert [float(r[4][1]) for r in ops] == sorted((float(r[4][1]) for r in ops), reverse=True)
    assert "white-space:nowrap" in html.split("td.name{", 1)[1].split("}", 1)[0]
