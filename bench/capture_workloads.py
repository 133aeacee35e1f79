"""Real GPU captures of workloads the shared trace set lacks, each with torch.profiler's own
key_averages() and the CUDA-event step latency beside it (NAME.meta.json), to check the
analysis against on models, ops and capture modes it was not written on.

    python3 bench/capture_workloads.py OUTDIR [vit convnext unet t5 moe maskrcnn lstm ctrain w8a8]

Run on a CUDA machine with torch, torchvision, timm and transformers (random weights, no
downloads). It made sample_traces/collected/{embbag_lstm,mixtral_tiny_moe,gpt2_small_*}
on an NVIDIA H200 (torch 2.11): ViT under fp16 autocast, ConvNeXt training with a
GradScaler (written by the TensorBoard handler, ``*.pt.trace.json.gz``), a GroupNorm /
attention UNet in channels-last bf16 with stack and modules, T5 generate, a Mixtral-style
MoE, Mask R-CNN, an embedding bag + cuDNN LSTM training step with profile_memory and
with_flops, and a torch.compile'd GPT-2 training step."""
import gzip
import json
import os
import sys
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
ONLY = set(sys.argv[2:])
DEV = "cuda"


def profile(tag, fn, steps=2, warm=3, handler=False, **kw):
    t0 = time.time()
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(5):
        fn()
    e.record()
    torch.cuda.synchronize()
    lat = s.elapsed_time(e) / 5
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    if handler:  # the TensorBoard handler's own file naming and gzip
        sched = torch.profiler.schedule(wait=1, warmup=1, active=steps)
        handler = torch.profiler.tensorboard_trace_handler(os.path.join(OUT, tag), use_gzip=True)
        with torch.profiler.profile(activities=acts, schedule=sched, record_shapes=True, on_trace_ready=handler,
                                    **kw) as prof:
            for _ in range(steps + 2):
                fn()
                torch.cuda.synchronize()
                prof.step()
    else:
        with torch.profiler.profile(activities=acts, record_shapes=True, **kw) as prof:
            for _ in range(steps):
                with torch.profiler.record_function("## step ##"):
                    fn()
                torch.cuda.synchronize()
        path = os.path.join(OUT, tag + ".json")
        prof.export_chrome_trace(path)
        with open(path, "rb") as f, gzip.open(path + ".gz", "wb", 6) as g:
            g.write(f.read())
        os.remove(path)
    rows = [dict(key=k.key, count=k.count, cpu_time_total_us=k.cpu_time_total,
                 self_cpu_time_total_us=k.self_cpu_time_total,
                 device_time_total_us=k.device_time_total, self_device_time_total_us=k.self_device_time_total,
                 flops=k.flops)
            for k in prof.key_averages()]
    json.dump(dict(workload=tag, steps_profiled=steps, latency_ms_cuda_events=lat, iters_timed=5,
                   gpu=torch.cuda.get_device_name(), torch=torch.__version__, key_averages=rows),
              open(os.path.join(OUT, tag + ".meta.json"), "w"))
    print(f"{tag}: {lat:.3f} ms/iter, {time.time()-t0:.1f}s", flush=True)


def train_step(m, x, y=None, opt=None, amp=None, scaler=None, loss_fn=None):
    def step():
        with torch.autocast("cuda", dtype=amp, enabled=amp is not None):
            out = m(x)
            loss = loss_fn(out) if loss_fn else out.float().mean()
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)
    return step


