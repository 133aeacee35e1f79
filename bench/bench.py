#!/usr/bin/env python3
"""Benchmark: every nongemm-trace command vs the JSON decode floor vs Holistic Trace Analysis.

    python3 bench/bench.py --sizes 40,200,1000 [--repeat 3] [--commands analyze,latency,...] [--source TRACE]
                           [--stack-source TRACE] [--no-hta] [--no-gz]

Makes traces of about the given sizes (MB of JSON) with ../shared/tools/scale_trace.py
from a real trace (plain and .gz), then runs each tool in a fresh process and reads
its wall time, user and system CPU time and peak RSS (wait4). The commands and ``floor``
run ``--repeat`` times, interleaved, and the fastest wall time is kept with its CPU times
(the machine is a shared VM: single runs vary by 20 %); peak RSS is the largest of the runs.
The load average is printed before and after: figures taken under load are not comparable.
Side by side, in the same run:

* each command (``analyze``, ``latency``, ``launch``, ``whatif --scale GEMM=0.5``, ``flops``):
  ``nongemm-trace COMMAND FILE --format json -o OUT --quiet`` end to end, this tree's code with its
  bytecode compiled first (as ``pip install`` leaves an installed package);
* ``floor``: ``msgspec.json.Decoder`` of a typed Struct holding only ph, cat, name, ts,
  dur, pid, tid per event (the least any decoder of this file must do);
* ``hta``: HolisticTraceAnalysis ``TraceAnalysis`` construction + ``get_gpu_kernel_breakdown`` (once:
  it takes ten times as long).

AMD's TraceLens is not on PyPI (the ``tracelens`` package there is another project); where its
``TraceLens`` module is importable, ``TreePerfAnalyzer.from_file`` + its kernel table runs beside HTA.

Also the per-stage time of analyze (decode+tables, link, classify, measure+report).
Prints a Markdown table with MB/s, peak RSS / file size and the ratios (to the floor, to analyze,
HTA's to each command).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("NONGEMM_SHARED", ROOT.parent / "shared"))

FLOOR = r'''
import sys, msgspec
from typing import Union, Optional
class Ev(msgspec.Struct, gc=False):
    ph: Optional[str] = None
    cat: Optional[str] = None
    name: Optional[str] = None
    ts: Union[int, float, None] = None
    dur: Union[int, float, None] = None
    pid: Union[int, str, None] = None
    tid: Union[int, str, None] = None
class Doc(msgspec.Struct):
    traceEvents: list[Ev]
p = sys.argv[1]
if p.endswith(".gz"):
    import gzip
    data = gzip.open(p, "rb").read()
else:
    data = open(p, "rb").read()
d = msgspec.json.Decoder(Doc).decode(data)
print(len(d.traceEvents))
'''

HTA = r'''
import sys, os, tempfile, shutil, logging
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
d = tempfile.mkdtemp()
os.symlink(os.path.abspath(sys.argv[1]), os.path.join(d, os.path.basename(sys.argv[1])))
ta = TraceAnalysis(trace_dir=d)
kt, k = ta.get_gpu_kernel_breakdown(visualize=False)
print(len(k))
'''

TRACELENS = r'''
import sys
from TraceLens import TreePerfAnalyzer
a = TreePerfAnalyzer.from_file(sys.argv[1])
print(len(a.get_df_kernel_launchers()))
'''

#: the commands benchmarked (their extra arguments), each as the user runs it
COMMANDS = {"analyze": [], "latency": [], "launch": [], "whatif": ["--scale", "GEMM=0.5"], "flops": []}

STAGES = r'''
import sys, time, json
sys.path.insert(0, sys.argv[2])
t = {}
t0 = time.perf_counter()
from nongemm_trace.load import load_trace
from nongemm_trace.classify import classify, link_and_classify
from nongemm_trace.classify.taxonomy import load_taxonomy
from nongemm_trace import analyze
tax = load_taxonomy("default")
t["import"] = time.perf_counter() - t0
t0 = time.perf_counter(); tr = load_trace(sys.argv[1]); t["decode+tables"] = time.perf_counter() - t0
t0 = time.perf_counter(); L = link_and_classify(tr, tax); t["link"] = time.perf_counter() - t0
t0 = time.perf_counter(); a = classify(L, tax, "launch"); t["classify"] = time.perf_counter() - t0
t0 = time.perf_counter(); rep = analyze(sys.argv[1]); total = time.perf_counter() - t0
t["measure+report"] = max(0.0, total - t["decode+tables"] - t["link"] - t["classify"])
print(json.dumps({k: round(v, 3) for k, v in t.items()}))
'''


def _tree_rss_kb(pid: int) -> int:
    """Resident memory of a process and all its descendants (KB), from /proc."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except (OSError, ValueError):
            continue
    return total


def run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str, float, float]:
    """(wall seconds, peak RSS MB, stdout, user s, system s) of a child process. Peak RSS is that of
    the whole process tree (a tool's helper processes count): the larger of the child's own peak
    (wait4) and the largest sum over the tree seen by sampling /proc every 5 ms."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss_kb(p.pid))
            done.wait(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out = p.stdout.read()
    done.set()
    sampler.join()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    rss = max(ru.ru_maxrss, peak[0]) / 1024
    if p.returncode != 0:
        return float("nan"), rss, f"exit {p.returncode}", ru.ru_utime, ru.ru_stime
    return wall, rss, out.strip(), ru.ru_utime, ru.ru_stime


def _fastest(rs: list[tuple]) -> tuple[float, float, str, float, float]:
    """The fastest run's wall and CPU times, with the largest peak RSS of all runs."""
    best = min(rs, key=lambda r: r[0] if r[0] == r[0] else float("inf"))
    return best[0], max(r[1] for r in rs), best[2], best[3], best[4]


