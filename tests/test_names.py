"""Long names shortened in the middle for terminals and logs (report/names.py)."""

from __future__ import annotations

from nongemm_trace.report.names import ELLIPSIS, NAME_WIDTH, shorten, shorten_list

TRITON = "triton_per_fused__native_batch_norm_legit_no_training_add_mean_relu_23"
CUTLASS = ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x5_tn_align4>"
           "(cutlass_80_tensorop_s1688gemm_128x128_16x5_tn_align4::Params)")


def test_short_names_pass_and_long_ones_keep_start_and_end():
    assert shorten("aten::mm") == "aten::mm"
    s = shorten(TRITON, 40)
    assert len(s) == 40 and s.count(ELLIPSIS) == 1
    assert s.startswith("triton_per_fused__native") and s.endswith("relu_23")
    assert shorten(CUTLASS) == shorten(CUTLASS) and len(shorten(CUTLASS)) == NAME_WIDTH
    assert shorten(CUTLASS).startswith("void cutlass::Kernel2<") and shorten(CUTLASS).endswith("::Params)")


def test_a_list_cell_fits_its_width_and_counts_the_rest():
    names = ", ".join([TRITON.replace("23", str(i)) for i in range(12)])
    cell = shorten_list(names, 100)
    assert len(cell) <= 100 and cell.endswith("more") and cell.startswith(shorten(TRITON.replace("23", "0")))
    shown = cell.count(ELLIPSIS)
    assert cell.endswith(f"+{12 - shown} more")
    assert shorten_list("a, b", 100) == "a, b" and shorten_list("", 10) == ""
