#!/usr/bin/env python3
"""The NonGEMM paper's model zoo, captured with the project's own collector.

    python3 bench/zoo.py OUTDIR [--set eager|compiled|bs8|fp8] [--only NAME,NAME] [--steps 3]

Random weights, no downloads (HF_HUB_OFFLINE=1). Every model runs inference on one
GPU; ``eager`` is batch 1, FP16 (the paper's GPU setting); ``compiled`` adds
``torch.compile`` for six of them, ``bs8`` batch 8, ``fp8`` a Llama-2-7B-shaped model
with its linears under dynamic per-tensor FP8 quantization (``torch._scaled_mm``)
next to the same model in bf16. A model that fails is reported and skipped.
Traces: OUTDIR/NAME.json.gz (+ NAME.nongemm.json when nongemm-trace is importable).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import torch.nn as nn

from nongemm_trace.collectors.torch_profiler import capture

DEV = "cuda"
F16 = torch.float16


def _build(make, dtype):
    with torch.device(DEV):
        m = make()
    return m.to(dtype).eval()


def tv(name, bs=1, hw=224, dtype=F16):
    def make():
        import torchvision.models as M
        m = _build(lambda: getattr(M, name)(weights=None), dtype)
        x = torch.randn(bs, 3, hw, hw, device=DEV, dtype=dtype)
        return m, (lambda mod: mod(x))
    return make


def tv_det(name, bs=1, hw=800, dtype=F16):
    def make():
        import torchvision.models.detection as D
        m = _build(lambda: getattr(D, name)(weights=None, weights_backbone=None), dtype)
        xs = [torch.rand(3, hw, hw, device=DEV, dtype=dtype) for _ in range(bs)]
        return m, (lambda mod: mod(xs))
    return make


def hf_text(cls, cfg_cls, bs=1, seq=512, dtype=F16, **cfg):
    def make():
        import transformers as T
        c = getattr(T, cfg_cls)(**cfg)
        m = _build(lambda: getattr(T, cls)(c), dtype)
        ids = torch.randint(0, min(c.vocab_size, 30000), (bs, seq), device=DEV)
        return m, (lambda mod: mod(input_ids=ids))
    return make


def hf_vision(cls, cfg_cls, bs=1, hw=512, dtype=F16, autocast=False, **cfg):
    """``autocast``: keep fp32 weights and run under torch.autocast(fp16), for models whose
    code builds fp32 tensors internally (MaskFormer's pixel decoder)."""
    def make():
        import transformers as T
        c = getattr(T, cfg_cls)(**cfg)
        m = _build(lambda: getattr(T, cls)(c), torch.float32 if autocast else dtype)
        px = torch.randn(bs, 3, hw, hw, device=DEV, dtype=torch.float32 if autocast else dtype)
        if autocast:
            def fwd(mod):
                with torch.autocast("cuda", dtype=dtype):
                    return mod(pixel_values=px)
            return m, fwd
        return m, (lambda mod: mod(pixel_values=px))
    return make


LLAMA7B = dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=32, vocab_size=32000, max_position_embeddings=4096)
MIXTRAL = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=8, num_attention_heads=32,
               num_key_value_heads=8, num_local_experts=8, num_experts_per_tok=2, vocab_size=32000,
               max_position_embeddings=4096)
GPT2 = {"gpt2": dict(n_layer=12, n_embd=768, n_head=12), "gpt2-large": dict(n_layer=36, n_embd=1280, n_head=20),
        "gpt2-xl": dict(n_layer=48, n_embd=1600, n_head=25)}

