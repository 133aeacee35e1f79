"""Compare traces (fusion, quantization), plots, markdown, regression gates and testing helpers."""

from __future__ import annotations

import json
import re

import pytest
from conftest import SAMPLES, raw_activity_total_ns, raw_events, shared

import nongemm_trace
from nongemm_trace import testing
from nongemm_trace.analyses.compare import _fused_names, compare
from nongemm_trace.cli import main

PAIRS = [("bert_base_fp32_bs8_s128__eager", "bert_base_fp32_bs8_s128__compiled"),
         ("gpt2_fp32_bs8_s128__eager", "gpt2_fp32_bs8_s128__compiled"),
         ("resnet50_fp32_bs8__eager", "resnet50_fp32_bs8__compiled"),
         ("llama_1b_fp16_bs1_s512__eager", "llama_1b_fp16_bs1_s512__compiled"),
         ("llama_1b_bf16_bs1_s2048__eager", "llama_1b_fp8dyn_bs1_s2048__eager")]
GEMM_KERNEL = re.compile(r"gemm|xmma|nvjet|cutlass|Cijk", re.IGNORECASE)


def _raw_gemm_ns(path) -> int:
    from conftest import ns
    return sum(ns(e["dur"]) for e in raw_events(str(path))
               if e.get("ph") == "X" and e.get("cat") == "kernel" and GEMM_KERNEL.search(e["name"])
               and not e["name"].startswith("triton_"))


@pytest.mark.parametrize("base,new", PAIRS, ids=[p[1] for p in PAIRS])
def test_pairs_match_the_files(base, new):
    pb, pn = shared("h200", base + ".json.gz"), shared("h200", new + ".json.gz")
    d = compare([pb, pn]).to_dict()
    assert [t["trace"] for t in d["traces"]] == [str(pb), str(pn)]
    for t, p in zip(d["traces"], (pb, pn)):
        n, total = raw_activity_total_ns(str(p))
        assert t["activities"] == n
        assert round(t["gpu_time_us"] * 1000) == total
        assert t["steps"] == 2
    # per-category arrays: BASE's delta 0 and ratio 1; categories sum to each trace's total
    for c in d["categories"]:
        assert c["delta_us"][0] == 0.0
        assert c["ratio"][0] in (1.0, None) or c["gpu_time_us"][0] == 0
        assert len(c["gpu_time_us"]) == len(c["activities"]) == len(c["ratio"]) == 2
    for i in range(2):
        assert sum(c["gpu_time_us"][i] for c in d["categories"]) == pytest.approx(d["traces"][i]["gpu_time_us"],
                                                                                   abs=0.01)
        assert sum(c["activities"][i] for c in d["categories"]) == d["traces"][i]["activities"]
    # directions of change: the GEMM category moves the way the GEMM-named kernels in the files do
    gemm = next(c for c in d["categories"] if c["category"] == "gemm")
    raw_delta = _raw_gemm_ns(pn) - _raw_gemm_ns(pb)
    if abs(raw_delta) > 0.02 * _raw_gemm_ns(pb):
        assert (gemm["delta_us"][1] > 0) == (raw_delta > 0)


@pytest.mark.parametrize("base,new", PAIRS[:4], ids=[p[1] for p in PAIRS[:4]])
def test_fused_kernels_map_to_the_eager_ops_they_replaced(base, new):
    d = compare([shared("h200", base + ".json.gz"), shared("h200", new + ".json.gz")]).to_dict()
    assert "fusion" in d and "quantization" not in d
    f = d["fusion"]["pairs"][0]
    eager_ops = {o["op"].rsplit("::", 1)[-1] for o in f["ops"]}
    assert f["kernels"]
    for k in f["kernels"]:
        assert k["kernel"].startswith("triton_")
        assert set(k["replaces_eager_ops"]) <= eager_ops
        assert all(any(n in k["kernel"] for n in _fused_names(op)) for op in k["replaces_eager_ops"])
    for o in f["ops"]:
        for kname in o["fused_into"]:
            assert any(n in kname for n in _fused_names(o["op"].rsplit("::", 1)[-1]))
    # a fused kernel took over: the eager op launches nothing any more
    replaced = [o for o in f["ops"] if o["fused_into"]]
    assert replaced and any(o["remaining_activities"] == 0 for o in replaced)
    # non-GEMM work remains after fusion (the paper's point) and is reported
    assert f["non_gemm_time_us"][1] > 0 and 0 < f["non_gemm_share"][1] < 1


