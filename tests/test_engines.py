"""TensorRT engine profiles and ONNX Runtime profiles: read through the format registry, every
layer or node one activity, totals equal to the profiles' own sums, categories from the ONNX
nodes and layer types, and the fusion views."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import polars as pl
import pytest
from conftest import shared

import nongemm_trace
from nongemm_trace import Analysis, TraceError, cli, schema
from nongemm_trace.analyses.compare import compare
from nongemm_trace.load import load_trace
from nongemm_trace.load.engines import layer_nodes, node_op_types

TRT = [
    ("trex__examples__pytorch__resnet__A100__fp32__resnet.onnx.engine.profile.json", False),
    ("trex__examples__pytorch__resnet__A100__fp16__resnet.onnx.engine.profile.json", False),
    ("trex__examples__pytorch__resnet__A100__qat__resnet-qat.onnx.engine.profile.json", True),
    ("trex__tests__inputs__mobilenet.qat.onnx.engine.profile.json", True),
    ("trex__notebooks__profile.json", True),
]
ORT_SHARED = "ort__vscode-onnxvalidate__onnxruntime_profile__2019-06-28_04-56-43.json"

#: the paper's rule, written out here on its own: a layer is GEMM when its TensorRT type is a
#: convolution or matrix product, or when its name lists a GEMM node (not a reformat before one)
_GEMM_TYPE = re.compile(r"Convolution|Deconvolution|Gemm|MatrixMultiply|FullyConnected")
_GEMM_NODE = re.compile(r"(?:^|[\s/+(\[])(?:Conv|ConvTranspose|MatMul|Gemm)(?:_\d+)*(?=$|[\s+),\]]|\.\.\.)")


def _paper_gemm_share(profile: list, layers: dict) -> float:
    total = gemm = 0
    for rec in profile[1:]:
        t = int(round(float(rec["averageMs"]) * 1e6))  # per inference, in integer ns as the report keeps it
        total += t
        kind = (layers.get(rec["name"]) or {}).get("LayerType", "")
        name = rec["name"]
        if _GEMM_TYPE.search(kind) or (not name.startswith("Reformatting CopyNode") and _GEMM_NODE.search(name)):
            gemm += t
    return gemm / total


def _info(profile_path: Path) -> dict:
    stem = profile_path.name[: -len("profile.json")]
    for cand in (stem + "graph.json", stem + "layer_info.json"):
        p = profile_path.with_name(cand)
        if p.exists():
            doc = json.loads(p.read_text())
            return {(x if isinstance(x, str) else x["Name"]): ({} if isinstance(x, str) else x) for x in doc["Layers"]}
    return {}


@pytest.mark.parametrize("name,qat", TRT, ids=[n[:40] for n, _ in TRT])
def test_tensorrt_profiles(name, qat):
    path = shared("external2", "tensorrt", name)
    profile = json.loads(path.read_text())
    trace = schema.validate(load_trace(path))
    assert trace.source_format == "tensorrt" and trace.activities.height == len(profile) - 1
    rep = nongemm_trace.analyze(path)
    # every layer's mean time per inference, summed: the profile's own total, to the nanosecond
    want_ns = sum(int(round(float(r["averageMs"]) * 1e6)) for r in profile[1:])
    assert rep.gpu_time_ns == want_ns == int(rep.categories["time_ns"].sum())
    assert abs(rep.gpu_time_ns / 1e6 - sum(float(r["averageMs"]) for r in profile[1:])) < 1e-3
    assert rep.metric == "layer" and rep.steps.height == 0
    assert (rep.share("qdq") > 0) == qat
    assert rep.share("unclassified") == 0.0
    assert rep.share("GEMM") == pytest.approx(_paper_gemm_share(profile, _info(path)), abs=1e-6)
    d = rep.to_dict()
    assert d["engine"]["gemm_share_paper_rule"] == pytest.approx(rep.share("GEMM"), abs=1e-6)
    assert sum(c["layer_time_us"] for c in d["categories"]) == pytest.approx(want_ns / 1000, abs=0.01)
    if qat:  # the non-GEMM ops folded into GEMM layers include the weights' quantization
        assert any(f["op"] == "QuantizeLinear" for f in d["engine"]["folded_into_gemm_layers"])


def test_tensorrt_median_under_ispass25_and_the_layer_info_rules(tmp_path):
    path = shared("external2", "tensorrt", "trex__tests__inputs__mobilenet.qat.onnx.engine.profile.json")
    profile = json.loads(path.read_text())
    rep = nongemm_trace.analyze(path, taxonomy="ispass25")
    assert rep.gpu_time_ns == sum(int(round(float(r["medianMs"]) * 1e6)) for r in profile[1:])
    # apart from its layer information, the profile is classified from the names, and says so
    alone = tmp_path / "engine.profile.json"
    shutil.copy(path, alone)
    bare = nongemm_trace.analyze(alone)
    assert any(w.code == "no_layer_info" for w in bare.warnings)
    assert bare.share("GEMM") == pytest.approx(nongemm_trace.analyze(path).share("GEMM"), abs=0.02)
    info = shared("external2", "tensorrt", "trex__tests__inputs__mobilenet.qat.onnx.engine.graph.json")
    given = Analysis(alone, layer_info=info).report()
    assert not any(w.code == "no_layer_info" for w in given.warnings)
    assert given.to_dict()["categories"] == nongemm_trace.analyze(path).to_dict()["categories"]
    # the layer-information file alone is named, not read
    with pytest.raises(TraceError, match="layer-information file"):
        load_trace(info)


def test_tensorrt_names_only_layer_info_warns():
    path = shared("external2", "tensorrt", "trex__notebooks__profile.json")
    rep = nongemm_trace.analyze(path)
    assert [w.code for w in rep.warnings if w.code == "layer_names_only"] == ["layer_names_only"]
    cats = dict(rep.categories.select("category", "share").iter_rows())
    assert cats.get("gemm", 0) > 0.3 and cats.get("qdq", 0) > 0


@pytest.mark.parametrize("name,want", [
    ("conv1.weight + QuantizeLinear_7 + Conv_9", ["QuantizeLinear", "Conv"]),
    ("features.0.0.weight + QuantizeLinear_8 + Conv_12 + PWN(Clip_16)", ["QuantizeLinear", "Conv", "Clip"]),
    ("{ForeignNode[/model/layers.0/MatMul.../model/norm/Add_1]}", ["MatMul", "Add"]),
    ("Reformatting CopyNode for Input Tensor 0 to Conv_0 + Relu_1", []),
    ("/backbone/conv1/_input_quantizer/QuantizeLinear_clone_1", ["QuantizeLinear"]),
    ("PWN(PWN((Unnamed Layer* 109) [Constant] + (Unnamed Layer* 110) [ElementWise]), Sigmoid_3)", ["Sigmoid"]),
    ("QuantLinearNode__1234", ["QuantLinearNode"]),
])
def test_layer_names_give_their_onnx_nodes(name, want):
    nodes, _ = layer_nodes(name)
    assert node_op_types(nodes) == want


def test_onnxruntime_shared_profile():
    path = shared("external2", "onnxruntime", ORT_SHARED)
    events = json.loads(path.read_text())
    trace = schema.validate(load_trace(path))
    assert trace.source_format == "onnxruntime"
    rep = nongemm_trace.analyze(path)
    kernel_time = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    assert rep.gpu_activities == len(kernel_time)
    assert rep.gpu_time_ns == sum(int(e["dur"]) * 1000 for e in kernel_time)
    assert rep.metric == "node" and rep.steps.height == sum(1 for e in events if e.get("name") == "model_run")
    cats = dict(rep.kernels.select("onnx_ops", "category").unique().iter_rows())
    assert cats["Conv"] == "gemm" and cats["MatMul"] == "gemm" and cats["MaxPool"] == "pooling"
    assert cats["Relu"] == "activation" and cats["Reshape"] == "memory" and cats["Add"] == "arithmetic"


def _ort_profiles(tmp_path):
    """A small CNN + MLP exported from torch (CPU) and profiled by onnxruntime at two levels."""
    torch = pytest.importorskip("torch")
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.lin = torch.nn.Linear(8 * 8 * 8, 16)
            self.norm = torch.nn.LayerNorm(16)

        def forward(self, x):
            y = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2).flatten(1)
            return torch.softmax(self.norm(torch.nn.functional.gelu(self.lin(y)) + 1.0), -1)

    x = torch.randn(2, 3, 16, 16)
    model = tmp_path / "net.onnx"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Net().eval(), (x,), str(model), dynamo=False, input_names=["x"])
    out = {}
    for label, level in (("basic", ort.GraphOptimizationLevel.ORT_DISABLE_ALL),
                         ("all", ort.GraphOptimizationLevel.ORT_ENABLE_ALL)):
        so = ort.SessionOptions()
        so.enable_profiling = True
        so.graph_optimization_level = level
        so.profile_file_prefix = str(tmp_path / f"prof_{label}")
        sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
        for _ in range(3):
            sess.run(None, {"x": x.numpy()})
        out[label] = Path(sess.end_profiling())
    return out


def test_onnxruntime_profiles_of_a_torch_export(tmp_path):
    profiles = _ort_profiles(tmp_path)
    for path in profiles.values():
        events = json.loads(path.read_text())
        nodes = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
        rep = nongemm_trace.analyze(path)
        assert rep.gpu_activities == len(nodes) and rep.steps.height == 3
        assert rep.gpu_time_ns == sum(int(e["dur"]) * 1000 for e in nodes)
        per_op = rep.kernels.group_by("onnx_ops").agg(pl.col("dur_ns").sum())
        want = {}
        for e in nodes:
            want[e["args"]["op_name"]] = want.get(e["args"]["op_name"], 0) + int(e["dur"]) * 1000
        assert dict(per_op.iter_rows()) == want
        cats = dict(rep.kernels.select("onnx_ops", "category").unique().iter_rows())
        assert cats["Conv"] == "gemm" and cats["Gemm"] == "gemm" and cats["Softmax"] == "logit"
        assert cats["LayerNormalization"] == "normalization" and rep.share("unclassified") == 0.0
    # the fusion the higher level made: the basic graph's Relu node is folded into its Conv
    view = compare([profiles["basic"], profiles["all"]]).to_dict()["engine_fusion"][0]
    gone = {r["op"] for r in view["op_types"] if r["base_nodes"] > 0 and r["nodes"] == 0}
    assert "Relu" in gone


def test_compare_across_stacks_warns_that_metrics_differ(capsys):
    torch_trace = Path(__file__).resolve().parent.parent / "sample_traces" / "bert_base_fp32_bs8_s128__eager.json.gz"
    trt = shared("external2", "tensorrt", TRT[0][0])
    ort_path = shared("external2", "onnxruntime", ORT_SHARED)
    assert cli.main(["compare", str(torch_trace), str(ort_path), str(trt), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert any(w["code"] == "metrics_differ" for w in d["warnings"])
    assert {c["class"] for c in d["classes"]} >= {"GEMM", "non-GEMM"}


def test_onnxruntime_collector_writes_profile_and_summary(tmp_path):
    profiles = _ort_profiles(tmp_path)  # the exported model lies next to them
    from nongemm_trace.collectors.onnxruntime import main, profile_session, random_inputs

    model = tmp_path / "net.onnx"
    path = profile_session(model, random_inputs(model), tmp_path / "out", "net", runs=4, warmup=1)
    assert path.name == "net.ort.json" and profiles
    summary = json.loads((tmp_path / "out" / "net.nongemm.json").read_text())
    assert summary["metric"] == "node" and len(summary["steps"]) == 4
    assert main([str(model), "-o", str(tmp_path / "cli"), "--runs", "2", "--optimization", "basic"]) == 0
    assert nongemm_trace.analyze(tmp_path / "cli" / "net.ort.json").steps.height == 2


def test_tensorrt_collector_without_trtexec_says_so(tmp_path, monkeypatch, capsys):
    from nongemm_trace.collectors import tensorrt

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("TRTEXEC", raising=False)
    assert tensorrt.main([str(tmp_path / "m.onnx"), "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "trtexec not found" in err[0]
    cmd = tensorrt.command("trtexec", "m.onnx", tmp_path, "net", ["--int8"], [])
    assert f"--exportProfile={tmp_path / 'net.profile.json'}" in cmd and "--profilingVerbosity=detailed" in cmd
    # what it writes is found as a pair by name
    from nongemm_trace.load.tensorrt import find_layer_info

    (tmp_path / "net.profile.json").write_text("[]")
    (tmp_path / "net.layer_info.json").write_text("{}")
    assert find_layer_info(tmp_path / "net.profile.json") == tmp_path / "net.layer_info.json"


def test_tensorrt_profiles_of_other_versions(tmp_path):
    """Edge cases of other trtexec versions (hand-made: no such files are in shared/): records with
    only timeMs (the total over `count` runs), an empty profile, a huge time."""
    old = tmp_path / "old.profile.json"
    old.write_text(json.dumps([{"count": 10}, {"name": "Conv_0 + Relu_1", "timeMs": 5.0, "percentage": 50},
                               {"name": "Softmax_3", "timeMs": 5.0, "percentage": 50}]))
    rep = nongemm_trace.analyze(old)
    assert rep.gpu_time_ns == 1_000_000  # 10 ms over 10 runs: 1 ms per inference
    assert dict(rep.categories.select("category", "time_ns").iter_rows())["logit"] == 500_000
    empty = tmp_path / "empty.profile.json"
    empty.write_text('[{"count": 0}]')
    assert [w.code for w in nongemm_trace.analyze(empty).warnings if w.code == "no_layers"] == ["no_layers"]
    huge = tmp_path / "huge.profile.json"
    huge.write_text('[{"count": 1}, {"name": "Conv_1", "averageMs": 1e300}, {"name": "Relu_2", "averageMs": 0.5}]')
    rep = nongemm_trace.analyze(huge)
    assert rep.gpu_activities == 1 and any(w.code == "bad_layer_time" for w in rep.warnings)
    assert cli.main(["analyze", str(huge), "--format", "json"]) == 0


def test_myelin_regions_are_gemm_when_their_contents_show_one(tmp_path):
    """A Myelin region that fused a transformer block is GEMM when its layer information shows a
    GEMM inside (hand-made after a Stable-Diffusion UNet engine's shape: no such engine is in
    shared/): an input tensor the exporter named after a MatMul that reads it, or a GEMM tactic;
    a region whose inputs and tactic show none stays non-GEMM, and a reformat layer whose input
    feeds a MatMul is no region (its input's reader is outside it)."""
    block = "{ForeignNode[/down_blocks.0/attentions.0/Transpose.../down_blocks.0/attentions.0/Add]}"
    tactic_block = "{ForeignNode[/up_blocks.1/attentions.2/Transpose.../up_blocks.1/attentions.2/Reshape_1]}"
    plain = "{ForeignNode[/mid/Transpose.../mid/Reshape]}"
    reformat = "Reformatting CopyNode for Input Tensor 0 to /mid/MatMul"
    prof = tmp_path / "unet.profile.json"
    prof.write_text(json.dumps([{"count": 1}] + [{"name": n, "averageMs": ms} for n, ms in
                                                  ((block, 2.0), (tactic_block, 1.0), (plain, 0.5), (reformat, 0.25))]))
    tensor = lambda name: {"Name": name, "Location": "Device", "Dimensions": [2, 4096, 320]}  # noqa: E731
    (tmp_path / "unet.graph.json").write_text(json.dumps({"Layers": [
        {"Name": block, "LayerType": "Myelin", "Inputs": [tensor("onnx::Transpose_812"), tensor("onnx::MatMul_9031")],
         "TacticName": "__myl_TranMulAdd_0x1"},
        {"Name": tactic_block, "LayerType": "Myelin", "Inputs": [tensor("input.84")],
         "TacticName": "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"},
        {"Name": plain, "LayerType": "Myelin", "Inputs": [tensor("onnx::Transpose_77")],
         "TacticName": "__myl_Tran_0x2"},
        {"Name": reformat, "LayerType": "Reformat", "Inputs": [tensor("onnx::MatMul_5")]},
    ]}))
    k = nongemm_trace.analyze(prof).kernels
    got = {r["name"]: (r["category"], r["rule"]) for r in k.iter_rows(named=True)}
    assert got[block] == ("gemm", "region_inputs")
    assert got[tactic_block] == ("gemm", "region_tactic")
    assert got[plain][0] != "gemm" and got[reformat] == ("memory", "layer_type")

def test_headers_name_the_stack_time_not_gpu_time(capsys):
    from nongemm_trace.cli import main
    ort = shared("external2", "onnxruntime", ORT_SHARED)
    fp32 = shared("external2", "tensorrt",
                  "trex__examples__pytorch__resnet__A100__fp32__resnet.onnx.engine.profile.json")
    fp16 = shared("external2", "tensorrt",
                  "trex__examples__pytorch__resnet__A100__fp16__resnet.onnx.engine.profile.json")
    assert main(["analyze", str(ort)]) == 0
    text = capsys.readouterr().out
    assert "(of node time;" in text and "GPU time" not in text
    assert main(["compare", str(fp32), str(fp16)]) == 0
    text = capsys.readouterr().out
    assert "layer time in us" in text and "GPU time" not in text
    assert "Fused ONNX op types, #1 against BASE" in text and "Conv,Add,Relu" in text  # the engine_fusion view
    from nongemm_trace.analyses.compare import compare
    from nongemm_trace.report.html import compare_section
    html = compare_section(compare([fp32, fp16]))
    assert "layer time in us" in html and "GPU time" not in html
