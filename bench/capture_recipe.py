"""Captures made the way PyTorch's profiler recipe teaches, with the truth timed without the profiler.

    python3 bench/capture_recipe.py --out OUTDIR [--only NAME,...] [--budget-s 430]      (on the GPU machine)
    SMALL=1 python3 bench/capture_recipe.py --out /tmp/x                                  (a dry run on a CPU)

The validation data of issue #41 (bench/recipe_validation.py reads it). Every workload is built here
from a config with random weights (transformers' config classes; small conv nets written below), so
nothing is downloaded. 21 workloads, 38 configurations:

* TF32 pairs (``fp32``/``tf32``: ``torch.backends.cuda.matmul.allow_tf32`` and
  ``torch.backends.cudnn.allow_tf32`` both off / both on): ViT-L/16 b8, DistilBERT b64 s128,
  ResNet-50 b32, a Mistral-shaped 8-layer prefill b1 s512 (device-bound inference); BERT-base b1 s32
  (host-bound inference); GPT-2 (6 layers) training b4 s128 and BERT (6 layers) training b8 s128 (forward,
  ``backward()`` on autograd's thread, AdamW).
* bf16 autocast pairs (``fp32``/``bf16``: the same model, the step inside
  ``torch.autocast("cuda", torch.bfloat16)``; TF32 off): Wide-ResNet-50-2 b16, GPT-2 b8 s256,
  ViT-B/16 b16, a Llama-shaped 8-layer prefill b1 s512.
* eager / CUDA-graph pairs (``eager``/``graph``: the same forward captured once in a
  ``torch.cuda.CUDAGraph`` and replayed; TF32 off): SqueezeNet-1.1 b1, ResNet-18 b1, an 8-layer MLP b1,
  GPT-2 b1 s16, BERT (4 layers) b1 s64, a Llama-shaped decode step b1.
* singles: GPT-2 (4 layers) ``generate()`` of 8 tokens b1 (HF's loop: a host sync per token), a
  Llama-shaped decode loop b4 (prefill 32 tokens, then 8 tokens through the KV cache, argmax, no sync),
  a conv-net training step b128 fed from pinned host memory (``.to(dev, non_blocking=True)``), a small
  MLP training step b32 (host-bound, two threads).

For every configuration:

(a) the truth without the profiler: CUDA events around N back-to-back steps (no synchronize between
    steps; two unmeasured steps before the first event so the queue is in its steady state), the step
    = elapsed / N, in 7 rounds, each round running every configuration once in a rotating order (rounds
    0-2 before the profiled captures, 3-6 after: ``rounds_before_captures``); ``truth_step_us`` is the
    median of the 7. torch.profiler leaves CUPTI attached once a window with CUDA activities ends, unless
    ``TEARDOWN_CUPTI=1`` (``--teardown``, recorded as ``cupti_teardown``): without it the rounds after
    the captures time a process the profiler still holds (bench/recipe_validation.py's ``before`` and
    ``after``). N is chosen per configuration so that a round measures about 120 ms of steps (5 to 60 steps).
(b) one capture exactly as the recipe: ``torch.profiler.profile(activities=[CPU, CUDA],
    schedule=torch.profiler.schedule(wait=1, warmup=1, active=3), on_trace_ready=handler)``, the loop
    calling ``prof.step()`` after each step and nothing else (no synchronize); the trace holds
    ProfilerStep#2..#4. ``handler`` exports the Chrome trace and gzips it. One unprofiled round of N steps
    right before it and one right after (``bracket_us``): the host's speed at the capture's own moment,
    a diagnostic beside the truth.

Beside those, a few configurations are captured again under other profiler settings
(``record_shapes=True``, ``with_stack=True``, ``profile_memory=True``) for the overhead model:
OUTDIR/WORKLOAD__VARIANT__SETTING.json.gz (the main captures: WORKLOAD__VARIANT.json.gz).

The host's speed is probed at the start, after the captures and at the end (1e6 empty Python loop
iterations; 10,000 tiny ``torch.add`` on the CPU; 2,000 tiny CUDA launches, host time per launch), and a
tenth of that right before each capture (``probe_before_capture``): its speed drifts (2x within a minute
on the H100 machine), and a trace shows only its own window's.

OUTDIR gets truth.json ({trace file -> {workload, variant, kind, role, setting, truth_step_us, rounds,
steps_per_round, bracket_us, gpu, torch, transformers, host, ...}}; a pair's slower side's captures add
``partner`` and ``partner_bracket_us``: its faster side timed right before and right after the window),
capture.log, and the traces packed into tar files of at most 15 MB (``traces-N.tar``, the device tool brings
back 8 files of 16 MB).
"""
from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import platform
import shutil
import statistics
import sys
import tarfile
import time
import traceback