def test_known_fusions():
    d = compare([shared("h200", "bert_base_fp32_bs8_s128__eager.json.gz"),
                 shared("h200", "bert_base_fp32_bs8_s128__compiled.json.gz")]).to_dict()
    ops = {o["op"]: o for o in d["fusion"]["pairs"][0]["ops"]}
    assert ops["aten::gelu"]["fused_into"] == ["triton_poi_fused_addmm_gelu_view_7"]
    assert "triton_per_fused_add_addmm_native_layer_norm_view_6" in ops["aten::native_layer_norm"]["fused_into"]
    assert ops["aten::gelu"]["remaining_activities"] == 0


def test_renamed_eager_ops_find_their_fused_kernels():
    """Eager ResNet runs BatchNorm as cudnn_batch_norm and ReLU as clamp_min_; Inductor's kernels
    name them _native_batch_norm_legit_no_training and relu (facts/inductor.toml)."""
    d = compare([shared("h200", "resnet50_fp32_bs8__eager.json.gz"),
                 shared("h200", "resnet50_fp32_bs8__compiled.json.gz")]).to_dict()
    f = d["fusion"]["pairs"][0]
    ops = {o["op"]: o for o in f["ops"]}
    bn, relu = ops["aten::cudnn_batch_norm"]["fused_into"], ops["aten::clamp_min_"]["fused_into"]
    assert bn and all("_native_batch_norm_legit_no_training" in k for k in bn)
    assert relu and all("relu" in k for k in relu)
    assert any("cudnn_batch_norm" in k["replaces_eager_ops"] for k in f["kernels"])


def test_quantization_view():
    d = compare([shared("h200", "llama_1b_bf16_bs1_s2048__eager.json.gz"),
                 shared("h200", "llama_1b_fp8dyn_bs1_s2048__eager.json.gz")], per_step=True).to_dict()
    q = d["quantization"]["pairs"][0]
    assert q["gemm_delta_us"] < 0 < q["qdq_delta_us"]          # faster GEMMs, new qdq work
    assert q["qdq_time_us"][0] == 0
    assert q["net_delta_us"] == pytest.approx(d["traces"][1]["gpu_time_us"] - d["traces"][0]["gpu_time_us"], abs=0.01)
    assert q["non_gemm_share"][1] > q["non_gemm_share"][0]
    assert "GEMM time fell" in q["summary"] and "quantize/dequantize" in q["summary"]
    assert d["per_step"] and d["traces"][0]["activities"] == 367  # 734 activities over 2 steps


def test_different_devices_warn():
    d = compare([SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz",
                 SAMPLES / "h100__gaunernst_bert-small-uncased__1016001.json.gz"]).to_dict()
    assert any(w["code"] == "different_device" for w in d["warnings"])


