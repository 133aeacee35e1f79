"""Validation pairs for `nongemm-trace latency/whatif`: runs that differ in one thing
(TF32 off vs on; eager vs CUDA-graph replay), captured **interleaved in one process and one
profiler session**, so that both runs of a pair see the same host (CPU clock, load, caches).

    python3 bench/capture_latency_pairs.py capture OUTDIR [NAME ...]   (on the GPU machine; ROUNDS, STEPS,
                                                                        CONTROL=1 adds an fp32 twin)
    python3 bench/capture_latency_pairs.py merge SEGDIR OUTDIR [--rounds K] [--steps N]

`capture`: per model (inference forwards, and two training steps with autograd's backward
thread and an optimizer), every configuration (fp32, tf32, and for three models tf32 replayed
from a CUDA graph) is warmed up, then one torch.profiler session runs ROUNDS rounds; each round
runs every configuration once, in an order that rotates from round to round (A B C, B C A, …),
as a *segment*: switch the configuration, one warm-up step, then STEPS steps, each in
record_function("## step ##") with a synchronize after it, the whole segment inside a
record_function("seg/CONFIG/ROUND") marker. Python's garbage collector is off while profiling.
The session's trace is cut into one trace per segment (the events starting inside the marker,
which holds the segment's kernels too: each step ends in a synchronize); the warm-up steps
and the switches fall outside. CUDA-event latencies without the profiler are measured the same
way, interleaved (mean of steps each followed by a synchronize, and of back-to-back steps).
Writes OUTDIR/NAME.tar: NAME__CONFIG__rRR.json.gz per segment and NAME.meta.json.

`merge`: one trace per configuration from the first K rounds' segments, the first N steps of
each (the steps of matched rounds, so each pair shares its host conditions), plus
NAME__CONFIG.meta.json. The merged trace's steps are whole (launches, kernels and the
synchronize after them); the time between segments holds no event.
"""
import gzip
import io
import json
import os
import sys
import tarfile
import time
import traceback

ROUNDS = int(os.environ.get("ROUNDS", "5"))
STEPS = int(os.environ.get("STEPS", "4"))
STEP = "## step ##"


def capture(out, only):
    import torch
    dev = "cuda"

    def tf32(on):
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on

    def hf_model(cls, cfg_cls, bs, seq, **cfg):
        import transformers as T
        m = getattr(T, cls)(getattr(T, cfg_cls)(**cfg)).to(dev).eval()
        x = torch.randint(0, 30000, (bs, seq), device=dev)
        return lambda: m(input_ids=x)

    def tv_model(name, bs, hw=224):
        import torchvision.models as M
        m = getattr(M, name)(weights=None).to(dev).eval()
        x = torch.randn(bs, 3, hw, hw, device=dev)
        return lambda: m(x)

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

    def hf_train(cls, cfg_cls, bs, seq):
        """A training step: forward, loss, backward (autograd's own thread), AdamW step (foreach)."""
        import transformers as T
        m = getattr(T, cls)(getattr(T, cfg_cls)()).to(dev).train()
        x = torch.randint(0, 30000, (bs, seq), device=dev)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-5)

        def step():
            out = m(input_ids=x)
            out.last_hidden_state.float().pow(2).mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    makers = {
        "bert_bs1_s32": (lambda: hf_model("BertModel", "BertConfig", 1, 32), True),        # launch-bound
        "resnet18_bs1": (lambda: tv_model("resnet18", 1), True),                           # launch-bound convs
        "gpt2_bs4_s256": (lambda: hf_model("GPT2Model", "GPT2Config", 4, 256), True),      # between
        "resnet50_bs32": (lambda: tv_model("resnet50", 32), False),                        # cuDNN convs
        "bert_bs32_s256": (lambda: hf_model("BertModel", "BertConfig", 32, 256), False),   # GEMM-bound
        # models the replay was not tuned on (a held-out check of the same protocol)
        "vit_b16_bs32": (lambda: tv_model("vit_b_16", 32), False),                       # GEMM-bound ViT
        "mobilenetv3_bs1": (lambda: tv_model("mobilenet_v3_large", 1), True),             # launch-bound convs
        "llama_1k_bs1_s128": (lambda: hf_model("LlamaModel", "LlamaConfig", 1, 128, hidden_size=1024,
                                               intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                                               num_key_value_heads=4, vocab_size=32000), True),
        "bert_train_bs8_s128": (lambda: hf_train("BertModel", "BertConfig", 8, 128), False),  # training
        "gpt2_train_bs1_s64": (lambda: hf_train("GPT2Model", "GPT2Config", 1, 64), False),    # host-bound training
    }
    import gc
    for base, (make, with_graph) in makers.items():
        if only and base not in only:
            continue
        t0 = time.time()
        try:
            import contextlib
            with contextlib.nullcontext() if "train" in base else torch.inference_mode():
                fn = make()
                configs = {"fp32": (False, fn), "tf32": (True, fn)}
                if os.environ.get("CONTROL"):  # an A/A control: fp32 twice, the capture's own noise floor
                    configs["fp32again"] = (False, fn)
                if with_graph:
                    tf32(True)
                    for _ in range(3):
                        fn()
                    configs["tf32_graph"] = (True, graphed(fn))
                for on, f in configs.values():
                    tf32(on)
                    for _ in range(5):
                        f()
                torch.cuda.synchronize()
                names = list(configs)
                order = [names[r % len(names):] + names[: r % len(names)] for r in range(ROUNDS)]
                lat = {c: {"synced": [], "b2b": []} for c in names}
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                for r in range(ROUNDS):
                    for c in order[r]:
                        on, f = configs[c]
                        tf32(on)
                        f()
                        torch.cuda.synchronize()
                        for _ in range(6):
                            s.record()
                            f()
                            e.record()
                            torch.cuda.synchronize()
                            lat[c]["synced"].append(s.elapsed_time(e))
                        s.record()
                        for _ in range(6):
                            f()
                        e.record()
                        torch.cuda.synchronize()
                        lat[c]["b2b"].append(s.elapsed_time(e) / 6)
                acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
                gc.collect()
                gc.disable()
                with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
                    for r in range(ROUNDS):
                        for c in order[r]:
                            on, f = configs[c]
                            tf32(on)
                            f()
                            torch.cuda.synchronize()          # warm-up after the switch
                            with torch.profiler.record_function(f"seg/{c}/{r:02d}"):
                                for _ in range(STEPS):
                                    with torch.profiler.record_function(STEP):
                                        f()
                                    torch.cuda.synchronize()
                gc.enable()
            path = os.path.join("/tmp", base + ".session.json")
            prof.export_chrome_trace(path)
            with open(path) as fh:
                trace = json.load(fh)
            os.remove(path)
            with tarfile.open(os.path.join(out, base + ".tar"), "w") as tar:
                for seg, doc in split_segments(trace).items():
                    c, r = seg.split("/")[1:]
                    add(tar, f"{base}__{c}__r{r}.json.gz", gzip.compress(json.dumps(doc).encode(), 6))
                meta = dict(model=base, rounds=ROUNDS, steps_per_segment=STEPS, order=order,
                            latency_ms_synced={c: sum(v["synced"]) / len(v["synced"]) for c, v in lat.items()},
                            latency_ms_cuda_events={c: sum(v["b2b"]) / len(v["b2b"]) for c, v in lat.items()},
                            gpu=torch.cuda.get_device_name(), torch=torch.__version__)
                add(tar, base + ".meta.json", json.dumps(meta, indent=1).encode())
            print(f"{base}: {meta['latency_ms_synced']} ({time.time() - t0:.1f}s)", flush=True)
        except Exception:  # noqa: BLE001
            gc.enable()
            traceback.print_exc()
        torch.cuda.empty_cache()


