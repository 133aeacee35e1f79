"""Does a process run slower after torch.profiler has been used in it? (issue #41's truth)

    python3 bench/post_profiler_check.py --out OUTDIR [--arms none,cuda,teardown,cpu] [--repeat 2]   (GPU machine)

bench/capture_recipe.py times each configuration's truth in 7 rounds, 3 before the profiled captures
and 4 after, in one process. On the recipe sets the host-bound configurations' rounds after the
captures are slower than those before. That is either the host drifting over the minute between them,
or something the profiler leaves behind in the process (CUPTI's subscription, callbacks). This runs
the same host-bound configurations in fresh processes, each timing ``ROUNDS`` rounds, then an
interlude, then ``ROUNDS`` rounds again; the interlude is one recipe capture (``schedule(wait=1,
warmup=1, active=3)`` + ``prof.step()``, exported) with CPU and CUDA activities (``cuda``), with the
CPU activity alone (``cpu``), with CPU and CUDA activities and Kineto told to finalize CUPTI when it
stops (``teardown``: ``TEARDOWN_CUPTI=1``), or a 2 s sleep (``none``). The arms alternate, so the host's
drift falls on each alike. OUTDIR/post_profiler.json: per arm and process, each configuration's
rounds before and after.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from nongemm_trace.core.safe_write import write_file  # noqa: E402

# host-bound configurations of bench/capture_recipe.py (workload -> variant)
CONFIGS = {"bert_bs1_s32": "fp32", "gpt2_bs1_s16": "eager", "vit_b16_bs16": "bf16", "wrn50_2_bs16": "bf16"}
ROUNDS = 4


def child(arm: str, out: str) -> None:
    sys.path.insert(0, HERE)
    if arm == "teardown":
        os.environ["TEARDOWN_CUPTI"] = "1"
    import capture_recipe as cr
    import torch

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    timer = cr.Timer(torch, dev)
    configs = [c for c in cr.build(torch, dev, set(CONFIGS)) if CONFIGS[c.workload] == c.variant]
    configs = cr.warm_up(configs, timer)

    def rounds():
        for _ in range(ROUNDS):
            for c in configs:
                c.setup()
                with c.ctx():
                    timer.sync()
                    c.rounds.append(timer.steps(c.step, c.n))
    probes = [cr.probe(torch, dev)]
    rounds()
    probes.append(cr.probe(torch, dev))
    t = time.time()
    if arm == "none":
        time.sleep(2.0)
    else:
        from torch.profiler import ProfilerActivity, profile, schedule
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if arm != "cpu" and dev == "cuda" else [])
        c = configs[0]
        c.setup()
        with tempfile.TemporaryDirectory() as tmp, c.ctx(), \
                profile(activities=acts, schedule=schedule(wait=1, warmup=1, active=3),
                        on_trace_ready=lambda p: p.export_chrome_trace(os.path.join(tmp, "trace.json"))) as prof:
            for _ in range(5):
                c.step()
                prof.step()
        timer.sync()
    interlude = time.time() - t
    probes.append(cr.probe(torch, dev))
    rounds()
    probes.append(cr.probe(torch, dev))
    res = {"arm": arm, "interlude_s": interlude, "probes": probes,
           "configs": {c.key: {"n": c.n, "before": c.rounds[:ROUNDS], "after": c.rounds[ROUNDS:]} for c in configs}}
    write_file(out, json.dumps(res))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--arms", default="none,cuda,teardown,cpu")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--child", default=None)
    ap.add_argument("--child-out", default=None)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.child_out)
        return
    os.makedirs(a.out, exist_ok=True)
    results = []
    for r in range(a.repeat):
        for arm in a.arms.split(","):
            path = os.path.join(a.out, f"{arm}_{r}.json")
            t = time.time()
            p = subprocess.run([sys.executable, __file__, "--out", a.out, "--child", arm, "--child-out", path],
                               capture_output=True, text=True)
            if p.returncode:
                print(arm, r, "failed", p.stderr[-2000:])
                continue
            with open(path) as fh:
                res = json.load(fh)
            results.append(res)
            ratios = {k: statistics.median(v["after"]) / statistics.median(v["before"])
                      for k, v in res["configs"].items()}
            print(f"{arm:5} {r} {time.time() - t:5.1f}s " + " ".join(f"{k}={x:.3f}" for k, x in ratios.items()),
                  flush=True)
    write_file(os.path.join(a.out, "post_profiler.json"), json.dumps(results))


if __name__ == "__main__":
    main()
