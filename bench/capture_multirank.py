"""One Kineto trace per rank of a Llama-shaped model trained with FSDP2 or served with tensor
parallelism, with torch.profiler's own key_averages() and the measured step latencies beside each
trace, to check the multi-rank analysis (per-op times, communication, straggler, exposed
communication) against references on real distributed runs.

    torchrun --nproc_per_node=8 bench/capture_multirank.py fsdp2-train -o OUT
    torchrun --nproc_per_node=8 bench/capture_multirank.py tp-infer -o OUT
    torchrun --nproc_per_node=8 bench/capture_multirank.py fsdp2-train -o OUT --slow-rank 3 --slow-ms 20
    torchrun --nproc_per_node=2 bench/capture_multirank.py fsdp2-train -o OUT --tiny --device cpu

Each rank writes ``NAME_rank{r}.json.gz`` (through ``nongemm_trace.collectors.torch_profiler``: its
``distributedInfo`` names the rank) and ``NAME_rank{r}.meta.json``: the run's settings, the
step latencies (CUDA events on a GPU, ``perf_counter`` on the CPU; the ``timed`` steps run before
the profiler starts, the ``profiled`` ones under it, each flagged active or not), and
``key_averages`` rows (per name: count, CPU and self CPU time, device and self device time, in µs
as torch reports them). The model is transformers' ``LlamaForCausalLM`` with random weights (no
download). ``fsdp2-train``: ``fully_shard`` on every decoder layer, then on the root, AdamW;
``tp-infer``: ``parallelize_module`` with q/k/v and gate/up column-wise, o and down row-wise on a
1-D mesh of all ranks, forward under ``no_grad``. ``--slow-rank R --slow-ms X`` spins the host of
rank R for X ms at the start of every step (inside ``## slow_rank_host_work ##``), so the other
ranks wait for it in their collectives.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if (ROOT / "nongemm_trace").is_dir():  # run from a checkout: its collector, not an installed one
    sys.path.insert(0, str(ROOT))

#: Llama-3-8B's layer shape with 8 layers (8 H200s: FSDP2 training in bf16, TP prefill)
DEFAULTS = dict(hidden=4096, intermediate=14336, layers=8, heads=32, kv_heads=8, vocab=128256, seq=2048, batch=2)
#: a model two CPU cores run in seconds; heads and kv heads divide by 1, 2 and 4 ranks
TINY = dict(hidden=128, intermediate=256, layers=2, heads=8, kv_heads=4, vocab=512, seq=32, batch=2)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))  # the first paragraph
    ap.add_argument("mode", choices=("fsdp2-train", "tp-infer"))
    ap.add_argument("-o", "--out", required=True, help="output folder (one trace and one .meta.json per rank)")
    ap.add_argument("--name", help="file name stem (default: llama_MODE[_slowR])")
    ap.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda when available")
    ap.add_argument("--backend", choices=("nccl", "gloo"), default=None, help="default: nccl on cuda, gloo on cpu")
    ap.add_argument("--tiny", action="store_true", help=f"a tiny model for CPU runs ({TINY})")
    for k, v in DEFAULTS.items():
        ap.add_argument("--" + k.replace("_", "-"), type=int, default=None, help=f"default {v} (tiny: {TINY[k]})")
    ap.add_argument("--dtype", choices=("bf16", "fp32"), default=None, help="default: bf16 on cuda, fp32 on cpu")
    ap.add_argument("--steps", type=int, default=3, help="profiled (active) steps")
    ap.add_argument("--wait", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--timed", type=int, default=5, help="steps timed before the profiler starts")
    ap.add_argument("--slow-rank", type=int, default=None)
    ap.add_argument("--slow-ms", type=float, default=0.0)
    ap.add_argument("--summary", action="store_true", help="also write each rank's NAME.nongemm.json")
    a = ap.parse_args(argv)
    import torch
    a.device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    a.backend = a.backend or ("nccl" if a.device == "cuda" else "gloo")
    a.dtype = a.dtype or ("bf16" if a.device == "cuda" else "fp32")
    base = TINY if a.tiny else DEFAULTS
    for k, v in base.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.slow_rank is not None and a.slow_ms <= 0:
        ap.error("--slow-rank needs --slow-ms > 0")
    a.name = a.name or f"llama_{a.mode.replace('-', '_')}" + (f"_slow{a.slow_rank}" if a.slow_rank is not None else "")
    return a


def build_model(a, device):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=a.hidden, intermediate_size=a.intermediate, num_hidden_layers=a.layers,
                      num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, vocab_size=a.vocab,
                      max_position_embeddings=max(a.seq, 128), use_cache=False)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)  # the same weights on every rank (FSDP2 keeps each rank's chunk of them)
    with torch.device(device):
        return LlamaForCausalLM(cfg)


def fsdp2(model, mesh, a):
    """``fully_shard`` each decoder layer, then the root (embedding, final norm, LM head)."""
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if a.dtype == "bf16" else None
    kw = {"mesh": mesh, **({"mp_policy": mp} if mp else {})}
    for layer in model.model.layers:
        fully_shard(layer, **kw)
    fully_shard(model, **kw)
    return model


def tensor_parallel(model, mesh):
    """Megatron-style: q/k/v and gate/up split by output features, o and down by input features
    (one all-reduce after attention, one after the MLP); embedding and LM head replicated."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    plan = {"self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
            "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(),
            "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(), "mlp.down_proj": RowwiseParallel()}
    for layer in model.model.layers:
        parallelize_module(layer, mesh, plan)
    return model