def add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def split_segments(trace):
    """One trace document per `seg/…` marker: the events that start inside it (metadata kept)."""
    events = trace["traceEvents"]
    marks = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in events
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith("seg/")
                   and e.get("cat") == "user_annotation")
    head = {k: v for k, v in trace.items() if k != "traceEvents"}
    keep_all = [e for e in events if e.get("ph") == "M"]
    buckets = {name: [] for _, _, name in marks}
    starts = [m[0] for m in marks]
    import bisect
    for e in events:
        if e.get("ph") == "M" or "ts" not in e or str(e.get("name", "")).startswith("seg/"):
            continue
        i = bisect.bisect_right(starts, e["ts"]) - 1
        if i >= 0 and e["ts"] <= marks[i][1]:
            buckets[marks[i][2]].append(e)
    return {name: {**head, "traceEvents": keep_all + evs} for name, evs in buckets.items()}


def merge(segdir, out, rounds, steps):
    """NAME__CONFIG.json.gz from the first `rounds` rounds, the first `steps` steps of each."""
    os.makedirs(out, exist_ok=True)
    for tpath in sorted(p for p in os.listdir(segdir) if p.endswith(".tar")):
        with tarfile.open(os.path.join(segdir, tpath)) as tar:
            members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
        meta = json.loads(members.pop(tpath[:-4] + ".meta.json"))
        by_config = {}
        for name in sorted(members):
            base, config, r = name[: -len(".json.gz")].split("__")
            if int(r[1:]) < rounds:
                by_config.setdefault(config, []).append(json.loads(gzip.decompress(members[name])))
        for config, docs in by_config.items():
            evs, seen_meta = [], set()
            for doc in docs:
                for e in first_steps(doc["traceEvents"], steps):
                    if e.get("ph") == "M":
                        key = json.dumps(e, sort_keys=True)
                        if key not in seen_meta:
                            seen_meta.add(key)
                            evs.append(e)
                    else:
                        evs.append(e)
            head = {k: v for k, v in docs[0].items() if k != "traceEvents"}
            with gzip.open(os.path.join(out, f"{base}__{config}.json.gz"), "wt", 9) as fh:
                json.dump({**head, "traceEvents": evs}, fh)
            kept = min(rounds, meta["rounds"])
            m = dict(workload=f"{base}__{config}", model=base, config=config, rounds=kept,
                     steps_profiled=kept * min(steps, meta["steps_per_segment"]), interleaved_with=list(by_config),
                     latency_ms_synced=meta["latency_ms_synced"][config],
                     latency_ms_cuda_events=meta["latency_ms_cuda_events"][config],
                     gpu=meta["gpu"], torch=meta["torch"])
            with open(os.path.join(out, f"{base}__{config}.meta.json"), "w") as fh:
                json.dump(m, fh, indent=1)


def first_steps(events, steps):
    """A segment's events before its step number `steps` starts (each step ends in a synchronize)."""
    marks = sorted(e["ts"] for e in events if e.get("name") == STEP and e.get("cat") == "user_annotation")
    if len(marks) <= steps:
        return events
    return [e for e in events if e.get("ph") == "M" or e["ts"] < marks[steps]]


if __name__ == "__main__":
    if sys.argv[1] == "capture":
        os.makedirs(sys.argv[2], exist_ok=True)
        capture(sys.argv[2], set(sys.argv[3:]))
    else:
        args = sys.argv[2:]
        opt = {"--rounds": 99, "--steps": 99}
        for k in opt:
            if k in args:
                i = args.index(k)
                opt[k] = int(args[i + 1])
                del args[i: i + 2]
        merge(args[0], args[1], opt["--rounds"], opt["--steps"])
