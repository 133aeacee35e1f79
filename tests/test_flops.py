"""FLOPs, bytes, device peaks, roofline and FLOPs-vs-latency fits."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from conftest import SHARED, shared

from nongemm_trace import AnalysisOptions
from nongemm_trace.analyses.flops import flops_analysis
from nongemm_trace.analyses.flops.formulas import FORMULAS, OpCall, lookup
from nongemm_trace.cli import main
from nongemm_trace.devices import known_devices, match_device

H200 = sorted((SHARED / "h200").glob("*.json.gz")) if (SHARED / "h200").is_dir() else []


@pytest.mark.parametrize("path", H200, ids=[p.name[:40] for p in H200])
def test_gemm_flops_match_the_profiler(path):
    meta = json.loads(path.with_name(path.name.replace(".json.gz", ".meta.json")).read_text())
    want = {r["key"]: r["flops"] for r in meta["key_averages"]
            if r["key"] in ("aten::mm", "aten::addmm", "aten::bmm") and r.get("flops")}
    if not want:
        pytest.skip("recorded without with_flops")
    rep = flops_analysis(path)
    got = dict(rep.calls.filter(pl.col("op").is_in(list(want))).group_by("op").agg(pl.col("flops").sum()).iter_rows())
    for op, flops in want.items():
        assert got.get(op, 0) == pytest.approx(flops, rel=0.01), op


# -- each formula against torch.utils.flop_counter, through a real CPU profiler trace ---------

try:
    import torch
    F = torch.nn.functional
except ImportError:  # torch is a test dependency; without it these cases are skipped
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed (pip install torch==2.13.0)")

CASES = {} if torch is None else {
    "mm": lambda: torch.mm(torch.randn(33, 17), torch.randn(17, 9)),
    "addmm": lambda: torch.addmm(torch.randn(9), torch.randn(33, 17), torch.randn(17, 9)),
    "bmm": lambda: torch.bmm(torch.randn(4, 33, 17), torch.randn(4, 17, 9)),
    "baddbmm": lambda: torch.baddbmm(torch.randn(4, 33, 9), torch.randn(4, 33, 17), torch.randn(4, 17, 9)),
    "linear": lambda: F.linear(torch.randn(5, 6, 7), torch.randn(3, 7), torch.randn(3)),
    "conv2d": lambda: F.conv2d(torch.randn(2, 4, 17, 15), torch.randn(8, 4, 3, 5), stride=(2, 1), padding=(1, 2)),
    "conv2d_groups_dilation": lambda: F.conv2d(torch.randn(2, 6, 20, 20), torch.randn(9, 2, 3, 3), groups=3,
                                               dilation=2, padding=1),
    "conv1d": lambda: F.conv1d(torch.randn(3, 4, 50), torch.randn(6, 4, 5), stride=3),
    "conv3d": lambda: F.conv3d(torch.randn(1, 2, 6, 7, 8), torch.randn(4, 2, 3, 3, 3), padding=1),
    "conv_transpose2d": lambda: F.conv_transpose2d(torch.randn(2, 4, 9, 9), torch.randn(4, 6, 3, 3), stride=2,
                                                   padding=1),
}


def _profile(fn, tmp_path: Path) -> Path:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    out = tmp_path / "cpu.json"
    prof.export_chrome_trace(str(out))
    return out


@needs_torch
@pytest.mark.parametrize("case", sorted(CASES))
def test_formulas_match_torch_flop_counter(case, tmp_path):
    from torch.utils.flop_counter import FlopCounterMode
    fn = CASES[case]
    with FlopCounterMode(display=False) as counter:
        fn()
    want = counter.get_total_flops()
    assert want > 0
    rep = flops_analysis(_profile(fn, tmp_path))
    counted = rep.calls.filter(pl.col("formula") == "formula")
    assert counted.height == 1, counted  # counted once: not again on linear / conv2d / convolution
    assert int(counted["flops"][0]) == want


@needs_torch
@pytest.mark.parametrize("shape", [(2, 4, 32, 16, 32), (1, 8, 7, 64, 19)])
def test_attention_formula_matches_flop_counter(shape):
    from torch.utils.flop_counter import sdpa_flop_count
    b, h, lq, e, s = shape
    q, k = [b, h, lq, e], [b, h, s, e]
    want = sdpa_flop_count(torch.Size(q), torch.Size(k), torch.Size(k))
    for name, causal_i in (("aten::_scaled_dot_product_efficient_attention", 6),
                           ("aten::_scaled_dot_product_flash_attention", 4)):
        conc = [""] * 9
        call = OpCall(name, [q, k, k], ["float", "float", "float"], conc)
        assert lookup(name)(call)[0] == want
        conc[causal_i] = "True"
        causal = lookup(name)(OpCall(name, [q, k, k], ["float"] * 3, conc))[0]
        assert causal == (want // 2 if lq == s else want)


def test_registry_is_open_to_extension(tmp_path):
    from nongemm_trace.analyses.flops.formulas import formula

    @formula("aten::my_custom_gemm")
    def _(call):
        return 42, 7

    try:
        assert lookup("aten::my_custom_gemm")(OpCall("aten::my_custom_gemm", [], [], [])) == (42, 7)
    finally:
        FORMULAS.pop("aten::my_custom_gemm")


# -- devices ------------------------------------------------------------------------------

@pytest.mark.parametrize("name,props,spec", [
    ("H200", {"name": "NVIDIA H200"}, "H200"),
    ("H100", {"name": "NVIDIA H100 80GB HBM3"}, "H100-SXM"),
    ("A100 alias", {"name": "NVIDIA A100-PG509-200"}, "A100-40GB"),
    ("A100 80", {"name": "NVIDIA A100-SXM4-80GB"}, "A100-80GB"),
    ("V100", {"name": "Tesla V100-SXM2-32GB"}, "V100-SXM2"),
    ("B200", {"name": "NVIDIA B200"}, "B200"),
    ("MI300X", {"name": "AMD Instinct MI300X"}, "MI300X"),
    ("MI250 generic name", {"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0, "numSms": 104},
     "MI250-GCD"),
    ("L4", {"name": "NVIDIA L4"}, "L4"), ("L40S", {"name": "NVIDIA L40S"}, "L40S"), ("T4", {"name": "Tesla T4"}, "T4"),
    ("H100 PCIe", {"name": "NVIDIA H100 PCIe"}, "H100-PCIe"),
])
def test_device_matching(name, props, spec):
    assert match_device(props).name == spec


def test_device_spec_override_and_unknown(tmp_path):
    assert "MI250X-GCD" in known_devices()
    assert match_device({"name": "AMD Radeon Graphics", "numSms": 64}) is None
    f = tmp_path / "mine.toml"
    f.write_text('[devices.MyGPU]\nfp32 = 10.0\nbf16 = 100.0\nmemory_tbps = 1.0\n')
    spec = match_device({"name": "whatever"}, str(f))
    assert spec.name == "MyGPU" and spec.peak_flops("bf16") == 100e12
    assert match_device(None, "H200").memory_tbps == 4.8


# -- the analysis on real traces -----------------------------------------------------------

def test_flop_share_versus_time_share_and_roofline():
    rep = flops_analysis(shared("h200", "llama_1b_fp8dyn_bs1_s2048__eager.json.gz"))
    cl = {r["class"]: r for r in rep.classes.iter_rows(named=True)}
    assert cl["GEMM"]["flop_share"] > 0.99 and cl["non-GEMM"]["time_share"] > 0.6  # the paper's point
    mm = rep.ops.filter(pl.col("op") == "aten::_scaled_mm").row(0, named=True)
    assert mm["precision"] == "fp8" and mm["bound"] == "compute" and 10 < mm["roofline_pct"] <= 100
    assert rep.device.name == "H200"


def test_fits_and_equal_flops_groups():
    rep = flops_analysis(shared("h200", "resnet50_fp32_bs8__eager.json.gz"))
    f = rep.fits
    assert f["distinct_shapes"] >= 10 and f["test_shapes"] >= 2
    assert set(f["models"]) == {"linear", "flops_proportional", "alpha_flops"}
    for m in f["models"].values():
        assert 0 <= m["mape"] < 5
    assert 0 <= f["models"]["alpha_flops"]["beta"] <= 1
    assert rep.equal_flops and rep.equal_flops[0]["spread"] >= 1.0
    assert all(g["kernels"] for g in rep.equal_flops)


def test_ops_without_formula_are_listed():
    rep = flops_analysis(shared("h200", "bert_base_train_bs8_s128__eager.json.gz"))
    assert rep.no_formula.height > 0  # _foreach_* ops whose tensor lists carry no shapes
    assert any(w.code == "no_formula" for w in rep.warnings)


def test_cli_json_and_figures(tmp_path, capsys):
    path = shared("h200", "bert_base_fp32_bs8_s128__eager.json.gz")
    roof, shares = tmp_path / "roof.png", tmp_path / "shares.svg"
    assert main(["flops", str(path), "--format", "json", "--roofline", str(roof), "--shares-plot", str(shares)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d) >= {"ops", "classes", "fits", "device", "warnings"}
    op = d["ops"][0]
    assert set(op) >= {"op", "category", "calls", "flops", "bytes", "self_gpu_time_us", "achieved_tflops",
                       "achieved_tbps"}
    assert d["device"]["name"] == "H200"
    assert roof.stat().st_size > 10_000 and shares.stat().st_size > 5_000
    assert main(["flops", str(path), "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("op,category")
    assert main(["flops", str(path)]) == 0
    assert "FLOP share vs GPU-time share" in capsys.readouterr().out


def _every_shared_trace() -> list[Path]:
    import golden

    return golden.shared_traces() if SHARED.is_dir() else []


@pytest.mark.parametrize("path", _every_shared_trace(), ids=lambda p: p.name[:50])
def test_flops_reads_the_categories_of_analyze(path):
    """One classified table for every command: flops's category times are analyze's, and no
    category with >= 2 % of the time has neither FLOPs nor bytes while a call in it has a formula
    or an estimate (a call's numbers count in the category that holds its time)."""
    from nongemm_trace.pipeline.analysis import Analysis

    a = Analysis(path)
    rep, fr = a.report(AnalysisOptions(metric="gpu")), flops_analysis(a)
    if rep.kernels.height == 0:  # no GPU activity (CPU only, another accelerator's events)
        return
    ours = {c: t for c, t in rep.categories.select("category", "time_ns").iter_rows() if t}
    theirs = {c: t for c, t in fr.categories.select("category", "time_ns").iter_rows() if t}
    assert theirs == ours
    total = sum(ours.values())
    for r in fr.categories.filter((pl.col("time_ns") >= 0.02 * total) & (pl.col("flops") == 0)
                                  & (pl.col("bytes") == 0)).iter_rows(named=True):
        counted = fr.calls.filter((pl.col("category") == r["category"]) & pl.col("flops").is_not_null())
        assert counted.height == 0, (r["category"], counted.head(3))


def test_a_written_out_norm_counts_its_bytes_in_normalization():
    """The FP8 Llama trace: RMSNorm's pow/mean/rsqrt/mul are normalization in analyze, so their
    bytes are too (they were counted as arithmetic's, leaving normalization 0 bytes beside an
    arithmetic rate near the H200's peak)."""
    fr = flops_analysis(shared("h200", "llama_1b_fp8dyn_bs1_s2048__eager.json.gz"))
    cats = {r["category"]: r for r in fr.categories.iter_rows(named=True)}
    assert cats["normalization"]["bytes"] > 1e9 and cats["normalization"]["flops"] > 0
    assert cats["arithmetic"]["achieved_tbps"] < 0.6 * fr.device.memory_tbps
    mine = fr.calls.filter(pl.col("op").is_in(["aten::pow", "aten::rsqrt"]))
    assert set(mine["category"]) == {"normalization"}

def test_rates_above_the_roof_carry_a_caveat(capsys):
    path = shared("h200", "llama_1b_bf16_bs1_s2048__eager.json.gz")
    over = flops_analysis(path).ops.head(15).filter(pl.col("roofline_pct") > 100)["op"].to_list()
    assert main(["flops", str(path)]) == 0
    note = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("% roof > 100"))
    assert over and all(op in note for op in over[:3])


def test_formulas_run_once_per_call_signature(monkeypatch):
    """A loop repeats its shapes every step: the formulas (Python per parsed call) run once per
    distinct (name, kind, recorded inputs), and every call still gets its row."""
    import nongemm_trace.analyses.flops as flops_mod

    shared()
    parsed = []
    real = OpCall.parse

    def counting(*args):
        parsed.append(args)
        return real(*args)

    monkeypatch.setattr(flops_mod.OpCall, "parse", staticmethod(counting))
    rep = flops_analysis(SHARED / "h200" / "bert_base_train_bs8_s128__eager.json.gz")
    assert len(parsed) == len(set(parsed)) and 0 < len(parsed) < rep.calls.height / 3