class TinyUNet(nn.Module):
    """Diffusion-style UNet block stack: GroupNorm + SiLU convs, self-attention, nearest upsampling."""
    def __init__(self, c=128):
        super().__init__()
        def res(ci, co):
            return nn.Sequential(nn.GroupNorm(32, ci), nn.SiLU(), nn.Conv2d(ci, co, 3, padding=1),
                                 nn.GroupNorm(32, co), nn.SiLU(), nn.Conv2d(co, co, 3, padding=1))
        self.inp = nn.Conv2d(4, c, 3, padding=1)
        self.d1, self.d2 = res(c, c), res(c, 2 * c)
        self.down = nn.Conv2d(2 * c, 2 * c, 3, stride=2, padding=1)
        self.mid = res(2 * c, 2 * c)
        self.attn = nn.MultiheadAttention(2 * c, 8, batch_first=True)
        self.u1 = res(4 * c, c)
        self.out = nn.Conv2d(c, 4, 3, padding=1)

    def forward(self, x):
        h = self.inp(x)
        h = self.d2(self.d1(h))
        skip = h
        h = self.mid(self.down(h))
        b, ch, hh, ww = h.shape
        t = h.flatten(2).transpose(1, 2)
        t = self.attn(t, t, t, need_weights=False)[0]
        h = t.transpose(1, 2).reshape(b, ch, hh, ww)
        h = F.interpolate(h, scale_factor=2, mode="nearest")
        h = self.u1(torch.cat([h, skip], 1))
        return self.out(h)