EAGER = {
    "swin_t": tv("swin_t"), "swin_s": tv("swin_s"), "swin_b": tv("swin_b"),
    "vit_b_16": tv("vit_b_16"), "vit_l_16": tv("vit_l_16"), "vit_h_14": tv("vit_h_14"),
    "detr_resnet50": hf_vision("DetrForObjectDetection", "DetrConfig", hw=800, use_pretrained_backbone=False),
    "fasterrcnn_resnet50_fpn": tv_det("fasterrcnn_resnet50_fpn"),
    "maskrcnn_resnet50_fpn": tv_det("maskrcnn_resnet50_fpn"),
    "maskformer_swin": hf_vision("MaskFormerForInstanceSegmentation", "MaskFormerConfig", hw=384, autocast=True),
    "segformer_b0": hf_vision("SegformerForSemanticSegmentation", "SegformerConfig", hw=512),
    "gpt2": hf_text("GPT2LMHeadModel", "GPT2Config", **GPT2["gpt2"]),
    "gpt2_large": hf_text("GPT2LMHeadModel", "GPT2Config", **GPT2["gpt2-large"]),
    "gpt2_xl": hf_text("GPT2LMHeadModel", "GPT2Config", **GPT2["gpt2-xl"]),
    "bert_base": hf_text("BertModel", "BertConfig"),
    "llama2_7b_shaped": hf_text("LlamaForCausalLM", "LlamaConfig", **LLAMA7B),
    "mixtral_8x7b_shaped_8layers": hf_text("MixtralForCausalLM", "MixtralConfig", **MIXTRAL),
}
SIX = ["bert_base", "gpt2_xl", "vit_b_16", "swin_b", "segformer_b0", "llama2_7b_shaped"]
BS8 = {
    "bert_base": hf_text("BertModel", "BertConfig", bs=8), "gpt2_xl": hf_text("GPT2LMHeadModel", "GPT2Config", bs=8,
                                                                              **GPT2["gpt2-xl"]),
    "vit_b_16": tv("vit_b_16", bs=8), "swin_b": tv("swin_b", bs=8),
    "segformer_b0": hf_vision("SegformerForSemanticSegmentation", "SegformerConfig", bs=8, hw=512),
    "llama2_7b_shaped": hf_text("LlamaForCausalLM", "LlamaConfig", bs=8, **LLAMA7B),
}


class Fp8Linear(nn.Module):
    """Dynamic per-tensor FP8 (e4m3) quantization of activations and weights around torch._scaled_mm."""

    def __init__(self, lin: nn.Linear):
        super().__init__()
        w = lin.weight.detach()
        self.w_scale = (w.abs().amax().float() / 448.0).clamp(min=1e-12)
        self.wq = (w / self.w_scale).to(torch.float8_e4m3fn).t()
        self.bias = lin.bias

    def forward(self, x):
        shp = x.shape
        x2 = x.reshape(-1, shp[-1])
        x_scale = (x2.abs().amax().float() / 448.0).clamp(min=1e-12)
        xq = (x2 / x_scale).to(torch.float8_e4m3fn)
        y = torch._scaled_mm(xq, self.wq, scale_a=x_scale, scale_b=self.w_scale, out_dtype=torch.bfloat16)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*shp[:-1], y.shape[-1])


def swap_fp8(m: nn.Module) -> nn.Module:
    for name, child in m.named_children():
        if isinstance(child, nn.Linear) and name != "lm_head":
            setattr(m, name, Fp8Linear(child))
        else:
            swap_fp8(child)
    return m


def jobs(which: str):
    if which == "eager":
        for name, make in EAGER.items():
            yield f"{name}__bs1_fp16_eager", make, None
    elif which == "compiled":
        for name in SIX:
            yield f"{name}__bs1_fp16_compiled", EAGER[name], "compile"
    elif which == "bs8":
        for name, make in BS8.items():
            yield f"{name}__bs8_fp16_eager", make, None
    elif which == "fp8":
        bf16 = hf_text("LlamaForCausalLM", "LlamaConfig", dtype=torch.bfloat16, **LLAMA7B)
        yield "llama2_7b_shaped__bs1_bf16_eager", bf16, None
        yield "llama2_7b_shaped__bs1_fp8dyn_eager", bf16, "fp8"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--set", default="eager", choices=("eager", "compiled", "bs8", "fp8"))
    ap.add_argument("--only", default="")
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    only = {s for s in args.only.split(",") if s}
    torch.backends.cuda.matmul.allow_tf32 = True
    for name, make, mode in jobs(args.set):
        if only and not any(name.startswith(o) for o in only):
            continue
        t0 = time.time()
        model = fwd = target = None
        try:
            model, fwd = make()
            if mode == "fp8":
                swap_fp8(model)
            target = torch.compile(model) if mode == "compile" else model

            def step(fwd=fwd, target=target):
                with torch.inference_mode():
                    fwd(target)
            step()  # build / compile outside the profiled window
            torch.cuda.synchronize()
            meta = {"model": name.split("__")[0], "setting": name.split("__")[1], "random_weights": True}
            capture(step, args.out, name, steps=args.steps, wait=1, warmup=1, metadata=meta)
            print(f"ok   {name} {time.time() - t0:.1f}s", flush=True)
        except Exception as exc:  # noqa: BLE001 - one model failing must not stop the zoo
            print(f"FAIL {name}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            traceback.print_exc(limit=2)
        finally:
            model = fwd = target = step = None
            import gc
            gc.collect()
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