def _has_tracelens() -> bool:
    import importlib.util
    return importlib.util.find_spec("TraceLens") is not None


def make(source: Path, target_mb: float, out: Path) -> Path:
    if out.exists():
        return out
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "one.json"
        subprocess.run([sys.executable, str(SHARED / "tools" / "scale_trace.py"), str(source), "1", str(probe)],
                       check=True)
        copies = max(1, round(target_mb * 1e6 / probe.stat().st_size))
    subprocess.run([sys.executable, str(SHARED / "tools" / "scale_trace.py"), str(source), str(copies), str(out)],
                   check=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="40,200", help="target JSON sizes in MB")
    ap.add_argument("--source", default=str(SHARED / "traces" / "h200" / "bert_base_train_bs8_s128__eager.json.gz"))
    ap.add_argument("--stack-source",
                    default=str(SHARED / "traces" / "external" / "tracelens" /
                                "h100__facebook_timesformer-base-finetuned-k400__1016002.json.gz"),
                    help="a trace with python_function events (with_stack)")
    ap.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "nongemm-bench"))
    ap.add_argument("--no-hta", action="store_true")
    ap.add_argument("--repeat", type=int, default=3, help="runs of nongemm and floor per file (fastest kept)")
    ap.add_argument("--no-gz", action="store_true")
    ap.add_argument("--commands", default=",".join(COMMANDS), help="the commands to run (default: all)")
    args = ap.parse_args()
    commands = [c for c in args.commands.split(",") if c]
    unknown = set(commands) - set(COMMANDS)
    if unknown:
        ap.error(f"unknown commands: {sorted(unknown)}")
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    # the code measured is this tree's, with its bytecode compiled as `pip install` compiles an
    # installed package's (where PYTHONDONTWRITEBYTECODE is set, as on this machine, a source tree
    # is otherwise compiled again by every run: 0.05-0.06 s; HTA and msgspec are installed, compiled)
    compileall.compile_dir(str(ROOT / "nongemm_trace"), quiet=1)
    tree_env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    load_before = os.getloadavg()
    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}", flush=True)
    tracelens = _has_tracelens()
    rows = []
    for mb in [float(x) for x in args.sizes.split(",")]:
        for label, src in (("no stack", Path(args.source)), ("with stack", Path(args.stack_source))):
            if label == "with stack" and mb > 300:
                continue  # the stack variant at the small sizes is enough to show the effect
            base = work / f"{Path(src).name.split('.')[0]}_{int(mb)}MB"
            variants = [make(Path(src), mb, base.with_suffix(".json"))]
            if not args.no_gz:
                variants.append(make(Path(src), mb, Path(str(base) + ".json.gz")))
            json_mb = variants[0].stat().st_size / 1e6
            for f in variants:
                # each report to a regular file of the work folder, never a device path (a writer
                # replaces its output file: an older tree's would replace the node itself)
                argv = {c: [py, "-m", "nongemm_trace", c, str(f), *COMMANDS[c], "--format", "json", "-o",
                            str(work / f"{c}.json"), "--quiet"] for c in commands}
                runs: dict[str, list] = {**{c: [] for c in commands}, "floor": []}
                for _ in range(max(1, args.repeat)):  # interleaved: a slow minute slows every tool alike
                    for c in commands:
                        runs[c].append(run(argv[c], tree_env))
                    runs["floor"].append(run([py, "-c", FLOOR, str(f)]))
                res = {tool: _fastest(rs) for tool, rs in runs.items()}
                if not args.no_hta and f.suffix != ".gz":
                    res["hta"] = run([py, "-c", HTA, str(f)])
                    if tracelens:
                        res["tracelens"] = run([py, "-c", TRACELENS, str(f)])
                st = run([py, "-c", STAGES, str(f), str(ROOT)])
                stages = json.loads(st[2]) if st[2].startswith("{") else {}
                rows.append((label, json_mb, f.name.endswith(".gz"), res, stages))
                print(json.dumps({"file": f.name, "json_mb": round(json_mb, 1),
                                  **{k: {"s": round(v[0], 2), "user": round(v[3], 2), "sys": round(v[4], 2),
                                         "rss_mb": round(v[1])} for k, v in res.items()},
                                  "stages": stages}), flush=True)
    load_after = os.getloadavg()
    print(f"load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    if not tracelens:
        print("TraceLens: not installed (AMD's TraceLens is not on PyPI), not run")
    print()
    print("| trace | JSON MB | file | tool | wall (s) | user (s) | sys (s) | MB/s | peak RSS (MB) | RSS / JSON "
          "| x floor | x analyze | HTA / tool |")
    print("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, mb, gz, res, _stages in rows:
        floor = res["floor"][0]
        ours = res.get("analyze", (None,))[0]
        hta = res.get("hta", (None,))[0]
        for tool, (wall, rss, _, user, sys_s) in res.items():
            ratio_floor = wall / floor if floor and floor == floor else float("nan")
            vs_ours = f"{wall / ours:.2f}" if tool in COMMANDS and ours and wall == wall else ""
            vs = f"{hta / wall:.1f}x" if tool in COMMANDS and hta and wall == wall else ""
            print(f"| {label} | {mb:,.0f} | {'.json.gz' if gz else '.json'} | {tool} | {wall:.2f} | {user:.2f} "
                  f"| {sys_s:.2f} | {mb / wall:,.0f} | {rss:,.0f} | {rss / mb:.2f} | {ratio_floor:.2f} | {vs_ours} "
                  f"| {vs} |")
    print()
    print("Stages of analyze (seconds): " + "; ".join(
        f"{label} {mb:,.0f} MB{' gz' if gz else ''}: " + ", ".join(f"{k} {v}" for k, v in st.items())
        for label, mb, gz, _, st in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
