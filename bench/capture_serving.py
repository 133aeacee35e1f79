"""Serving captures on a GPU for the phases and graph-capture checks: a Hugging Face generate() loop
(prefill + decode) and a CUDA-graph capture + replays of a decode step, of small random-weight models
built from a config (no network), with torch.profiler's schedule and prof.step().

    python3 bench/capture_serving.py --out DIR
"""
import argparse
import os
import time

import torch
from torch.profiler import ProfilerActivity, profile, schedule


def model_of(kind, device):
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    if kind == "gpt2":
        m = GPT2LMHeadModel(GPT2Config(n_layer=4, n_embd=256, n_head=4, vocab_size=4096, n_positions=512))
    else:
        m = LlamaForCausalLM(LlamaConfig(num_hidden_layers=4, hidden_size=256, intermediate_size=688,
                                         num_attention_heads=4, num_key_value_heads=2, vocab_size=4096,
                                         max_position_embeddings=512))
    dtype = torch.float16 if device == "cuda" else torch.float32
    return m.to(device=device, dtype=dtype).eval()


def acts(device):
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])


def generate_trace(kind, device, out, batch, prompt, new):
    m = model_of(kind, device)
    ids = torch.randint(0, 4096, (batch, prompt), device=device)
    with torch.no_grad():
        m.generate(ids, max_new_tokens=2, do_sample=False, min_new_tokens=2, pad_token_id=0)  # warm-up
        path = os.path.join(out, f"{kind}_generate_{device}_bs{batch}_p{prompt}_n{new}.json")
        with profile(activities=acts(device), record_shapes=True,
                     schedule=schedule(wait=0, warmup=1, active=1, repeat=1),
                     on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
            for _ in range(2):
                m.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0)
                prof.step()
    return path


def graph_traces(kind, out, batch):
    """A decode step (one token per sequence) captured into a CUDA graph, then replayed: one trace
    of the capture window, one of the replays."""
    m = model_of(kind, "cuda")
    static = torch.randint(0, 4096, (batch, 1), device="cuda")
    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                m(static, use_cache=False)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        cap = os.path.join(out, f"{kind}_decode_graph_capture.json")
        with profile(activities=acts("cuda"), record_shapes=True) as prof:
            with torch.cuda.graph(g):
                logits = m(static, use_cache=False).logits
        prof.export_chrome_trace(cap)
        rep = os.path.join(out, f"{kind}_decode_graph_replay.json")
        with profile(activities=acts("cuda"), record_shapes=True,
                     schedule=schedule(wait=0, warmup=1, active=3, repeat=1),
                     on_trace_ready=lambda p: p.export_chrome_trace(rep)) as prof:
            for _ in range(4):
                static.copy_(torch.randint(0, 4096, (batch, 1), device="cuda"))
                g.replay()
                logits.argmax(-1)
                torch.cuda.synchronize()
                prof.step()
    return [cap, rep]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    made = [generate_trace("gpt2", a.device, a.out, 4, 32, 6), generate_trace("llama", a.device, a.out, 2, 24, 5)]
    if a.device == "cuda":
        print(torch.cuda.get_device_name())
        made += graph_traces("llama", a.out, 8)
    for p in made:
        os.system(f"gzip -f {p}")
        print(p + ".gz", os.path.getsize(p + ".gz"))
    print(f"done in {time.time() - t0:.1f} s", torch.__version__)


if __name__ == "__main__":
    main()
