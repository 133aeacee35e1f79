"""Rows a reader can tell apart (issue #43 item 5): where a name repeats, the row says which one it is.
Two cuBLAS kernels that differ only in the middle of their name keep the differing part when the
terminal shortens them; an op that ran under two categories is named with its category in the
roofline's key."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest
from conftest import shared

from nongemm_trace import cli
from nongemm_trace.report.names import shorten, shorten_apart


@pytest.mark.parametrize("columns", ["80", "160"])
def test_kernel_rows_that_shorten_alike_show_where_they_differ(capsys, monkeypatch, columns):
    """BERT's two sm80_xmma_gemm kernels read ``sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_ti…e_kernel__5x_cublas``
    twice in the kernel table."""
    monkeypatch.setenv("COLUMNS", columns)
    assert cli.main(["analyze", str(shared("h200", "bert_base_fp32_bs8_s128__eager.json.gz"))]) == 0
    out = capsys.readouterr().out
    table = out[out.index("Top 15 kernels"):out.index("Steps")]
    rows = [ln.split("│")[1].strip() for ln in table.splitlines() if ln.startswith("│ sm80_")]
    assert len(rows) == 2 and rows[0] != rows[1], rows
    assert "128x64x8" in rows[0] and "64x64x8" in rows[1]


@pytest.mark.parametrize("columns", ["95", "200"])
def test_every_kernel_row_of_the_llama_trace_reads_apart(capsys, monkeypatch, columns):
    """Llama's eager trace: five ``elementwise_kernel<128, …>`` kernels, one of them ``<128, 2, …>``.
    Shown where the whole group first parted (at the ``2``), the mul, add and neg kernels over
    BFloat16 read ``void at::nativ…8, 4, at::native::gpu_kernel_i…ambda(int)#1})`` alike."""
    from nongemm_trace import analyze

    monkeypatch.setenv("COLUMNS", columns)
    trace = str(shared("h200", "llama_1b_bf16_bs1_s2048__eager.json.gz"))
    assert cli.main(["analyze", trace, "--top", "40", "-q"]) == 0
    out = capsys.readouterr().out
    table = out[out.index("Top 40 kernels"):out.index("Steps")]
    shown = [[c.strip() for c in ln.strip("│").split("│")][:2] for ln in table.splitlines() if ln.startswith("│ ")]
    kernels = analyze(trace).kernel_summary.head(40)
    assert len(shown) == kernels.height
    # rows that read alike (name and category) are the same kernel, and distinct kernels read apart
    full = {}
    for (name, category), real in zip(shown, kernels["name"].to_list()):
        full.setdefault((name, category), set()).add(real)
    assert all(len(v) == 1 for v in full.values()), [k for k, v in full.items() if len(v) > 1]
    by_name = {}
    for (name, _), real in zip(shown, kernels["name"].to_list()):
        by_name.setdefault(name, set()).add(real)
    assert all(len(v) == 1 for v in by_name.values())


def test_names_that_differ_in_two_far_places_show_both():
    """cub's radix sort kernels (HTA's trace_diff traces) differ in the policy's types and again in the
    kernel's own template list; and a name parted from one group may read as one of another group."""
    kinds = ["Histogram", "Onesweep"]
    names = [f"void cub::DeviceRadixSort{k}Kernel<cub::DeviceRadixSortPolicy<long, {t}, int>::Policy800, false, "
             f"long, {t}, int>(int*, long const*, int, int, int)" for k in kinds for t in ("float", "int")]
    for width in (40, 60):
        short = shorten_apart(names, width)
        assert len(set(short)) == len(names) and max(map(len, short)) <= width, short


def test_shortened_names_stay_apart_and_equal_names_stay_equal():
    a = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x64x8_stage3_warpsize2x2x1_ffma_aligna4_kernel__5x_cublas"
    b = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_kernel__5x_cublas"
    assert shorten(a) == shorten(b)
    sa, sb, sa2, short = shorten_apart([a, b, a, "aten::mm"])
    assert sa != sb and sa == sa2 and short == "aten::mm"
    assert max(len(sa), len(sb)) <= 60


def test_the_roofline_key_names_the_category_of_an_op_that_ran_as_two():
    """Llama's written-out RMSNorm: aten::mul is normalization there and arithmetic elsewhere, and both
    are among the top ops by GPU time."""
    from nongemm_trace import flops_analysis
    from nongemm_trace.report.figures import roofline_figure

    rep = flops_analysis(shared("h200", "llama_1b_bf16_bs1_s2048__eager.json.gz"))
    fig = roofline_figure(rep, labelled=5)
    key = next(t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("top ops"))
    assert "aten::mul (arithmetic)" in key and "aten::mul (normalization)" in key
    assert "aten::mm (" not in key  # a name that does not repeat stays bare


def test_the_shapes_table_names_each_rows_category(capsys, monkeypatch):
    """Llama's aten::mul runs as its RMSNorm's scaling and as the rotary embedding's product: the
    shapes table listed both as ``aten::mul`` with nothing but their dims to tell them apart."""
    monkeypatch.setenv("COLUMNS", "200")
    trace = str(shared("h200", "llama_1b_bf16_bs1_s2048__eager.json.gz"))
    assert cli.main(["shapes", trace, "-q"]) == 0
    rows = [[c.strip() for c in ln.strip("│").split("│")] for ln in capsys.readouterr().out.splitlines()
            if ln.startswith("│ aten::mul ")]
    assert {r[1] for r in rows} == {"arithmetic", "normalization"}, rows
