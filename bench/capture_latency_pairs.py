"""Validation pairs for `nongemm-trace latency/whatif`: runs that differ in one thing
(TF32 off vs on; eager vs CUDA-graph replay), each with a Kineto trace and CUDA-event
step latencies measured without the profiler.

    python3 bench/capture_latency_pairs.py OUTDIR [NAME ...]   (STEPS=N: profiled steps, default 4)

Each NAME writes NAME.json.gz (4 steps, each in record_function("## step ##"), a
synchronize after each step, outside it) and NAME.meta.json: latency_ms_cuda_events (mean of
back-to-back steps), latency_ms_synced (mean of steps each followed by a synchronize, as in
the trace), what ran.
"""
import gzip, json, os, sys, time, traceback
import torch

OUT = sys.argv[1]; os.makedirs(OUT, exist_ok=True)
ONLY = set(sys.argv[2:])
DEV = "cuda"


def tf32(on):
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def hf_model(cls, cfg_cls, bs, seq, **cfg):
    import transformers as T
    c = getattr(T, cfg_cls)(**cfg)
    m = getattr(T, cls)(c).to(DEV).eval()
    x = torch.randint(0, 30000, (bs, seq), device=DEV)
    return lambda: m(input_ids=x)


def tv_model(name, bs, hw=224):
    import torchvision.models as M
    m = getattr(M, name)(weights=None).to(DEV).eval()
    x = torch.randn(bs, 3, hw, hw, device=DEV)
    return lambda: m(x)


def graphed(fn):
    """The same forward replayed from one CUDA graph (static input)."""
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


MAKERS = {
    # GEMM-bound at fp32: BERT-base, batch 32, 256 tokens
    "bert_bs32_s256": lambda: hf_model("BertModel", "BertConfig", 32, 256),
    # launch-bound: BERT-base, batch 1, 32 tokens
    "bert_bs1_s32": lambda: hf_model("BertModel", "BertConfig", 1, 32),
    # between: GPT-2 small, batch 4, 256 tokens
    "gpt2_bs4_s256": lambda: hf_model("GPT2Model", "GPT2Config", 4, 256),
    # convolutions (cuDNN TF32): ResNet-50 batch 32
    "resnet50_bs32": lambda: tv_model("resnet50", 32),
    # launch-bound convolutions: ResNet-18 batch 1
    "resnet18_bs1": lambda: tv_model("resnet18", 1),
}

RUNS = []
for base in MAKERS:
    for mode in ("fp32", "tf32"):
        RUNS.append((f"{base}__{mode}", base, mode, False))
for base in ("bert_bs1_s32", "resnet18_bs1", "gpt2_bs4_s256"):
    RUNS.append((f"{base}__tf32_graph", base, "tf32", True))


def latencies(fn, n=30):
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n):
        fn()
    e.record(); torch.cuda.synchronize()
    b2b = s.elapsed_time(e) / n
    per = []
    for _ in range(n):
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        per.append(s.elapsed_time(e))
    wall = []
    for _ in range(n):
        t = time.perf_counter(); fn(); torch.cuda.synchronize(); wall.append((time.perf_counter() - t) * 1e3)
    return b2b, sum(per) / n, sum(wall) / n


def run(tag, base, mode, graph, steps=int(os.environ.get("STEPS", "4"))):
    tf32(mode == "tf32")
    t0 = time.time()
    with torch.inference_mode():
        fn = MAKERS[base]()
        for _ in range(5):
            fn()
        if graph:
            fn = graphed(fn)
            for _ in range(3):
                fn()
        b2b, synced, wall = latencies(fn)
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        torch.cuda.synchronize()
        import gc
        gc.collect(); gc.disable()
        with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
            for _ in range(steps):
                with torch.profiler.record_function("## step ##"):
                    fn()
                torch.cuda.synchronize()
        gc.enable()
    path = os.path.join(OUT, tag + ".json")
    prof.export_chrome_trace(path)
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb", 9) as g:
        g.write(f.read())
    os.remove(path)
    meta = dict(workload=tag, model=base, precision=mode, cuda_graph=graph, steps_profiled=steps,
                latency_ms_cuda_events=b2b, latency_ms_synced=synced, latency_ms_host_wall=wall, iters_timed=30,
                gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                allow_tf32=torch.backends.cuda.matmul.allow_tf32, cudnn_allow_tf32=torch.backends.cudnn.allow_tf32)
    json.dump(meta, open(os.path.join(OUT, tag + ".meta.json"), "w"), indent=1)
    print(f"{tag}: b2b {b2b:.3f} ms, synced {synced:.3f} ms, wall {wall:.3f} ms ({time.time() - t0:.1f}s)", flush=True)


for tag, base, mode, graph in RUNS:
    if ONLY and tag not in ONLY and base not in ONLY:
        continue
    try:
        run(tag, base, mode, graph)
    except Exception:
        traceback.print_exc()
    torch.cuda.empty_cache()