def jobs():
    import timm
    import torchvision
    import transformers as T
    j = {}

    def vit():
        m = timm.create_model("vit_base_patch16_224", pretrained=False).to(DEV).eval()
        x = torch.randn(16, 3, 224, 224, device=DEV)
        with torch.inference_mode(), torch.autocast("cuda", dtype=torch.float16):
            profile("vit_b16_amp_fp16_bs16__eager", lambda: m(x))
    j["vit"] = vit

    def convnext_train():
        m = torchvision.models.convnext_tiny(weights=None).to(DEV).train()
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        x = torch.randn(16, 3, 224, 224, device=DEV)
        profile("convnext_tiny_amp_fp16_gradscaler_train_bs16__eager",
                train_step(m, x, opt=opt, amp=torch.float16, scaler=torch.amp.GradScaler("cuda")), handler=True)
    j["convnext"] = convnext_train

    def unet_cl():
        m = TinyUNet().to(DEV).to(memory_format=torch.channels_last).eval()
        x = torch.randn(4, 4, 64, 64, device=DEV).to(memory_format=torch.channels_last)
        with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
            profile("tiny_unet_groupnorm_attn_bf16_channels_last_bs4__eager", lambda: m(x), with_stack=True,
                    with_modules=True)
    j["unet"] = unet_cl

    def t5_generate():
        cfg = T.T5Config(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8,
                         decoder_start_token_id=0)
        m = T.T5ForConditionalGeneration(cfg).to(DEV).eval()
        x = torch.randint(0, 32000, (4, 64), device=DEV)
        with torch.inference_mode():
            profile("t5_small_generate_bs4_in64_out16__eager",
                    lambda: m.generate(input_ids=x, max_new_tokens=16, min_new_tokens=16, do_sample=False), warm=2)
    j["t5"] = t5_generate

    def moe():
        cfg = T.MixtralConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2048, num_hidden_layers=4,
                              num_attention_heads=16, num_key_value_heads=4, num_local_experts=8, num_experts_per_tok=2)
        m = T.MixtralForCausalLM(cfg).to(DEV, torch.bfloat16).eval()
        x = torch.randint(0, 32000, (2, 512), device=DEV)
        with torch.inference_mode():
            profile("mixtral_tiny_moe_bf16_bs2_s512__eager", lambda: m(input_ids=x))
    j["moe"] = moe

    def maskrcnn():
        m = torchvision.models.detection.maskrcnn_resnet50_fpn(weights=None, weights_backbone=None).to(DEV).eval()
        x = [torch.rand(3, 480, 640, device=DEV) for _ in range(2)]
        with torch.inference_mode():
            profile("maskrcnn_resnet50_fpn_bs2__eager", lambda: m(x), warm=2)
    j["maskrcnn"] = maskrcnn

    def lstm_emb():
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.EmbeddingBag(100000, 128, mode="sum")
                self.lstm = nn.LSTM(128, 512, num_layers=2, batch_first=True)
                self.head = nn.Linear(512, 10)
            def forward(self, idx):
                e = self.emb(idx.view(-1, 8)).view(idx.shape[0], -1, 128)
                o, _ = self.lstm(e)
                return self.head(o[:, -1])
        m = M().to(DEV).train()
        opt = torch.optim.Adam(m.parameters(), lr=1e-3)
        idx = torch.randint(0, 100000, (64, 32 * 8), device=DEV)
        profile("embbag_lstm_train_bs64__eager", train_step(m, idx, opt=opt), profile_memory=True, with_flops=True)
    j["lstm"] = lstm_emb

    def compiled_train():
        cfg = T.GPT2Config(n_embd=512, n_layer=4, n_head=8, vocab_size=32000, n_positions=512)
        m = T.GPT2LMHeadModel(cfg).to(DEV).train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
        x = torch.randint(0, 32000, (8, 256), device=DEV)
        cm = torch.compile(m)
        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = cm(input_ids=x, labels=x).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        profile("gpt2_small_bf16_train_bs8_s256__compiled", step, warm=3)
    j["ctrain"] = compiled_train

    def w8a8():
        """Llama-shaped decoder layers (hidden 2048, MLP 8192, 4 layers, 512 tokens) with W8A8 int8
        linears: dynamic per-token activation quantization (abs, amax, div, round, clamp, to int8),
        per-output-channel int8 weights, torch._int_mm, and the int32 accumulator dequantized (to
        float, x activation scale, x weight scale, to fp16); RMSNorm and SiLU written out as HF does."""
        torch.manual_seed(0)
        H, FF, L, S = 2048, 8192, 4, 512

        def qweight(n_out, n_in):
            w = torch.randn(n_out, n_in, device=DEV) * 0.02
            scale = w.abs().amax(dim=1, keepdim=True) / 127
            return (w / scale).round().clamp(-128, 127).to(torch.int8).t().contiguous(), scale.t().to(torch.float32)

        def quant_act(x):
            scale = x.abs().amax(dim=-1, keepdim=True).to(torch.float32) / 127
            return (x / scale).round().clamp(-128, 127).to(torch.int8), scale

        def linear(x, w):
            wq, ws = w
            xq, xs = quant_act(x)
            acc = torch._int_mm(xq, wq)
            return (acc.to(torch.float32) * xs * ws).to(torch.float16)

        def rmsnorm(x, weight):
            h = x.to(torch.float32)
            var = h.pow(2).mean(-1, keepdim=True)
            h = h * torch.rsqrt(var + 1e-6)
            return weight * h.to(torch.float16)

        layers = [dict(q=qweight(H, H), k=qweight(H, H), v=qweight(H, H), o=qweight(H, H), gate=qweight(FF, H),
                       up=qweight(FF, H), down=qweight(H, FF), n1=torch.ones(H, device=DEV, dtype=torch.float16),
                       n2=torch.ones(H, device=DEV, dtype=torch.float16)) for _ in range(L)]
        x0 = torch.randn(S, H, device=DEV, dtype=torch.float16)

        def step():
            with torch.inference_mode():
                x = x0
                for p in layers:
                    h = rmsnorm(x, p["n1"])
                    q, k, v = linear(h, p["q"]), linear(h, p["k"]), linear(h, p["v"])
                    a = F.scaled_dot_product_attention(q.view(1, S, 16, 128).transpose(1, 2),
                                                       k.view(1, S, 16, 128).transpose(1, 2),
                                                       v.view(1, S, 16, 128).transpose(1, 2), is_causal=True)
                    x = x + linear(a.transpose(1, 2).reshape(S, H), p["o"])
                    h = rmsnorm(x, p["n2"])
                    g = linear(h, p["gate"])
                    x = x + linear(g * torch.sigmoid(g) * linear(h, p["up"]), p["down"])
                return x
        profile("llama_w8a8_int8_bs1_s512__eager", step)
    j["w8a8"] = w8a8
    return j


for k, fn in jobs().items():
    if ONLY and k not in ONLY:
        continue
    try:
        fn()
    except Exception:  # noqa: BLE001
        print(k, "FAILED", flush=True)
        traceback.print_exc()
    torch.cuda.empty_cache()
