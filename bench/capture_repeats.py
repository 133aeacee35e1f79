"""The same capture again and again: how much the profiler's own cost moves between windows a second apart.

    python3 bench/capture_repeats.py --out OUTDIR [--repeats 6] [--only NAME,...]      (on the GPU machine)

Why: a trace is the only evidence ``latency`` has of its run without the profiler, so the best an
estimate from one trace can do is bounded by how reproducible the profiled window itself is. On the
device machines the host's speed drifts between rounds seconds apart (bench/capture_recipe.py's
``bracket_us``), and a window can run 3x slower than the rounds around it. This script separates
the two: for a few host-bound configurations of bench/capture_recipe.py (fp32/eager side), each
repetition takes one unprofiled round, a capture as the recipe makes it, and one unprofiled round
again (the brackets), under the plain and ``record_shapes`` settings in turn. The ratio of the
profiled window to its brackets is the profiler's cost at that moment; its spread over repetitions
of one configuration is what no model of a single trace can know.

OUTDIR gets ``repeats.json`` (per capture: configuration, setting, repetition, brackets, the host
loop's step times, the probe before it) and the traces packed as bench/capture_recipe.py packs them
(``traces-N.tar``). bench/repeat_spread.py reads them back (with the tool's own estimate per trace).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import capture_recipe as cr

#: host-bound configurations of the recipe set (fp32 / eager side), where the profiler's cost decides
DEFAULT = ("bert_bs1_s32", "gpt2_bs1_s16", "squeezenet_bs1", "mlp8_bs1", "llama_decode_bs1")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--only", default=",".join(DEFAULT))
    args = ap.parse_args(argv)
    tdir = os.environ.get("TRACE_DIR") or os.path.join(args.out, "traces")
    os.makedirs(tdir, exist_ok=True)
    cr.LOG = open(os.path.join(args.out, "capture.log"), "a")

    import torch
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    timer = cr.Timer(torch, dev)
    configs = [c for c in cr.build(torch, dev, set(args.only.split(","))) if c.role in ("slow", "single")]
    configs = cr.warm_up(configs, timer)  # and N, as the recipe script chooses it
    rows = []
    for rep in range(args.repeats):
        for c in configs:
            for setting, opts in (("plain", {}), ("shapes", {"record_shapes": True})):
                name = f"{c.key}__{setting}__r{rep}.json.gz"
                info = cr.capture(torch, c, timer, os.path.join(tdir, name), opts)
                rows.append({"trace": name, "workload": c.workload, "variant": c.variant, "setting": setting,
                             "repeat": rep, "bracket_us": info["bracket_us"],
                             "host_loop_step_us": info["host_loop_step_us"], "probe_before": info["probe_before"],
                             "gpu": torch.cuda.get_device_name() if dev == "cuda" else "cpu",
                             "torch": torch.__version__})
                cr.log(f"{name}: brackets {info['bracket_us']}, host loop {info['host_loop_step_us']}")
    with open(os.path.join(args.out, "repeats.json"), "w") as fh:
        json.dump(rows, fh, indent=1)
    if os.environ.get("PACK", "1") == "1":
        cr.pack(tdir, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
