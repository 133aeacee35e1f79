"""Small step factories for the collectors' command lines (random weights, no downloads).

    python -m nongemm_trace.collectors.torch_profiler nongemm_trace.collectors.examples:resnet50 --steps 5 -o out/
    python -m nongemm_trace.collectors.nsys profile -o out/resnet50 -- \
        python -m nongemm_trace.collectors.nsys steps nongemm_trace.collectors.examples:resnet50
    # runs on a CPU too:
    python -m nongemm_trace.collectors.torch_profiler nongemm_trace.collectors.examples:tiny_mlp --steps 3 -o out/
"""

from __future__ import annotations

import os


def _device():
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def resnet50():
    """torchvision ResNet-50, random weights, batch from $BATCH (8), fp32 inference."""
    import torch
    import torchvision

    bs = int(os.environ.get("BATCH", "8"))
    dev = _device()
    model = torchvision.models.resnet50(weights=None).to(dev).eval()
    x = torch.randn(bs, 3, 224, 224, device=dev)

    def step():
        with torch.inference_mode():
            model(x)
    return step, {"model": "resnet50", "batch": bs, "dtype": "float32", "mode": "inference"}


def bert_base():
    """Hugging Face BERT-base (random weights), batch 8, 128 tokens, fp32 inference."""
    import torch
    import transformers as T

    dev = _device()
    cfg = T.BertConfig()
    model = T.BertModel(cfg).to(dev).eval()
    ids = torch.randint(0, cfg.vocab_size, (8, 128), device=dev)

    def step():
        with torch.inference_mode():
            model(input_ids=ids)
    return step, {"model": "bert-base", "batch": 8, "seq": 128, "dtype": "float32", "mode": "inference"}


def tiny_mlp():
    """A two-layer MLP with LayerNorm and GELU: a few ms on any CPU (for tests)."""
    import torch

    dev = _device()
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.LayerNorm(128), torch.nn.GELU(),
                                torch.nn.Linear(128, 32), torch.nn.Softmax(dim=-1)).to(dev).eval()
    x = torch.randn(16, 64, device=dev)

    def step():
        with torch.inference_mode():
            model(x)
    return step, {"model": "tiny_mlp", "batch": 16}
