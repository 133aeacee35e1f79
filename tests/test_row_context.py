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
