"""Captures for the profiler-overhead model and the unprofiled what-if validation (docs/latency.md).

    python3 bench/capture_unprofiled.py OUTDIR [WORKLOAD ...]      (on the GPU machine)
    SET=heldout SETTINGS=shapes,plain python3 bench/capture_unprofiled.py OUTDIR   (the held-out set)

Each workload is a pair (or trio) of configurations that differ in one thing: TF32 off/on
(GEMM speed), eager/CUDA-graph replay (launch cost), fp32/bf16 autocast. For every profiler
setting (``shapes``: record_shapes, the collectors' default; ``plain``: nothing recorded but the
events; ``stack``: record_shapes + with_stack) and every configuration, in an order that rotates
from one setting to the next, the torch collector's ``capture`` runs: unprofiled rounds before
the window, the profiled window (ProfilerStep#N steps, a synchronize after each), unprofiled
rounds after it, all written into the trace as ``nongemm_unprofiled``
(nongemm_trace/collectors/unprofiled.py). So each configuration is timed without the profiler in
``2 x settings`` rounds interleaved with the other configurations' captures.

Writes OUTDIR/WORKLOAD__CONFIG__SETTING.json.gz and OUTDIR/WORKLOAD.meta.json (what each
configuration is, and every capture's unprofiled medians), then packs OUTDIR into at most eight
tar files under 15 MB (the device tool's limits) named pack-N.tar.
"""
from __future__ import annotations

import contextlib
import gzip
import json
import os
import sys
import tarfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

STEPS = int(os.environ.get("STEPS", "4"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))           # unprofiled rounds per capture (half before, half after)
ROUND_STEPS = int(os.environ.get("ROUND_STEPS", "5"))
SETTINGS = {"shapes": dict(record_shapes=True), "plain": dict(record_shapes=False),
            "stack": dict(record_shapes=True, with_stack=True)}
SETTINGS = {k: v for k, v in SETTINGS.items() if k in os.environ.get("SETTINGS", ",".join(SETTINGS)).split(",")}
PACK_LIMIT = 15 * 2 ** 20


def workloads(torch, dev):
    def tf32(on):
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on

    def hf(cls, cfg_cls, bs, seq, **cfg):
        import transformers as T
        m = getattr(T, cls)(getattr(T, cfg_cls)(**cfg)).to(dev).eval()
        x = torch.randint(0, 1000, (bs, seq), device=dev)
        return lambda: m(input_ids=x)

    def tv(name, bs, hw=224):
        import torchvision.models as M
        m = getattr(M, name)(weights=None).to(dev).eval()
        x = torch.randn(bs, 3, hw, hw, device=dev)
        return lambda: m(x)

    def timm_model(name, bs):
        import timm
        m = timm.create_model(name, pretrained=False).to(dev).eval()
        x = torch.randn(bs, 3, 224, 224, device=dev)
        return lambda: m(x)

    def hf_train(cls, cfg_cls, bs, seq, **cfg):
        import transformers as T
        m = getattr(T, cls)(getattr(T, cfg_cls)(**cfg)).to(dev).train()
        x = torch.randint(0, 1000, (bs, seq), device=dev)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-5)

        def step():
            out = m(input_ids=x)
            out.last_hidden_state.float().pow(2).mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    def graphed(fn):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        return g.replay

    def autocast(fn):
        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return fn()
        return step

    llama = dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                 num_key_value_heads=4, vocab_size=32000, use_cache=False)
    qwen = dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=16,
                num_key_value_heads=8, vocab_size=32000, head_dim=64, use_cache=False)
    def tf32_pair(make):
        return {"fp32": (lambda: tf32(False), make), "tf32": (lambda: tf32(True), make)}
    def graph_pair(make):
        return {"eager": (lambda: tf32(True), make),
                                   "graph": (lambda: tf32(True), lambda: graphed(make()))}
    def bf16_pair(make):
        return {"fp32": (lambda: tf32(False), make),
                                  "bf16": (lambda: tf32(False), lambda: autocast(make()))}
    mistral = dict(hidden_size=1024, intermediate_size=3584, num_hidden_layers=8, num_attention_heads=16,
                   num_key_value_heads=8, vocab_size=32000, use_cache=False)
    if os.environ.get("SET") == "heldout":
        # workloads the overhead model was never fitted on (docs/latency.md, "Held out")
        return {
            "resnet101_bs16": ("tf32", False, tf32_pair(lambda: tv("resnet101", 16))),
            "roberta_bs16_s128": ("tf32", False, tf32_pair(lambda: hf("RobertaModel", "RobertaConfig", 16, 128))),
            "swin_t_bs16": ("tf32", False, tf32_pair(lambda: tv("swin_t", 16))),
            "mistral_prefill_bs1_s256": ("tf32", False, tf32_pair(
                lambda: hf("MistralModel", "MistralConfig", 1, 256, **mistral))),
            "bert_train_bs8_s128": ("tf32", True, tf32_pair(lambda: hf_train("BertModel", "BertConfig", 8, 128))),
            "mobilenetv3l_bs8": ("tf32", False, tf32_pair(lambda: tv("mobilenet_v3_large", 8))),
            "mobilenetv3s_bs1": ("graphs", False, graph_pair(lambda: tv("mobilenet_v3_small", 1))),
            "gpt2_bs1_s16": ("graphs", False, graph_pair(
                lambda: hf("GPT2Model", "GPT2Config", 1, 16, use_cache=False))),
            "efficientnet_b0_bs1": ("graphs", False, graph_pair(lambda: tv("efficientnet_b0", 1))),
            "resnet50_bs32": ("bf16", False, bf16_pair(lambda: tv("resnet50", 32))),
            "bert_bs16_s128": ("bf16", False, bf16_pair(lambda: hf("BertModel", "BertConfig", 16, 128))),
            "mistral_prefill_bs1_s512": ("bf16", False, bf16_pair(
                lambda: hf("MistralModel", "MistralConfig", 1, 512, **mistral))),
        }
    return {
        # TF32 off/on: device-bound, between, training, host-bound
        "resnet50_bs32": ("tf32", False, tf32_pair(lambda: tv("resnet50", 32))),
        "bert_bs32_s128": ("tf32", False, tf32_pair(lambda: hf("BertModel", "BertConfig", 32, 128))),
        "convnext_tiny_bs32": ("tf32", False, tf32_pair(lambda: tv("convnext_tiny", 32))),
        "gpt2_train_bs4_s128": ("tf32", True, tf32_pair(lambda: hf_train("GPT2Model", "GPT2Config", 4, 128))),
        "qwen_prefill_bs1_s512": ("tf32", False, tf32_pair(lambda: hf("Qwen3Model", "Qwen3Config", 1, 512, **qwen))),
        "bert_bs1_s32": ("tf32", False, tf32_pair(lambda: hf("BertModel", "BertConfig", 1, 32))),
        # eager / CUDA graphs: launch-bound
        "resnet18_bs1": ("graphs", False, graph_pair(lambda: tv("resnet18", 1))),
        "encoder6_bs1_s64": ("graphs", False, graph_pair(lambda: hf("BertModel", "BertConfig", 1, 64,
                                                                   num_hidden_layers=6))),
        "llama_decode_bs1": ("graphs", False, graph_pair(lambda: hf("LlamaModel", "LlamaConfig", 1, 1, **llama))),
        "mixer_b16_bs8": ("graphs", False, graph_pair(lambda: autocast(timm_model("mixer_b16_224", 8)))),
        # fp32 / bf16 autocast
        "vit_b16_bs16": ("bf16", False, bf16_pair(lambda: tv("vit_b_16", 16))),
        "gpt2_bs8_s256": ("bf16", False, bf16_pair(lambda: hf("GPT2Model", "GPT2Config", 8, 256))),
    }


