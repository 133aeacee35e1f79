"""Kineto traces of CUDA-graph capture and replay, to check that launches recorded into a graph
are told apart from launches that ran (issue #45 item 1).

    python3 bench/capture_graph_capture.py -o OUT

A serving engine (vLLM, SGLang) captures one CUDA/HIP graph per batch size when it starts and
replays them while it serves; a profile of its start-up holds the capture only. This script makes
the three kinds of trace such a user holds, from a decoder-like block (linear, layer norm, GELU,
softmax; random weights) at batch sizes 1, 8 and 32:

* ``graph_capture_only``: each profiled step captures the block into a new graph for one batch
  size (``torch.cuda.graph``), as an engine's start-up does; nothing is replayed, so the launches
  inside ``cudaStreamBeginCapture … cudaStreamEndCapture`` have no GPU activity;
* ``graph_capture_then_replay``: the first profiled step captures, the later ones replay it
  (``cudaGraphLaunch``), so one trace holds both;
* ``graph_replay_only``: the graphs are captured before the profiler starts and every profiled
  step replays one (the serving loop).

Each trace is written through ``nongemm_trace.collectors.torch_profiler.profile_steps`` (its
``ProfilerStep#N`` markers and run metadata) as ``NAME.json.gz``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if (ROOT / "nongemm_trace").is_dir():  # run from a checkout: its collector, not an installed one
    sys.path.insert(0, str(ROOT))

BATCH_SIZES = (1, 8, 32)


def build_block(hidden: int, layers: int):
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(hidden)
            self.qkv = torch.nn.Linear(hidden, 3 * hidden)
            self.up = torch.nn.Linear(hidden, 4 * hidden)
            self.down = torch.nn.Linear(4 * hidden, hidden)

        def forward(self, x):
            q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
            att = torch.softmax(q @ k.transpose(-1, -2) / hidden ** 0.5, dim=-1) @ v
            x = x + att
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))

    return torch.nn.Sequential(*[Block() for _ in range(layers)]).cuda().half().eval()


def warm_up(model, x) -> None:
    """Eager runs on a side stream before a capture, as torch.cuda.graph's documentation asks."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model(x)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()


def capture_graph(model, x):
    import torch

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        model(x)
    return graph


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq", type=int, default=16, help="tokens per sequence (a decode step with a short context)")
    ap.add_argument("--replays", type=int, default=4, help="profiled replay steps")
    a = ap.parse_args(argv)
    import torch

    from nongemm_trace.collectors.torch_profiler import profile_steps

    torch.manual_seed(0)
    model = build_block(a.hidden, a.layers)
    inputs = {bs: torch.randn(bs, a.seq, a.hidden, device="cuda", dtype=torch.half) for bs in BATCH_SIZES}
    meta = {"hidden": a.hidden, "layers": a.layers, "seq": a.seq, "batch_sizes": list(BATCH_SIZES)}
    with torch.inference_mode():
        for x in inputs.values():
            warm_up(model, x)

        # an engine's start-up: one capture per batch size, nothing replayed
        with profile_steps(a.out, "graph_capture_only", steps=len(BATCH_SIZES), wait=0, warmup=1,
                           metadata={**meta, "mode": "capture_only"}, summary=False) as step:
            for bs in (BATCH_SIZES[0], *BATCH_SIZES):  # the first is the profiler's warm-up step
                capture_graph(model, inputs[bs])
                torch.cuda.synchronize()
                step()

        # a capture, then its replays, in one trace
        x = inputs[BATCH_SIZES[-1]]
        with profile_steps(a.out, "graph_capture_then_replay", steps=1 + a.replays, wait=0, warmup=1,
                           metadata={**meta, "mode": "capture_then_replay"}, summary=False) as step:
            model(x)  # the profiler's warm-up step: eager
            torch.cuda.synchronize()
            step()
            graph = capture_graph(model, x)
            torch.cuda.synchronize()
            step()
            for _ in range(a.replays):
                graph.replay()
                torch.cuda.synchronize()
                step()

        # the serving loop: graphs captured before the profiler starts, replayed under it
        graphs = {bs: capture_graph(model, inputs[bs]) for bs in BATCH_SIZES}
        torch.cuda.synchronize()
        with profile_steps(a.out, "graph_replay_only", steps=a.replays, wait=0, warmup=1,
                           metadata={**meta, "mode": "replay_only"}, summary=False) as step:
            for i in range(1 + a.replays):
                graphs[BATCH_SIZES[i % len(BATCH_SIZES)]].replay()
                torch.cuda.synchronize()
                step()
    for p in sorted(Path(a.out).glob("*.json.gz")):
        print(p, p.stat().st_size)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