def test_compare_cli_formats_and_plot(tmp_path, capsys):
    a, b = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz", SAMPLES / "gpt2_fp32_bs8_s128__compiled.json.gz"
    assert main(["compare", str(a), str(b), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d) >= {"traces", "categories", "warnings"}
    assert main(["compare", str(a), str(b), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("### Comparison") and "| category |" in md
    assert main(["compare", str(a), str(b)]) == 0
    assert "Categories" in capsys.readouterr().out
    assert main(["compare", str(a)]) == 2
    for ext in ("png", "svg"):
        out = tmp_path / f"bars.{ext}"
        assert main(["plot", str(a), str(b), str(a), "-o", str(out), "--per-step"]) == 0
        assert out.stat().st_size > 5_000
    assert main(["analyze", str(a), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert "| class | time (us) | share |" in md and "metric **gpu**" in md


def test_check_passes_and_fails(capsys):
    bf16 = shared("h200", "llama_1b_bf16_bs1_s2048__eager.json.gz")
    fp8 = shared("h200", "llama_1b_fp8dyn_bs1_s2048__eager.json.gz")
    assert main(["check", str(bf16), "--max-share", "non-GEMM=0.6", "--max-category-share", "memory=25%"]) == 0
    assert "ok:" in capsys.readouterr().out
    assert main(["check", str(fp8), "--max-share", "non-GEMM=0.6"]) == 1
    assert "FAIL max-share non-GEMM" in capsys.readouterr().out
    assert main(["check", str(fp8), "--baseline", str(bf16), "--max-regression", "10%"]) == 1
    assert "GPU time per step rose" in capsys.readouterr().out
    assert main(["check", str(bf16), "--baseline", str(fp8), "--max-regression", "0%"]) == 0
    capsys.readouterr()
    assert main(["check", str(fp8), "--baseline", str(bf16), "--max-category-regression", "qdq=50%",
                 "--format", "json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert not d["ok"] and d["violations"][0]["limit"] == "max-category-regression qdq"
    assert main(["check", str(fp8), "--max-regression", "10%"]) == 2  # needs --baseline
    assert main(["check", str(fp8), "--max-share", "non-GEMM=lots"]) == 2


@pytest.mark.parametrize("args,says", [
    (["--max-share", "nonGEMM=0.1"], "unknown name 'nonGEMM'"),
    (["--max-category-share", "memroy=0.2"], "unknown name 'memroy'"),
    (["--max-category-share", "non-GEMM=0.2"], "unknown name 'non-GEMM'"),  # a class, not a category
    (["--max-share", "non-GEMM=45"], "not a share between 0 and 1"),
    ([], "no limit to check"),
])
def test_a_typo_never_turns_a_gate_off(args, says, capsys):
    """A 47 % non-GEMM trace: a misspelt name, a share limit above 1 or no limit at all is exit 2
    with one line, never 'ok'."""
    fp8 = shared("h200", "llama_1b_fp8dyn_bs1_s2048__eager.json.gz")
    assert main(["check", str(fp8), *args]) == 2
    cap = capsys.readouterr()
    assert says in cap.err and "ok" not in cap.out and len(cap.err.strip().splitlines()) == 1


def test_share_of_an_unknown_name_raises():
    from nongemm_trace import TraceError
    from nongemm_trace.testing import assert_share_at_most

    path = shared("h200", "llama_1b_fp8dyn_bs1_s2048__eager.json.gz")
    rep = nongemm_trace.analyze(path)
    assert rep.share("roi") == 0.0  # a category with no time in this trace
    with pytest.raises(TraceError, match="unknown class or category 'nonGEMM'"):
        rep.share("nonGEMM")
    with pytest.raises(TraceError, match="unknown name"):
        assert_share_at_most(path, "nonGEMM", 0.1)


def test_testing_helpers():
    bf16 = shared("h200", "llama_1b_bf16_bs1_s2048__eager.json.gz")
    fp8 = shared("h200", "llama_1b_fp8dyn_bs1_s2048__eager.json.gz")
    rep = testing.assert_share_at_most(bf16, "non-GEMM", 0.6)
    assert rep.share("non-GEMM") < 0.6
    with pytest.raises(AssertionError, match="non-GEMM is 70.8 % of GPU time"):
        testing.assert_share_at_most(fp8, "non-GEMM", 0.45)
    testing.assert_share_at_least(fp8, "qdq", 0.2)
    with pytest.raises(AssertionError):
        testing.assert_share_at_least(bf16, "qdq", 0.01)
    testing.assert_category_share_at_most(bf16, "memory", 0.25)
    testing.assert_unclassified_at_most(bf16)
    testing.assert_no_regression(bf16, baseline=fp8, max_regression=0.0)
    with pytest.raises(AssertionError, match="rose"):
        testing.assert_no_regression(fp8, baseline=bf16, max_regression=0.10)
    with pytest.raises(AssertionError, match="qdq"):
        testing.assert_no_regression(fp8, baseline=bf16, max_regression=1.0, categories={"qdq": 0.1})
    testing.assert_checks(bf16, max_share={"GEMM": 0.9})


def test_horizon_table_command_on_sample_zoo_traces():
    """bench/horizon_table.py, the command that rebuilds docs/horizon-h200.md's table."""
    import subprocess
    import sys

    from conftest import REPO
    r = subprocess.run([sys.executable, str(REPO / "bench" / "horizon_table.py"), str(SAMPLES / "zoo")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 5
    seg = next(line for line in rows if line.startswith("| segformer_b0 | bs1_fp16_compiled"))
    assert "n/a (27 % unclassified)" in seg and "-> " in seg  # no paper metric; fusion effect against the eager row
    doc = (REPO / "docs" / "horizon-h200.md").read_text()
    table = [line for line in doc.splitlines() if line.startswith("| ") and "bs1_fp16_eager" in line]
    assert len({line.split("|")[1].strip() for line in table}) >= 15
    for fig in ("horizon_eager_bs1.png", "horizon_fusion.png", "horizon_fp8.png"):
        assert (REPO / "docs" / fig).stat().st_size > 10_000


def test_different_torch_versions_warn(tmp_path):
    import gzip
    src = SAMPLES / "zoo" / "bert_base__bs1_fp16_eager.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    assert doc["nongemm_run"]["torch"]
    doc["nongemm_run"]["torch"] = "9.9.9"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(doc))
    d = compare([src, other]).to_dict()
    assert any(w["code"] == "different_torch" and "9.9.9" in w["message"] for w in d["warnings"])
    assert not any(w["code"] == "different_torch" for w in compare([src, src]).to_dict()["warnings"])
