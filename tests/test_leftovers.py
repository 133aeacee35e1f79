"""Leftovers of earlier audits, each on a real trace (issue #43 item 9)."""

from __future__ import annotations

import re

import polars as pl
import pytest
from conftest import shared

from nongemm_trace import AnalysisOptions
from nongemm_trace.load.template_params import fill_template_params

#: a parameter written as a template placeholder, as Nsight Systems' demangler does
_PLACEHOLDER = re.compile(r"[(,<] ?(?:const )?T\d+\b")


def test_nsight_kernel_names_carry_the_types_not_template_placeholders():
    """The Nsight export of BERT wrote ``vectorized_elementwise_kernel<4, CUDAFunctor_add<float>,
    std::array<char *, 3>>(int, T2, T3)``: the kernel table now names the types, as Kineto does."""
    import nongemm_trace

    acts = nongemm_trace.Analysis(shared("h200_nsys", "bert_nvtx.sqlite.gz")).trace().activities
    names = acts["name"].cast(pl.String).unique().to_list()
    assert not [n for n in names if _PLACEHOLDER.search(n)]
    add = [n for n in names if n.startswith("void at::native::vectorized_elementwise_kernel<4, "
                                            "at::native::CUDAFunctor_add<float>")]
    assert add and add[0].endswith("(int, at::native::CUDAFunctor_add<float>, std::array<char *, 3>)")


def test_template_placeholders_take_the_nearest_templates_arguments():
    nested = ("void at::native::elementwise_kernel<128, 2, void at::native::gpu_kernel_impl_nocast<F<float>>"
              "(at::TensorIteratorBase &, const T1 &)::{lambda(int)#1}>(int, T3)")
    assert fill_template_params(nested) == (
        "void at::native::elementwise_kernel<128, 2, void at::native::gpu_kernel_impl_nocast<F<float>>"
        "(at::TensorIteratorBase &, const F<float> &)::{lambda(int)#1}>(int, void at::native::"
        "gpu_kernel_impl_nocast<F<float>>(at::TensorIteratorBase &, const F<float> &)::{lambda(int)#1})")
    # a placeholder beyond the template's arguments, and unbalanced brackets, stay as written
    assert fill_template_params("k<int>(T2)") == "k<int>(T2)"
    assert fill_template_params("k<int(T1)") == "k<int(T1)"
    assert fill_template_params("MyT1Kernel<int>(T1x)") == "MyT1Kernel<int>(T1x)"


def test_figures_print_with_separators_and_sensible_decimals(capsys):
    """``launch`` printed ``27.8983 us`` (the JSON's float as it was); ``--skip-steps 1`` said ``2254 GPU
    activities … in the first 1 steps``."""
    from nongemm_trace import cli

    trace = str(shared("h200x2", "bert_ddp_train_rank0.json.gz"))
    assert cli.main(["launch", trace]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if "launch overhead per activity" in ln)
    assert re.search(r" \d[\d,]*\.\d\d us ", row), row
    assert cli.main(["analyze", trace, "--skip-steps", "1"]) == 0
    out = capsys.readouterr().out
    assert "in the first step or outside every step" in out and "2,254 GPU activities" in out
    assert "first 1 steps" not in out


def test_a_range_of_equal_ends_prints_one_figure():
    """Two ranks: the 'others' are one rank, and the straggler sentence said ``550.8-550.8 ms``."""
    from nongemm_trace.runs.batch import _ms_range, _straggler

    assert _ms_range([550_812.0]) == "550.8 ms" and _ms_range([550_812.0, 612_000.0]) == "550.8-612.0 ms"
    rows = [{"rank": 0, "communication_us": 550_812.0, "host_bound_idle_us": 1.0, "busy_us": 2.0},
            {"rank": 1, "communication_us": 700_000.0, "host_bound_idle_us": 0.0, "busy_us": 2.0}]
    assert "the others 700.0 ms (waiting for it)" in _straggler(rows)[1]


def test_the_profilers_buffer_request_is_not_the_interrupted_ops_self_time():
    """The FP8 Llama trace: Kineto's ``Activity Buffer Request`` (2.0 ms, pid -1) fell inside an
    ``aten::gather`` whose self CPU time read 2,093.8 us, 31x torch.profiler's 67.8 us."""
    import json

    import nongemm_trace

    path = shared("h200", "llama_1b_fp8dyn_bs1_s2048__eager.json.gz")
    analysis = nongemm_trace.Analysis(path)
    assert analysis.trace().profiler_overhead.height == 1
    assert "Activity Buffer Request" not in analysis.trace().ops["name"].cast(pl.String).to_list()
    ops = analysis.report(AnalysisOptions(metric="cpu")).ops
    ours = ops.filter(pl.col("op") == "aten::gather")["self_cpu_time_ns"].sum() / 1000
    meta = json.loads(path.with_name(path.name.replace(".json.gz", ".meta.json")).read_text())
    torch = sum(r["self_cpu_time_total_us"] for r in meta["key_averages"] if r["key"] == "aten::gather")
    assert ours == pytest.approx(torch, abs=0.001)


def test_one_of_a_thing_is_said_in_the_singular(capsys, monkeypatch):
    """The SGLang Qwen3 decode trace replays one CUDA graph: ``launch`` said ``1 launches replayed 544
    activities``; the page's timeline titled a pixel column ``1 short gaps: …`` and ``1 short
    activities, mostly memory: …`` (GPT-2 compiled, as every page with a lone short gap or activity)."""
    import html

    from nongemm_trace import cli
    from nongemm_trace.report_page import build_page

    monkeypatch.setenv("COLUMNS", "400")
    qwen = str(shared("external2", "kineto", "tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz"))
    assert cli.main(["launch", qwen, "-q"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("CUDA graphs: "))
    assert line.startswith("CUDA graphs: 1 launch replayed 544 activities (544.0 each)"), line
    page = html.unescape(build_page([str(shared("h200", "gpt2_fp32_bs8_s128__compiled.json.gz"))]))
    titles = re.findall(r"<title>(\d+ short [^<]*)</title>", page)
    assert any(t.startswith("1 short gap: ") for t in titles)
    assert any(t.startswith("1 short activity (") for t in titles)
    assert not [t for t in titles if re.match(r"1 short (gaps|activities)\b", t)]