def capture_all(out, only):
    import torch

    from nongemm_trace.collectors.torch_profiler import capture

    dev = os.environ.get("DEV", "cuda")  # DEV=cpu: a dry run of the tf32 workloads here
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    os.makedirs(out, exist_ok=True)
    for name, (kind, train, configs) in workloads(torch, dev).items():
        if only and name not in only:
            continue
        t0 = time.time()
        try:
            with contextlib.nullcontext() if train else torch.inference_mode():
                built = {}
                for c, (setup, make) in configs.items():
                    setup()
                    built[c] = (setup, make())
                    for _ in range(3):
                        built[c][1]()
                sync()
                names = list(built)
                meta = {"workload": name, "kind": kind, "configs": names, "captures": {},
                        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
                        "torch": torch.__version__}
                for i, (setting, opts) in enumerate(SETTINGS.items()):
                    order = names[i % len(names):] + names[: i % len(names)]
                    for c in order:
                        setup, fn = built[c]
                        setup()
                        stem = f"{name}__{c}__{setting}"
                        steps = STEPS if setting != "stack" else max(2, STEPS - 1)
                        path = capture(fn, out, stem, steps=steps, wait=0, warmup=1, summary=False,
                                       unprofiled_rounds=ROUNDS, unprofiled_steps=ROUND_STEPS,
                                       metadata={"workload": name, "config": c, "setting": setting}, **opts)
                        with gzip.open(path, "rt") as fh:
                            un = json.load(fh)["nongemm_unprofiled"]
                        meta["captures"][stem] = {k: un[k] for k in ("step_us", "host_issue_us", "round_step_us",
                                                                      "round_host_issue_us")}
                with open(os.path.join(out, name + ".meta.json"), "w") as fh:
                    json.dump(meta, fh, indent=1)
            print(f"{name}: {time.time() - t0:.1f}s " + ", ".join(
                f"{k.split('__', 1)[1]}={v['step_us']:.0f}us" for k, v in meta["captures"].items()), flush=True)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def pack(out, dest):
    """The files of ``out`` into tars of at most PACK_LIMIT bytes each, the biggest first."""
    files = sorted((os.path.getsize(os.path.join(out, f)), f) for f in os.listdir(out))
    bins = []
    for size, f in reversed(files):
        if size > PACK_LIMIT:
            print(f"too big to bring back: {f} ({size} bytes)")
            continue
        for b in bins:
            if b[0] + size <= PACK_LIMIT:
                b[0] += size
                b[1].append(f)
                break
        else:
            bins.append([size, [f]])
    for i, (_, names) in enumerate(bins[:8]):
        with tarfile.open(os.path.join(dest, f"pack-{i}.tar"), "w") as tar:
            for f in names:
                tar.add(os.path.join(out, f), arcname=f)
    if len(bins) > 8:
        print(f"{len(bins) - 8} packs left behind: {[n for _, ns in bins[8:] for n in ns]}")


if __name__ == "__main__":
    out = sys.argv[1]
    capture_all(out, set(sys.argv[2:]))
    if os.environ.get("PACK_TO"):
        pack(out, os.environ["PACK_TO"])
