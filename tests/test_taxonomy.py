"""Taxonomies: each rule on a real name, the paper's taxonomy reproduced by an independent script,
qdq dataflow, Inductor fusion, levels, extension (completeness on every real trace: test_taxonomy_corpus.py)."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from functools import lru_cache

import polars as pl
import pytest
from conftest import LAUNCH_CATS, kineto_traces, ns, raw_events, shared

import nongemm_trace
from nongemm_trace.classify.rules import fused_category, fused_ops, kernel_category, op_category
from nongemm_trace.classify.taxonomy import extend_taxonomy, load_taxonomy
from nongemm_trace.errors import TraceError

TAX = load_taxonomy("default")


# -- every kernel-name rule on a real kernel name ---------------------------------------------

KERNEL_CASES = [  # (substring that picks real kernel names in the shared traces, expected category)
    ("sm80_xmma_gemm", "gemm"),
    ("nvjet_sm90", "gemm"),
    ("cutlass::Kernel2", "gemm"),
    ("volta_sgemm", "gemm"),
    ("implicit_gemm", "gemm"),
    ("Cijk_", "gemm"),
    ("splitKreduce", "gemm"),
    ("bmm_MxE4m3", "gemm"),
    ("bmm_Bfloat16", "gemm"),
    ("fmha_cutlassF", "attention"),
    ("flash_fwd", "attention"),
    ("sdpa_sm90_flash", "attention"),
    ("attn_fwd", "attention"),
    ("ncclDevKernel_AllReduce", "communication"),
    ("multimem_all_reduce", "communication"),
    ("reshape_and_cache", "memory"),
    ("scaled_fp8_quant", "qdq"),
    ("float8_copy_kernel", "qdq"),
    ("layer_norm", "normalization"),
    ("GammaBeta", "normalization"),
    ("bn_fw", "normalization"),
    ("cunn_SoftMaxForward", "logit"),
    ("GeluCUDAKernelImpl", "activation"),
    ("silu_kernel", "activation"),
    ("roi_align_forward", "roi"),
    ("nms_kernel", "roi"),
    ("max_pool_forward", "pooling"),
    ("upsample_nearest2d", "interpolation"),
    ("embedding_backward", "embedding"),
    ("rotary_embedding", "arithmetic"),
    ("fused_dropout", "other"),
    ("direct_copy_kernel", "memory"),
    ("CatArrayBatchedCopy", "memory"),
    ("CUDAFunctor_add", "arithmetic"),
    ("AdamFunctor", "arithmetic"),
    ("BinaryOpListAlphaFunctor", "arithmetic"),
    ("split_embedding", "embedding"),
    ("unrolled_elementwise_kernel<at::native::CUDAFunctor_add", "arithmetic"),
    ("triton__0d1d", "arithmetic"),
    ("spin_kernel", "other"),
]


@lru_cache(maxsize=1)
def _all_kernel_names() -> tuple[str, ...]:
    names = set()
    for path in kineto_traces():
        names |= {e["name"]
                  for e in raw_events(str(path)) if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel")}
    return tuple(sorted(names))


def _kernel_names(trace: str) -> list[str]:
    sub, name = trace.rsplit("/", 1)
    path = shared(*sub.split("/"), name + ".json.gz")
    return sorted({e["name"] for e in raw_events(str(path))
                   if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel")})


@pytest.mark.parametrize("needle,expected", KERNEL_CASES, ids=[c[0] for c in KERNEL_CASES])
def test_kernel_rule_on_real_name(needle, expected):
    shared("h200")
    names = [n for n in _all_kernel_names() if needle in n]
    assert names, f"no kernel containing {needle!r} in the shared traces"
    for n in names:
        assert kernel_category(TAX, n)[0] == expected, n


# -- Inductor fusion --------------------------------------------------------------------------

FUSION_CASES = [
    ("triton_red_fused__to_copy_add_embedding_mean_mul_pow_rsqrt_0", "normalization",
     ["_to_copy", "add", "embedding", "mean", "mul", "pow", "rsqrt"]),
    ("triton_poi_fused__unsafe_view_mul_silu_6", "activation", ["_unsafe_view", "mul", "silu"]),
    ("triton_poi_fused_addmm_gelu_view_7", "activation", ["addmm", "gelu", "view"]),
    ("triton_poi_fused_addmm_tanh_8", "activation", ["addmm", "tanh"]),
    ("triton_per_fused__safe_softmax_add_arange_exp_expand_ge_prepare_softmax_online_scalar_tensor_sub_unsqueeze_view_0",
     "logit", None),
    ("triton_poi_fused__unsafe_view_add_3", "arithmetic", ["_unsafe_view", "add"]),
]


@pytest.mark.parametrize("name,expected,ops", FUSION_CASES, ids=[c[0][:40] for c in FUSION_CASES])
def test_inductor_fusion_rules(name, expected, ops):
    assert op_category(TAX, name)[0] == expected
    assert kernel_category(TAX, name)[0] == expected
    if ops is not None:
        body = re.match(r"triton_\w+?_fused_(.*)_\d+$", name).group(1)
        assert fused_ops(TAX, body) == ops


def test_fused_addmm_epilogue_is_arithmetic_and_templates_are_gemm():
    # real names: the bias epilogue of a decomposed addmm, and pointwise kernels that carry
    # the name of the attention op they feed, from the shared compiled traces
    assert fused_category(TAX, "poi", "addmm_view")[0] == "arithmetic"
    names = _kernel_names("h200/llama_1b_bf16_bs1_s2048__compiled_cudagraphs")
    sdpa_prep = [n for n in names if n.startswith("triton_poi") and "attention" in n]
    assert sdpa_prep and all(kernel_category(TAX, n)[0] != "attention" for n in sdpa_prep)
    assert fused_category(TAX, "tem", "mm_0")[0] == "gemm"


def test_compiled_trace_keeps_fused_op_lists():
    rep = nongemm_trace.analyze(shared("h200", "gpt2_fp32_bs8_s128__compiled.json.gz"))
    tri = rep.kernels.filter(pl.col("name").str.starts_with("triton_"))
    assert tri.height and tri["fused_ops"].null_count() == 0
    assert rep.kernels.filter(~pl.col("name").str.starts_with("triton_"))["fused_ops"].null_count() == \
        rep.gpu_activities - tri.height


# -- quantization by dataflow -------------------------------------------------------------------

def test_fp8_dynamic_quantization_is_qdq_apart_from_gemm_and_arithmetic():
    path = shared("h200", "llama_1b_fp8dyn_bs1_s2048__eager.json.gz")
    for level in ("launch", "top"):
        rep = nongemm_trace.analyze(path, level=level)
        qdq = rep.kernels.filter(pl.col("category") == "qdq")
        assert qdq["dur_ns"].sum() > 0.2 * rep.gpu_time_ns
        # the same op name is qdq in one call and arithmetic in another
        div_cats = set(rep.kernels.filter(pl.col("launch_op") == "aten::div")["category"])
        assert div_cats == {"qdq"}
        mul_cats = set(rep.kernels.filter(pl.col("launch_op") == "aten::mul")["category"])
        assert "arithmetic" in mul_cats
        copy_cats = set(rep.kernels.filter(pl.col("launch_op") == "aten::copy_")["category"])
        assert {"qdq", "memory"} <= copy_cats
        assert set(rep.kernels.filter(pl.col("launch_op") == "aten::_scaled_mm")["category"]) == {"gemm"}


def test_qdq_rule_does_not_fire_without_low_precision_casts():
    rep = nongemm_trace.analyze(shared("h200", "llama_1b_bf16_bs1_s2048__eager.json.gz"))
    assert rep.kernels.filter(pl.col("category") == "qdq").height == 0


def test_qdq_chain_members_on_real_calls():
    """abs -> amax -> to(float) -> div -> clamp -> div -> to(float8): every call is qdq."""
    from nongemm_trace.classify import link_and_classify
    from nongemm_trace.load import load_trace
    tr = load_trace(shared("h200", "llama_1b_fp8dyn_bs1_s2048__eager.json.gz"))
    ops = link_and_classify(tr, TAX).ops.sort("ts_ns")
    top = ops.filter(pl.col("depth") == 1)  # the model's ops, under the step range
    names = top["name"].to_list()
    i = names.index("aten::_scaled_mm")
    chain = top.slice(i - 8, 8)
    assert chain["name"].to_list()[-1] == "aten::to"
    assert chain.filter(pl.col("name").is_in(["aten::abs", "aten::amax", "aten::div", "aten::clamp", "aten::to"]))[
        "qdq_call"].all()


# -- the paper's taxonomy, checked by an independent script -----------------------------------

ISPASS = {  # DESIGN.md's lists, typed in again here on purpose
    "gemm": "mm matmul bmm linear addmm addbmm baddbmm mv dot ger conv1d conv2d conv3d conv_tbc conv_transpose1d "
            "conv_transpose2d conv_transpose3d convolution einsum",
    "attention": "scaled_dot_product_attention _scaled_dot_product_efficient_attention "
                 "_scaled_dot_product_flash_attention _native_multi_head_attention",
    "activation": "silu gelu sigmoid relu relu_",
    "logit": "softmax",
    "normalization": "layer_norm group_norm batch_norm",
    "arithmetic": "add add_ div div_ mul mul_ floor neg gt ge lt le eq ne sub rsub abs bitwise_not bitwise_and "
                  "__and__ __or__ is_nonzero clamp all pow sin cos rsqrt sqrt log2 exp exponential_ max min argmax "
                  "cumsum mean sum index_add_",
    "pooling": "adaptive_avg_pool1d max_pool2d adaptive_avg_pool2d",
    "interpolation": "upsample_nearest2d upsample_bilinear2d",
    "embedding": "embedding",
    "memory": "slice view _unsafe_view permute transpose t reshape flatten pad contiguous index index_put_ unsqueeze "
              "squeeze to type_as cat stack copy_ clone empty empty_like new_empty new_zeros new_ones new_full zeros "
              "zeros_like ones ones_like full full_like fill_ expand expand_as where unbind select masked_fill "
              "masked_fill_ repeat roll arange _unique2 detach detach_ split split_with_sizes one_hot scatter resize_ "
              "any argwhere",
    "other": "dropout lift_fresh meshgrid topk sort _assert_async",
}
ISPASS_NAME = {n: c for c, names in ISPASS.items() for n in names.split()}


def _ispass_category(name: str) -> str:
    if name in ("torchvision::roi_align", "torchvision::nms"):
        return "roi"
    base = name.split("::")[-1]
    if base in ISPASS_NAME:
        return ISPASS_NAME[base]
    if "convolution" in name or re.match(r"(aten::)?(slow_conv|thnn_conv)", name):
        return "gemm"
    if "quantize" in name:
        return "qdq"
    return "unclassified"


def _independent_paper_shares(path) -> dict[str, float]:
    """cpu + gpu time per top-level op, by the paper's lists: read from the file with the
    standard library only. Top-level ops are the outermost cpu_ops (annotations, e.g. the
    step range, are not ops); a kernel belongs to the top-level op around its launch call."""
    events = raw_events(str(path))
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    by_thread = defaultdict(list)
    for e in ops:
        by_thread[(e["pid"], e["tid"])].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]))
    tops = {}
    for key, lst in by_thread.items():
        lst.sort(key=lambda r: (r[0], -(r[1] - r[0])))
        end = None
        roots = []
        for s, t, name in lst:
            if end is None or s >= end:
                roots.append((s, t, name))
                end = t
            else:
                end = max(end, t) if s >= end else end
        tops[key] = roots
    time = defaultdict(int)
    for roots in tops.values():
        for s, t, name in roots:
            time[_ispass_category(name)] += t - s
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("ph") == "X" and e.get("cat") in LAUNCH_CATS and "correlation" in e.get("args", {})}
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        call = launches.get(e["args"].get("correlation"))
        cat = "unclassified"
        if call is not None:
            t = ns(call["ts"])
            for s, u, name in tops.get((call["pid"], call["tid"]), []):
                if s <= t and t + ns(call["dur"]) <= u:
                    cat = _ispass_category(name)
                    break
        time[cat] += ns(e["dur"])
    total = sum(time.values())
    return {c: v / total for c, v in time.items()}


@pytest.mark.parametrize("name", ["bert_base_fp32_bs8_s128__eager", "resnet50_fp32_bs8__eager",
                                  "gpt2_fp32_bs8_s128__eager"])
def test_ispass25_matches_independent_script(name):
    path = shared("h200", name + ".json.gz")
    want = _independent_paper_shares(path)
    rep = nongemm_trace.analyze(path, taxonomy="ispass25")
    assert rep.metric == "paper" and rep.level == "top"
    got = dict(rep.categories.select("category", "share").iter_rows())
    for cat in set(want) | set(got):
        assert got.get(cat, 0.0) == pytest.approx(want.get(cat, 0.0), abs=1e-9), cat


# -- levels -----------------------------------------------------------------------------------

def test_module_level_counts_rmsnorm_written_as_pointwise_ops():
    path = shared("external", "tracelens", "h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    launch = nongemm_trace.analyze(path, level="launch")
    module = nongemm_trace.analyze(path, level="module")
    assert module.share("normalization") > 0.05
    # the launch level finds the same RMSNorm from the written-out op chain (pow/mean/add/rsqrt/mul),
    # without the nn.Module events the module level reads
    assert launch.share("normalization") == pytest.approx(module.share("normalization"), abs=0.02)
    norm = module.kernels.filter(pl.col("category") == "normalization")
    assert set(norm["module"].unique()) == {"Qwen2RMSNorm"}
    assert module.gpu_time_ns == launch.gpu_time_ns


def test_module_level_without_modules_warns():
    rep = nongemm_trace.analyze(shared("h200", "bert_base_fp32_bs8_s128__eager.json.gz"), level="module")
    assert any(w.code == "no_modules" for w in rep.warnings)


def test_backward_and_training_ops_are_categorized():
    rep = nongemm_trace.analyze(shared("h200", "bert_base_train_bs8_s128__eager.json.gz"))
    cats = dict(rep.kernels.group_by("launch_op").agg(pl.col("category").first()).iter_rows())
    assert cats["aten::native_layer_norm_backward"] == "normalization"
    assert cats["aten::gelu_backward"] == "activation"
    assert cats["aten::_softmax_backward_data"] == "logit" if "aten::_softmax_backward_data" in cats else True
    assert cats["aten::embedding_dense_backward"] == "embedding"
    assert cats["aten::_efficient_attention_backward"] == "attention"
    assert cats["aten::nll_loss_forward"] == "other"
    assert any(c == "arithmetic" for o, c in cats.items() if "_foreach_" in o or "_fused_adam" in o)
    top = nongemm_trace.analyze(shared("h200", "bert_base_train_bs8_s128__eager.json.gz"), level="top")
    assert "AddmmBackward0" in set(top.kernels["top_op"].drop_nulls())
    assert set(top.kernels.filter(pl.col("top_op") == "AddmmBackward0")["category"]) == {"gemm"}


# -- taxonomy files and the Python rule API ------------------------------------------------------

def test_user_taxonomy_extends_default(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('extends = "default"\nname = "mine"\n[ops.normalization]\nnames = ["aten::add"]\n')
    rep = nongemm_trace.analyze(shared("h200", "bert_base_fp32_bs8_s128__eager.json.gz"), taxonomy=str(f))
    assert rep.taxonomy == "mine"
    assert set(rep.kernels.filter(pl.col("launch_op") == "aten::add")["category"]) == {"normalization"}


@pytest.mark.parametrize("text,err", [
    ('[classes]\ngemm = "GEMM"\n', "lacks categories"),
    ('extends = "default"\n[ops.fancy]\nnames = ["x"]\n', "unknown category"),
    ('extends = "default"\n[[kernels]]\npattern = "("\ncategory = "gemm"\n', "bad regular expression"),
    ('extends = "default"\nname = [', "invalid taxonomy TOML"),
])
def test_bad_taxonomy_files_are_refused(tmp_path, text, err):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(TraceError, match=err):
        load_taxonomy(str(f))


def test_python_rule_api():
    tax = extend_taxonomy(TAX, ops={"aten::add": "other"}, kernels=[("elementwise", "pooling", 1000)])
    rep = nongemm_trace.analyze(shared("h200", "bert_base_fp32_bs8_s128__eager.json.gz"), taxonomy=tax)
    assert set(rep.kernels.filter(pl.col("launch_op") == "aten::add")["category"]) == {"other"}
    assert op_category(TAX, "aten::add")[0] == "arithmetic"  # the base is unchanged


def test_explain_and_annotate(tmp_path, capsys):
    from nongemm_trace.cli import main
    path = shared("h200", "llama_1b_fp8dyn_bs1_s2048__eager.json.gz")
    assert main(["explain", str(path), "aten::div", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    op = d["ops"][0]
    assert op["name_rule"]["category"] == "arithmetic" and op["qdq_calls"] == op["calls"]
    assert op["levels"]["launch"][0]["category"] == "qdq"
    assert main(["explain", str(path), "nvjet"]) == 0
    assert "kernel rule: gemm" in capsys.readouterr().out
    out = tmp_path / "annotated.json.gz"
    assert main(["annotate", str(path), "-o", str(out)]) == 0
    import gzip
    doc = json.loads(gzip.decompress(out.read_bytes()))
    acts = [e for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")]
    assert acts and all("nongemm_category" in e["args"] and "nongemm_class" in e["args"] for e in acts)
    ops = [e for e in doc["traceEvents"] if e.get("cat") in ("cpu_op", "user_annotation") and e.get("ph") == "X"]
    assert all("nongemm_category" in e["args"] for e in ops)
    rep = nongemm_trace.analyze(path)
    got = sum(ns(e["dur"]) for e in acts if e["args"]["nongemm_category"] == "qdq")
    assert got == rep.kernels.filter(pl.col("category") == "qdq")["dur_ns"].sum()


def test_host_device_copies_are_transfers_in_a_class_of_their_own():
    """HTA's AlexNet trace: 16 pageable HtoD copies (launched by aten::copy_) made its headline
    non-GEMM 87.9 % while counted in memory; as transfers they are their own class, every GPU ns
    still in exactly one category, and the report says so."""
    import nongemm_trace
    rep = nongemm_trace.analyze(shared("external", "hta",
                                       "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"))
    k = rep.kernels
    moved = k.filter(pl.col("category") == "transfer")
    assert moved.height == 16 and moved["name"].str.starts_with("Memcpy HtoD").all()
    assert (moved["class"] == "transfer").all() and (moved["rule"] == "transfer").all()
    assert int(rep.categories["time_ns"].sum()) == rep.gpu_time_ns == int(k["dur_ns"].sum())
    assert rep.share("non-GEMM") < 0.05 and rep.share("transfer") > 0.8
    assert any(w.code == "host_device_transfers" and w.count == 16 for w in rep.warnings)
    # the paper's taxonomy has no [transfers] table: its numbers do not move
    paper = nongemm_trace.analyze(rep.trace, taxonomy="ispass25")
    assert "transfer" not in paper.kernels["category"].to_list()
    # Nsight Systems names the copies differently: Device-to-Host
    ns = nongemm_trace.analyze(shared("external", "nsys", "nsightful_t4_power_iteration.sqlite.gz")).kernels
    assert set(ns.filter(pl.col("name") == "Memcpy Device-to-Host")["category"]) == {"transfer"}
    # device-to-device copies stay memory; without a launching op their kind decides, on semantics
    ddp = nongemm_trace.analyze(shared("h200x2", "bert_ddp_train_rank0.json.gz")).kernels
    dtod = ddp.filter(pl.col("name").str.starts_with("Memcpy DtoD") & pl.col("launch_op").is_null())
    assert dtod.height and set(dtod["category"]) == {"memory"} and set(dtod["evidence"]) == {"semantics"}
    assert set(dtod["rule"]) == {"activity_kind"}