T0 = time.time()
SMALL = os.environ.get("SMALL") == "1"
ROUNDS = 7
ROUNDS_BEFORE = 3
TARGET_ROUND_S = 0.12
PACK_LIMIT = 15 * 2 ** 20
LOG = None


def log(msg: str) -> None:
    line = f"[{time.time() - T0:7.1f}s] {msg}"
    print(line, flush=True)
    if LOG:
        LOG.write(line + "\n")
        LOG.flush()


# ---------------------------------------------------------------- models written here (no torchvision)

def convnets(nn):
    class ConvBN(nn.Sequential):
        def __init__(self, cin, cout, k, s=1, relu=True):
            layers = [nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout)]
            if relu:
                layers.append(nn.ReLU(inplace=True))
            super().__init__(*layers)

    class Basic(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.a = ConvBN(cin, cout, 3, stride)
            self.b = ConvBN(cout, cout, 3, 1, relu=False)
            self.down = ConvBN(cin, cout, 1, stride, relu=False) if stride != 1 or cin != cout else None
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            idn = x if self.down is None else self.down(x)
            return self.relu(self.b(self.a(x)) + idn)

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, cout, stride):
            super().__init__()
            self.a = ConvBN(cin, width, 1)
            self.b = ConvBN(width, width, 3, stride)
            self.c = ConvBN(width, cout, 1, relu=False)
            self.down = ConvBN(cin, cout, 1, stride, relu=False) if stride != 1 or cin != cout else None
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            idn = x if self.down is None else self.down(x)
            return self.relu(self.c(self.b(self.a(x))) + idn)

    class ResNet(nn.Module):
        """ResNet-18/50 and Wide-ResNet-50-2 (torchvision's layouts)."""

        def __init__(self, blocks, bottleneck=True, width_mult=1, classes=1000, base=64):
            super().__init__()
            self.stem = nn.Sequential(ConvBN(3, base, 7, 2), nn.MaxPool2d(3, 2, 1))
            layers, cin = [], base
            for i, n in enumerate(blocks):
                planes = base * 2 ** i
                cout = planes * 4 if bottleneck else planes
                for j in range(n):
                    stride = 2 if (j == 0 and i > 0) else 1
                    if bottleneck:
                        layers.append(Bottleneck(cin, planes * width_mult, cout, stride))
                    else:
                        layers.append(Basic(cin, cout, stride))
                    cin = cout
            self.layers = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(cin, classes)

        def forward(self, x):
            return self.fc(self.pool(self.layers(self.stem(x))).flatten(1))

    class Fire(nn.Module):
        def __init__(self, cin, s, e):
            super().__init__()
            self.sq = nn.Sequential(nn.Conv2d(cin, s, 1), nn.ReLU(inplace=True))
            self.e1 = nn.Sequential(nn.Conv2d(s, e, 1), nn.ReLU(inplace=True))
            self.e3 = nn.Sequential(nn.Conv2d(s, e, 3, padding=1), nn.ReLU(inplace=True))

        def forward(self, x):
            x = self.sq(x)
            return torch_cat([self.e1(x), self.e3(x)])

    class SqueezeNet(nn.Module):
        """SqueezeNet 1.1."""

        def __init__(self, classes=1000):
            super().__init__()
            mp = lambda: nn.MaxPool2d(3, 2, ceil_mode=True)  # noqa: E731
            self.features = nn.Sequential(
                nn.Conv2d(3, 64, 3, 2), nn.ReLU(inplace=True), mp(), Fire(64, 16, 64), Fire(128, 16, 64), mp(),
                Fire(128, 32, 128), Fire(256, 32, 128), mp(), Fire(256, 48, 192), Fire(384, 48, 192),
                Fire(384, 64, 256), Fire(512, 64, 256))
            self.head = nn.Sequential(nn.Dropout(0.5), nn.Conv2d(512, classes, 1), nn.ReLU(inplace=True),
                                      nn.AdaptiveAvgPool2d(1))

        def forward(self, x):
            return self.head(self.features(x)).flatten(1)

    class MLP(nn.Module):
        def __init__(self, width, depth, classes=1000):
            super().__init__()
            blocks = []
            for _ in range(depth):
                blocks += [nn.Linear(width, width), nn.LayerNorm(width), nn.GELU()]
            self.body = nn.Sequential(*blocks)
            self.out = nn.Linear(width, classes)

        def forward(self, x):
            return self.out(self.body(x))

    return ResNet, SqueezeNet, MLP


