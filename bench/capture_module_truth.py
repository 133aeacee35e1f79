#!/usr/bin/env python3
"""Module-tagged captures: the ground truth for tests/test_module_truth.py.

    python3 bench/capture_module_truth.py OUTDIR [--only NAME,NAME]

Every module whose class names one category (Linear/Conv -> gemm, *Norm -> normalization,
GELU/SiLU/ReLU/... -> activation, Embedding -> embedding, pooling, Softmax -> logit) opens a
``truth:<category>:<Class>`` record_function range in a forward pre-hook and closes it in a
forward hook, so every forward op it runs nests in the tag. The backward needs no tag: its
``autograd::engine::evaluate_function`` ranges carry the ``Sequence number`` of the forward op
they differentiate. The test strips the tags before the tool reads the trace. Random weights,
no downloads; one profiled step after two warm-up steps, small models so each trace stays
well under 2 MB gzipped. Traces: OUTDIR/NAME.json.gz.
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import time
import traceback

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
import torch.nn as nn

DEV = os.environ.get("TRUTH_DEVICE", "cuda")
BF16 = torch.bfloat16

GEMM = ("Linear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "Conv1D")
ACT = ("GELU", "SiLU", "ReLU", "ReLU6", "Hardswish", "Hardsigmoid", "Sigmoid", "Tanh", "Mish")
POOL = ("MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveAvgPool1d")


def category(mod: nn.Module) -> str | None:
    """The one category a module's class names, or None (containers, dropout, attention)."""
    name = type(mod).__name__
    if name in GEMM:
        return "gemm"
    if name.endswith(("Norm", "Norm1d", "Norm2d", "Norm3d")) or "LayerNorm" in name:
        return "normalization"
    if name in ACT or name.endswith("Activation") or name.startswith(("GELU", "PytorchGELU")):
        return "activation"
    if name == "Embedding":
        return "embedding"
    if name in POOL:
        return "pooling"
    if name == "Softmax":
        return "logit"
    return None


def tag(model: nn.Module) -> nn.Module:
    """Register the truth hooks on every categorized module."""
    stack = []

    def pre(mod, _inp):
        rf = torch.autograd.profiler.record_function(f"truth:{mod._truth}:{type(mod).__name__}")
        rf.__enter__()
        stack.append(rf)

    def post(_mod, _inp, _out):
        stack.pop().__exit__(None, None, None)

    for mod in model.modules():
        cat = category(mod)
        if cat:
            mod._truth = cat
            mod.register_forward_pre_hook(pre)
            mod.register_forward_hook(post)
    return model


def capture(out, name, step):
    for _ in range(2):
        step()
    if DEV == "cuda":
        torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
        with torch.profiler.record_function("## step ##"):
            step()
        if DEV == "cuda":
            torch.cuda.synchronize()
    path = os.path.join(out, name + ".json")
    prof.export_chrome_trace(path)
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb", 9) as g:
        g.write(f.read())
    os.remove(path)
    print(f"{name}: {os.path.getsize(path + '.gz') / 1e6:.2f} MB gz", flush=True)


def infer(model, *args, **kw):
    model = tag(model.eval())

    def step():
        with torch.inference_mode():
            model(*args, **kw)
    return step


def train(model, loss_of, *args, **kw):
    model = tag(model.train())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)

    def step():
        loss_of(model(*args, **kw)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def hf(cls_name, cfg_name, dtype=BF16, **cfg):
    import transformers as T
    with torch.device(DEV):
        return getattr(T, cls_name)(getattr(T, cfg_name)(**cfg)).to(dtype)


def tv(fn, dtype=torch.float32, **kw):
    import torchvision.models as M
    with torch.device(DEV):
        return getattr(M, fn)(**kw).to(dtype)


LLAMA = dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=2, num_attention_heads=16,
             num_key_value_heads=8, vocab_size=32000)


def jobs():
    ids = lambda b, s, v=32000: torch.randint(0, v, (b, s), device=DEV)  # noqa: E731
    img = lambda b, r, d=torch.float32: torch.randn(b, 3, r, r, device=DEV, dtype=d)  # noqa: E731
    yield "llama_bf16_train_bs2_s256", lambda: train(
        hf("LlamaForCausalLM", "LlamaConfig", **LLAMA), lambda o: o.loss, input_ids=(x := ids(2, 256)), labels=x)
    yield "llama_bf16_infer_bs1_s512", lambda: infer(
        hf("LlamaForCausalLM", "LlamaConfig", **LLAMA), input_ids=ids(1, 512))
    yield "gemma_bf16_infer_bs1_s512", lambda: infer(
        hf("GemmaForCausalLM", "GemmaConfig", hidden_size=1024, intermediate_size=4096, num_hidden_layers=2,
           num_attention_heads=8, num_key_value_heads=1, head_dim=128, vocab_size=32000), input_ids=ids(1, 512))
    yield "bert_bf16_train_bs4_s256", lambda: train(
        hf("BertForMaskedLM", "BertConfig", num_hidden_layers=2, vocab_size=30522), lambda o: o.loss,
        input_ids=(x := ids(4, 256, 30522)), labels=x)
    yield "gpt2_fp32_train_bs4_s256", lambda: train(
        hf("GPT2LMHeadModel", "GPT2Config", torch.float32, n_layer=2), lambda o: o.loss,
        input_ids=(x := ids(4, 256, 50257)), labels=x)
    yield "t5_fp32_infer_bs2_s256", lambda: infer(
        hf("T5ForConditionalGeneration", "T5Config", torch.float32, num_layers=2, num_decoder_layers=2,
           d_model=512, d_ff=2048, num_heads=8, vocab_size=32128),
        input_ids=ids(2, 256, 32128), decoder_input_ids=ids(2, 64, 32128))
    yield "clip_vision_fp16_infer_bs8", lambda: infer(
        hf("CLIPVisionModel", "CLIPVisionConfig", torch.float16, num_hidden_layers=2, hidden_act="quick_gelu"),
        pixel_values=img(8, 224, torch.float16))
    yield "resnet18_fp32_train_bs16_r160", lambda: train(
        tv("resnet18"), lambda o: o.float().mean(), img(16, 160))
    yield "mobilenet_v2_fp32_train_bs16_r160", lambda: train(
        tv("mobilenet_v2"), lambda o: o.float().mean(), img(16, 160))
    yield "vit_b16_fp16_infer_bs8", lambda: infer(
        tv("VisionTransformer", torch.float16, image_size=224, patch_size=16, num_layers=2, num_heads=12,
           hidden_dim=768, mlp_dim=3072), img(8, 224, torch.float16))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--only", default="")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    only = set(filter(None, a.only.split(",")))
    torch.manual_seed(0)
    for name, make in jobs():
        if only and name not in only:
            continue
        t0 = time.time()
        try:
            capture(a.out, name, make())
        except Exception:  # noqa: BLE001
            print(name, "FAILED", flush=True)
            traceback.print_exc()
        print(f"  {time.time() - t0:.1f}s", flush=True)
        if DEV == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