def make_step(a, model, rank, device):
    """The step callable: an FSDP2 training step (forward, loss, backward, AdamW) or a TP prefill."""
    import torch
    gen = torch.Generator().manual_seed(1234 + (rank if a.mode == "fsdp2-train" else 0))  # TP: same input everywhere
    ids = torch.randint(0, a.vocab, (a.batch, a.seq), generator=gen).to(device)
    slow = a.slow_rank == rank
    spin_s = a.slow_ms / 1000

    def host_work():
        if slow:
            with torch.profiler.record_function("## slow_rank_host_work ##"):
                end = time.perf_counter() + spin_s
                while time.perf_counter() < end:
                    pass

    if a.mode == "fsdp2-train":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            host_work()
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    else:
        model.eval()
        if a.dtype == "bf16":
            model.to(torch.bfloat16)

        def step():
            host_work()
            with torch.no_grad():
                model(input_ids=ids)
    return step


class StepTimer:
    """Per-step latency: CUDA events on a GPU (read after one synchronize), perf_counter on the CPU."""

    def __init__(self, cuda: bool):
        import torch
        self.cuda, self.torch, self.marks = cuda, torch, []

    def time(self, fn):
        if self.cuda:
            s, e = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            self.torch.cuda.synchronize()
            self.marks.append((s, e))
        else:
            t0 = time.perf_counter()
            fn()
            self.marks.append(time.perf_counter() - t0)

    def ms(self) -> list[float]:
        if self.cuda:
            return [round(s.elapsed_time(e), 4) for s, e in self.marks]
        return [round(t * 1000, 4) for t in self.marks]


def key_average_rows(prof) -> list[dict]:
    """torch.profiler's own per-name table, in its units (µs), for the cross-checks."""
    rows = []
    for k in prof.key_averages():
        rows.append(dict(key=k.key, count=k.count, cpu_time_total_us=k.cpu_time_total,
                         self_cpu_time_total_us=k.self_cpu_time_total,
                         device_time_total_us=getattr(k, "device_time_total", 0.0),
                         self_device_time_total_us=getattr(k, "self_device_time_total", 0.0)))
    return rows


def main(argv=None) -> int:
    a = parse_args(argv)
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from nongemm_trace.collectors.torch_profiler import profile_steps

    local = int(os.environ.get("LOCAL_RANK", "0"))
    if a.device == "cuda":
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    dist.init_process_group(a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if a.slow_rank is not None and not 0 <= a.slow_rank < world:
        raise SystemExit(f"capture_multirank: --slow-rank {a.slow_rank} is not a rank of {world}")
    if a.mode == "tp-infer" and (a.heads % world or a.kv_heads % world):
        raise SystemExit(f"capture_multirank: tp-infer needs heads ({a.heads}) and kv heads ({a.kv_heads}) "
                         f"divisible by the world size ({world})")
    mesh = init_device_mesh(a.device, (world,))
    model = build_model(a, device)
    model = fsdp2(model, mesh, a) if a.mode == "fsdp2-train" else tensor_parallel(model, mesh)
    step = make_step(a, model, rank, device)
    cuda = a.device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    timed = StepTimer(cuda)
    for _ in range(a.timed):
        timed.time(step)
    dist.barrier()
    settings = {k: getattr(a, k) for k in ("mode", "device", "backend", "dtype", "hidden", "intermediate", "layers",
                                           "heads", "kv_heads", "vocab", "seq", "batch", "slow_rank", "slow_ms")}
    meta = {"multirank": json.dumps(settings), "rank": rank, "world_size": world}
    name = f"{a.name}_rank{rank}"
    profiled = StepTimer(cuda)
    with profile_steps(a.out, name, steps=a.steps, wait=a.wait, warmup=a.warmup, metadata=meta,
                       summary=a.summary) as mark:
        for _ in range(a.wait + a.warmup + a.steps):
            profiled.time(step)
            sync()
            mark()
    sync()
    lat = profiled.ms()
    doc = {"workload": a.name, **settings, "rank": rank, "world_size": world, "torch": torch.__version__,
           "device_name": torch.cuda.get_device_name(device) if cuda else "cpu",
           "latency_source": "cuda_events" if cuda else "perf_counter",
           "timed_step_ms": timed.ms(),
           "profiled_step_ms": lat, "active_step_ms": lat[a.wait + a.warmup:],
           "steps_profiled": a.steps, "key_averages": key_average_rows(mark.profiler)}
    Path(a.out, f"{name}.meta.json").write_text(json.dumps(doc, indent=1))
    dist.barrier()
    if rank == 0:
        active = doc["active_step_ms"]
        print(f"capture_multirank: {world} ranks -> {a.out}/{a.name}_rank*.json.gz "
              f"(rank 0 active steps {', '.join(f'{x:.1f}' for x in active)} ms)", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