def torch_cat(xs):
    import torch
    return torch.cat(xs, 1)


# ---------------------------------------------------------------- workloads

class Config:
    """One configuration: ``setup()`` sets the backend flags, ``step()`` is one iteration of the loop."""

    def __init__(self, workload, variant, kind, role, step, setup, ctx, desc):
        self.workload, self.variant, self.kind, self.role = workload, variant, kind, role
        self.step, self.setup, self.ctx, self.desc = step, setup, ctx, desc
        self.rounds: list[float] = []
        self.n = 5

    @property
    def key(self):
        return f"{self.workload}__{self.variant}"


def build(torch, dev, only):
    import torch.nn as nn
    import transformers as T

    ResNet, SqueezeNet, MLP = convnets(nn)
    cuda = dev == "cuda"
    s = SMALL

    def tf32(on):
        def setup():
            torch.backends.cuda.matmul.allow_tf32 = on
            torch.backends.cudnn.allow_tf32 = on
        return setup

    def on_dev(ctor):
        with torch.device(dev):
            m = ctor()
        return m.to(dev)

    def hf(cls, cfg_cls, **cfg):
        return on_dev(lambda: getattr(T, cls)(getattr(T, cfg_cls)(**cfg)))

    def ids(bs, seq, vocab=1000):
        return torch.randint(0, vocab, (bs, seq), device=dev)

    def img(bs, hw=224):
        return torch.randn(bs, 3, hw, hw, device=dev)

    def autocast(fn):
        def step():
            with torch.autocast(dev, dtype=torch.bfloat16):
                return fn()
        return step

    def graphed(fn):
        if not cuda:
            return None
        st = torch.cuda.Stream()
        st.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(st):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(st)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        torch.cuda.synchronize()
        return g.replay

    inf = torch.inference_mode
    train = contextlib.nullcontext

    # sizes: (full, SMALL dry run)
    def L(full, small):
        return small if s else full
    vit_l = dict(hidden_size=L(1024, 64), num_hidden_layers=L(24, 2), num_attention_heads=L(16, 4),
                 intermediate_size=L(4096, 128), image_size=L(224, 32), patch_size=16)
    vit_b = dict(hidden_size=L(768, 64), num_hidden_layers=L(12, 2), num_attention_heads=L(12, 4),
                 intermediate_size=L(3072, 128), image_size=L(224, 32), patch_size=16)
    bert = dict(hidden_size=L(768, 64), num_hidden_layers=L(12, 2), num_attention_heads=L(12, 4),
                intermediate_size=L(3072, 128))
    gpt2 = dict(n_embd=L(768, 64), n_layer=L(12, 2), n_head=L(12, 4))
    llama = dict(hidden_size=L(1024, 64), intermediate_size=L(2816, 128), num_hidden_layers=L(8, 2),
                 num_attention_heads=L(16, 4), num_key_value_heads=L(4, 2), vocab_size=L(32000, 1000))
    mistral = dict(hidden_size=L(1024, 64), intermediate_size=L(3584, 128), num_hidden_layers=L(8, 2),
                   num_attention_heads=L(16, 4), num_key_value_heads=L(8, 2), vocab_size=L(32000, 1000))
    hw = L(224, 32)

    def fwd(m, **kw):
        m.eval()
        return lambda: m(**kw)

    def call(m, x):
        m.eval()
        return lambda: m(x)

    def hf_train(model, x, labels=True):
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5)

        def step():
            out = model(input_ids=x, labels=x) if labels else model(input_ids=x)
            loss = out.loss if labels else out.last_hidden_state.float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    def pinned_train():
        model = ResNet((1, 1, 1, 1), bottleneck=False, classes=100, base=L(32, 8)).to(dev).train()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        bs = L(128, 4)
        pin = cuda
        host = [(torch.randn(bs, 3, L(64, 16), L(64, 16), pin_memory=pin),
                 torch.randint(0, 100, (bs,), pin_memory=pin)) for _ in range(2)]
        it = [0]
        lossf = nn.CrossEntropyLoss()

        def step():
            xb, yb = host[it[0] % 2]
            it[0] += 1
            x = xb.to(dev, non_blocking=True)
            y = yb.to(dev, non_blocking=True)
            loss = lossf(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    def mlp_train():
        model = MLP(L(512, 32), 6, classes=10).to(dev).train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        x = torch.randn(L(32, 4), L(512, 32), device=dev)
        y = torch.randint(0, 10, (L(32, 4),), device=dev)
        lossf = nn.CrossEntropyLoss()

        def step():
            loss = lossf(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    def gpt2_generate():
        m = hf("GPT2LMHeadModel", "GPT2Config", **{**gpt2, "n_layer": L(4, 2)}).eval()
        x = ids(1, 16)
        n = L(8, 3)
        return lambda: m.generate(x, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0,
                                  attention_mask=torch.ones_like(x))

    def decode_loop():
        m = hf("LlamaForCausalLM", "LlamaConfig", **{**llama, "num_hidden_layers": L(4, 2)}).eval()
        prompt = ids(L(4, 2), 32)
        n = L(8, 3)

        def step():
            out = m(input_ids=prompt, use_cache=True)
            past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
            for _ in range(n):
                out = m(input_ids=tok, past_key_values=past, use_cache=True)
                past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
            return tok
        return step

    # name: (kind, ctx, {variant: (setup, make_step)} or a callable making that dict lazily)
    def tf32_pair(make, ctx=inf):
        def variants():
            fn = make()
            return {"fp32": (tf32(False), fn), "tf32": (tf32(True), fn)}
        return ("tf32", ctx, variants)

    def bf16_pair(make, ctx=inf):
        def variants():
            fn = make()
            return {"fp32": (tf32(False), fn), "bf16": (tf32(False), autocast(fn))}
        return ("bf16", ctx, variants)

    def graph_pair(make, ctx=inf):
        def variants():
            tf32(False)()
            fn = make()
            with ctx():
                g = graphed(fn)
            v = {"eager": (tf32(False), fn)}
            if g is not None:
                v["graph"] = (tf32(False), g)
            return v
        return ("graphs", ctx, variants)

    def single(make, ctx=inf):
        return ("single", ctx, lambda: {"fp32": (tf32(False), make())})

    spec = {
        # TF32 pairs
        "vit_l16_bs8": tf32_pair(lambda: fwd(hf("ViTModel", "ViTConfig", **vit_l), pixel_values=img(L(8, 2), hw))),
        "distilbert_bs64_s128": tf32_pair(lambda: fwd(hf("DistilBertModel", "DistilBertConfig",
                                                         **({"dim": 64, "n_layers": 2, "n_heads": 4, "hidden_dim": 128}
                                                            if s else {})), input_ids=ids(L(64, 2), L(128, 16)))),
        "resnet50_bs32": tf32_pair(lambda: call(on_dev(lambda: ResNet((3, 4, 6, 3), base=L(64, 8))),
                                                img(L(32, 2), hw))),
        "mistral_prefill_bs1_s512": tf32_pair(lambda: fwd(hf("MistralModel", "MistralConfig", use_cache=False,
                                                             **mistral), input_ids=ids(1, L(512, 32)))),
        "bert_bs1_s32": tf32_pair(lambda: fwd(hf("BertModel", "BertConfig", **bert), input_ids=ids(1, 32))),
        "gpt2_train_bs4_s128": tf32_pair(lambda: hf_train(hf("GPT2LMHeadModel", "GPT2Config",
                                                             **{**gpt2, "n_layer": L(6, 2)}), ids(L(4, 2), L(128, 16))),
                                         ctx=train),
        "bert6_train_bs8_s128": tf32_pair(lambda: hf_train(hf("BertModel", "BertConfig",
                                                              **{**bert, "num_hidden_layers": L(6, 2)}),
                                                          ids(L(8, 2), L(128, 16)), labels=False), ctx=train),
        # bf16 autocast pairs
        "wrn50_2_bs16": bf16_pair(lambda: call(on_dev(lambda: ResNet((3, 4, 6, 3), width_mult=2, base=L(64, 8))),
                                               img(L(16, 2), hw))),
        "gpt2_bs8_s256": bf16_pair(lambda: fwd(hf("GPT2Model", "GPT2Config", use_cache=False, **gpt2),
                                               input_ids=ids(L(8, 2), L(256, 16)))),
        "vit_b16_bs16": bf16_pair(lambda: fwd(hf("ViTModel", "ViTConfig", **vit_b), pixel_values=img(L(16, 2), hw))),
        "llama_prefill_bs1_s512": bf16_pair(lambda: fwd(hf("LlamaModel", "LlamaConfig", use_cache=False, **llama),
                                                        input_ids=ids(1, L(512, 32)))),
        # eager / CUDA graph pairs
        "squeezenet_bs1": graph_pair(lambda: call(on_dev(SqueezeNet), img(1, hw))),
        "resnet18_bs1": graph_pair(lambda: call(on_dev(lambda: ResNet((2, 2, 2, 2), bottleneck=False, base=L(64, 8))),
                                                img(1, hw))),
        "mlp8_bs1": graph_pair(lambda: call(on_dev(lambda: MLP(L(1024, 32), 8)),
                                           torch.randn(1, L(1024, 32), device=dev))),
        "gpt2_bs1_s16": graph_pair(lambda: fwd(hf("GPT2Model", "GPT2Config", use_cache=False, **gpt2),
                                               input_ids=ids(1, 16))),
        "bert4_bs1_s64": graph_pair(lambda: fwd(hf("BertModel", "BertConfig", **{**bert, "num_hidden_layers": L(4, 2)}),
                                                input_ids=ids(1, L(64, 16)))),
        "llama_decode_bs1": graph_pair(lambda: fwd(hf("LlamaModel", "LlamaConfig", use_cache=False, **llama),
                                                   input_ids=ids(1, 1))),
        # singles
        "gpt2_generate_bs1": single(gpt2_generate),
        "llama_decode_loop_bs4": single(decode_loop),
        "pinned_train_bs128": single(pinned_train, ctx=train),
        "mlp_train_bs32": single(mlp_train, ctx=train),
    }
    configs = []
    for name, (kind, ctx, variants) in spec.items():
        if only and name not in only:
            continue
        t = time.time()
        try:
            with ctx():
                built = variants()
        except Exception:  # noqa: BLE001
            log(f"BUILD FAILED {name}\n{traceback.format_exc()}")
            continue
        for i, (v, (setup, fn)) in enumerate(built.items()):
            role = "single" if kind == "single" else ("slow" if i == 0 else "fast")
            configs.append(Config(name, v, kind, role, fn, setup, ctx, name))
        log(f"built {name} ({', '.join(built)}) in {time.time() - t:.1f}s")
    return configs


# ---------------------------------------------------------------- host probes

def host_info(torch, dev):
    info = {"platform": platform.platform(), "python": platform.python_version(), "cpu_count": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as fh:
            info["mem_total_kb"] = int(fh.readline().split()[1])
    except (OSError, ValueError, IndexError):
        pass
    info["hostname"] = platform.node()
    return info


def probe(torch, dev, scale=1.0):
    """The host's speed now: 1e6 empty Python loop iterations (s), a tiny CPU torch op (µs), a tiny launch (µs).
    ``scale`` < 1: fewer iterations of each (the quick probe before each capture, a few ms)."""
    out = {"at_s": round(time.time() - T0, 1)}
    n = max(1, int(1_000_000 * scale))
    t = time.perf_counter()
    for _ in range(n):
        pass
    out["py_loop_1e6_s"] = (time.perf_counter() - t) * 1_000_000 / n
    a = torch.zeros(4)
    n = max(1, int(10_000 * scale))
    t = time.perf_counter()
    for _ in range(n):
        torch.add(a, 1)
    out["torch_cpu_add_us"] = (time.perf_counter() - t) / n * 1e6
    if dev == "cuda":
        x = torch.zeros(4, device=dev)
        n = max(1, int(2_000 * scale))
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            x.add_(1)
        out["cuda_launch_host_us"] = (time.perf_counter() - t) / n * 1e6
        torch.cuda.synchronize()
    return out


# ---------------------------------------------------------------- timing and capture

class Timer:
    def __init__(self, torch, dev):
        self.torch, self.cuda = torch, dev == "cuda"

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def steps(self, fn, n, warm=2):
        """Per-step time (µs) over ``n`` back-to-back steps, no synchronize between them."""
        for _ in range(warm):
            fn()
        if self.cuda:
            a, b = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(n):
                fn()
            b.record()
            b.synchronize()
            return a.elapsed_time(b) * 1e3 / n
        t = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t) * 1e6 / n


def warm_up(configs, timer):
    """Each configuration warmed up and its step timed once (synchronized, 3 steps), which sets the
    steps a round times (``N``: about TARGET_ROUND_S of steps); those that fail are left out."""
    for c in configs:
        try:
            c.setup()
            with c.ctx():
                for _ in range(2):
                    c.step()
                timer.sync()
                t = time.perf_counter()
                for _ in range(3):
                    c.step()
                timer.sync()
                dt = (time.perf_counter() - t) / 3
            c.n = int(min(60, max(5, round(TARGET_ROUND_S / max(dt, 1e-6)))))
            log(f"{c.key}: ~{dt * 1e3:.2f} ms/step (synced), N={c.n}")
        except Exception:  # noqa: BLE001
            log(f"WARMUP FAILED {c.key}\n{traceback.format_exc()}")
            c.n = 0
    return [c for c in configs if c.n]


def truth_round(configs, timer, r):
    k = max(1, len(configs) // ROUNDS + 1)
    order = configs[(r * k) % len(configs):] + configs[: (r * k) % len(configs)]
    t = time.time()
    for c in order:
        try:
            c.setup()
            with c.ctx():
                timer.sync()
                c.rounds.append(timer.steps(c.step, c.n))
        except Exception:  # noqa: BLE001
            log(f"TRUTH FAILED {c.key} round {r}\n{traceback.format_exc()}")
    timer.sync()
    log(f"truth round {r}: {time.time() - t:.1f}s")


def partner_round(c, partner, timer):
    """One unprofiled round of ``partner`` (the faster side of ``c``'s pair), then ``c``'s flags back."""
    partner.setup()
    with partner.ctx():
        timer.sync()
        us = timer.steps(partner.step, partner.n)
        timer.sync()
    c.setup()
    return us


def capture(torch, c, timer, path, opts, partner=None):
    """One capture as the recipe: schedule(wait=1, warmup=1, active=3), ``prof.step()`` per step, no sync.

    With ``partner`` (the faster side of a pair, for the slower side's captures) one unprofiled round of
    the partner runs right before and right after the window too: the what-if's truth at the host speed
    of the capture's own moment (``partner_bracket_us``)."""
    from torch.profiler import ProfilerActivity, profile, schedule

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if timer.cuda else [])
    written = {}

    def handler(p):
        t = time.time()
        raw = path[: -len(".gz")]
        p.export_chrome_trace(raw)
        with open(raw, "rb") as fin, gzip.open(path, "wb", compresslevel=6) as fout:
            shutil.copyfileobj(fin, fout)
        written["raw_bytes"] = os.path.getsize(raw)
        os.remove(raw)
        written["export_s"] = time.time() - t

    quick = probe(torch, "cuda" if timer.cuda else "cpu", scale=0.1)
    c.setup()
    partner_before = partner_round(c, partner, timer) if partner is not None else None
    host_steps = []
    with c.ctx():
        timer.sync()
        before = timer.steps(c.step, c.n)
        timer.sync()
        with profile(activities=acts, schedule=schedule(wait=1, warmup=1, active=3), on_trace_ready=handler,
                     **opts) as prof:
            for _ in range(5):
                t = time.perf_counter()
                c.step()
                prof.step()
                host_steps.append((time.perf_counter() - t) * 1e6)
        timer.sync()
        after = timer.steps(c.step, c.n)
        timer.sync()
    if partner is not None:
        written["partner"] = partner.key
        written["partner_bracket_us"] = [round(partner_before, 2), round(partner_round(c, partner, timer), 2)]
    written["bracket_us"] = [round(before, 2), round(after, 2)]
    written["host_loop_step_us"] = [round(x, 1) for x in host_steps]
    written["probe_before"] = quick
    written["gz_bytes"] = os.path.getsize(path)
    return written


SETTINGS = {"shapes": dict(record_shapes=True), "stack": dict(with_stack=True), "memory": dict(profile_memory=True)}
# (workload, variant) captured again under each setting: host-bound inference, a graph pair's eager side,
# training with a host-to-device copy, and the slower side of a bf16 pair (autocast what-if with shapes)
EXTRA = {"shapes": [("bert_bs1_s32", "fp32"), ("gpt2_bs1_s16", "eager"), ("pinned_train_bs128", "fp32"),
                    ("gpt2_bs8_s256", "fp32"), ("vit_b16_bs16", "fp32")],
         "stack": [("bert_bs1_s32", "fp32"), ("gpt2_bs1_s16", "eager"), ("pinned_train_bs128", "fp32")],
         "memory": [("bert_bs1_s32", "fp32"), ("gpt2_bs1_s16", "eager"), ("pinned_train_bs128", "fp32")]}


def pack(folder, dest):
    """The trace files of ``folder`` into tars of at most PACK_LIMIT bytes (traces-N.tar in ``dest``)."""
    files = sorted((os.path.getsize(os.path.join(folder, f)), f) for f in os.listdir(folder) if f.endswith(".json.gz"))
    bins = []
    for size, f in reversed(files):
        for b in bins:
            if b[0] + size <= PACK_LIMIT:
                b[0] += size
                b[1].append(f)
                break
        else:
            bins.append([size, [f]])
    for i, (_, names) in enumerate(bins[:6]):
        with tarfile.open(os.path.join(dest, f"traces-{i}.tar"), "w") as tar:
            for f in sorted(names):
                tar.add(os.path.join(folder, f), arcname=f)
    if len(bins) > 6:
        log(f"left behind: {[n for _, ns in bins[6:] for n in ns]}")
    return sum(s for s, _ in files)


def main(argv=None):
    global LOG
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--budget-s", type=float, default=float(os.environ.get("BUDGET_S", "430")),
                    help="after this many seconds, skip what is optional (later rounds, extra settings)")
    ap.add_argument("--no-extra", action="store_true", help="no captures under other profiler settings")
    ap.add_argument("--teardown", action="store_true",
                    help="TEARDOWN_CUPTI=1: Kineto finalizes CUPTI as each window ends, so the rounds after the "
                         "captures run in a process the profiler no longer holds (without it, CUPTI stays attached)")
    args = ap.parse_args(argv)
    if args.teardown:
        os.environ["TEARDOWN_CUPTI"] = "1"
    out = args.out
    tdir = os.path.join(out, "traces") if not os.environ.get("TRACE_DIR") else os.environ["TRACE_DIR"]
    os.makedirs(tdir, exist_ok=True)
    LOG = open(os.path.join(out, "capture.log"), "a")

    import torch
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        import transformers
        tver = transformers.__version__
    except Exception:  # noqa: BLE001
        tver = None
    gpu = torch.cuda.get_device_name() if dev == "cuda" else "cpu"
    host = host_info(torch, dev)
    log(f"torch {torch.__version__}, transformers {tver}, device {gpu}, host {host.get('cpu_model')} x{os.cpu_count()}")
    probes = [probe(torch, dev)]
    log(f"probe {probes[-1]}")
    timer = Timer(torch, dev)
    only = {x for x in args.only.split(",") if x}
    configs = build(torch, dev, only)
    over = lambda: time.time() - T0 > args.budget_s  # noqa: E731

    configs = warm_up(configs, timer)

    for r in range(ROUNDS_BEFORE):
        truth_round(configs, timer, r)
    before = {c.key: len(c.rounds) for c in configs}

    captured = {}
    fast_of = {c.workload: c for c in configs if c.role == "fast"}
    partner_of = lambda c: fast_of.get(c.workload) if c.role == "slow" else None  # noqa: E731
    for c in configs:
        if over():
            log(f"budget: capture of {c.key} skipped")
            continue
        fname = f"{c.key}.json.gz"
        try:
            t = time.time()
            info = capture(torch, c, timer, os.path.join(tdir, fname), {}, partner_of(c))
            captured[fname] = (c, "plain", {}, info, time.time() - T0)
            log(f"captured {fname}: {info['gz_bytes'] / 1e6:.2f} MB gz, host loop {info['host_loop_step_us']} us, "
                f"{time.time() - t:.1f}s")
        except Exception:  # noqa: BLE001
            log(f"CAPTURE FAILED {c.key}\n{traceback.format_exc()}")
    probes.append(probe(torch, dev))
    log(f"probe {probes[-1]}")

    for r in range(ROUNDS_BEFORE, ROUNDS):
        if over() and r >= ROUNDS_BEFORE + 1:
            log(f"budget: truth round {r} skipped")
            continue
        truth_round(configs, timer, r)

    by_key = {(c.workload, c.variant): c for c in configs}
    if not args.no_extra:
        for setting, opts in SETTINGS.items():
            for wv in EXTRA[setting]:
                c = by_key.get(wv)
                if c is None:
                    continue
                if over():
                    log(f"budget: {c.key} under {setting} skipped")
                    continue
                fname = f"{c.key}__{setting}.json.gz"
                try:
                    t = time.time()
                    info = capture(torch, c, timer, os.path.join(tdir, fname), opts, partner_of(c))
                    captured[fname] = (c, setting, opts, info, time.time() - T0)
                    log(f"captured {fname}: {info['gz_bytes'] / 1e6:.2f} MB gz, {time.time() - t:.1f}s")
                except Exception:  # noqa: BLE001
                    log(f"CAPTURE FAILED {fname}\n{traceback.format_exc()}")
    probes.append(probe(torch, dev))
    log(f"probe {probes[-1]}")

    host["probes"] = probes
    truth = {}
    for fname, (c, setting, opts, info, at) in sorted(captured.items()):
        if not c.rounds:
            continue
        truth[fname] = {
            "workload": c.workload, "variant": c.variant, "kind": c.kind, "role": c.role, "setting": setting,
            "profiler_options": {"activities": ["CPU", "CUDA"] if dev == "cuda" else ["CPU"],
                                 "schedule": {"wait": 1, "warmup": 1, "active": 3}, **opts},
            "truth_step_us": statistics.median(c.rounds), "rounds": [round(x, 2) for x in c.rounds],
            "steps_per_round": c.n, "rounds_before_captures": before[c.key],
            "cupti_teardown": os.environ.get("TEARDOWN_CUPTI") == "1",
            "truth_spread_pct": (max(c.rounds) - min(c.rounds)) / statistics.median(c.rounds) * 100,
            "captured_at_s": round(at, 1), "host_loop_step_us": info["host_loop_step_us"],
            "probe_before_capture": info["probe_before"], "bracket_us": info["bracket_us"],
            **{k: info[k] for k in ("partner", "partner_bracket_us") if k in info},
            "trace_bytes": info["raw_bytes"], "gpu": gpu, "torch": torch.__version__, "transformers": tver,
            "host": host,
        }
    with open(os.path.join(out, "truth.json"), "w") as fh:
        json.dump(truth, fh, indent=1, sort_keys=True)
    for c in configs:
        if c.rounds:
            log(f"truth {c.key}: {statistics.median(c.rounds):.1f} us/step, rounds "
                f"{[round(x) for x in c.rounds]} (N={c.n})")
    total = pack(tdir, out) if os.environ.get("PACK", "1") == "1" else 0
    log(f"{len(truth)} traces with truth, {total / 1e6:.2f} MB gz, done in {time.time() - T0:.1f}s")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
