"""Capture with Nsight Systems and turn the report into a Kineto trace.

Two halves:

* the profiled program marks its steps with :func:`nvtx_steps` (warm-up outside the
  capture, then ``cudaProfilerStart``, the steps under
  ``torch.autograd.profiler.emit_nvtx(record_shapes=True)``, ``cudaProfilerStop``), or
  runs ``python -m nongemm_trace.collectors.nsys steps MODULE:FUNCTION``;
* :func:`profile` runs ``nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none
  --capture-range=cudaProfilerApi`` around that command, exports SQLite, and converts it
  with nongemm-trace (``NAME.nsys-rep``, ``NAME.sqlite``, ``NAME.json.gz``)::

    python -m nongemm_trace.collectors.nsys profile -o out/resnet50 -- \\
        python -m nongemm_trace.collectors.nsys steps mypkg.models:make_resnet50 --steps 5

``--sample=none --cpuctxsw=none`` keep reports small (CPU sampling makes them gigabytes).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

NSYS_ARGS = ["-t", "cuda,nvtx", "--sample=none", "--cpuctxsw=none", "--capture-range=cudaProfilerApi",
             "--capture-range-end=stop", "--force-overwrite=true"]


def find_nsys(explicit: str | None = None) -> str:
    cand = explicit or os.environ.get("NSYS") or shutil.which("nsys")
    if not cand:
        raise SystemExit("nongemm_trace.collectors.nsys: no nsys binary (put it on PATH, set NSYS=/path/to/nsys "
                         "or pass --nsys)")
    return cand


def nsys_command(nsys: str, out: Path, command: list[str], extra: list[str] | None = None) -> list[str]:
    return [nsys, "profile", *NSYS_ARGS, *(extra or []), "-o", str(out), *command]


def profile(command: list[str], out: str | os.PathLike, *, nsys: str | None = None,
            extra: list[str] | None = None, timeout: float | None = None) -> dict[str, Path]:
    """Run ``command`` under nsys, export SQLite, convert to Kineto JSON; returns the paths."""
    binary = find_nsys(nsys)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(nsys_command(binary, out, command, extra), timeout=timeout)
    rep = out.with_name(out.name + ".nsys-rep")
    if r.returncode != 0 or not rep.exists():
        raise SystemExit(f"nongemm_trace.collectors.nsys: nsys profile failed (exit {r.returncode}); no {rep}")
    sqlite = out.with_name(out.name + ".sqlite")
    r = subprocess.run([binary, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(sqlite),
                        str(rep)], timeout=timeout)
    if r.returncode != 0 or not sqlite.exists():
        raise SystemExit(f"nongemm_trace.collectors.nsys: nsys export failed (exit {r.returncode})")
    trace = out.with_name(out.name + ".json.gz")
    convert(sqlite, trace)
    return {"report": rep, "sqlite": sqlite, "trace": trace}


def convert(sqlite: Path, trace: Path) -> None:
    """SQLite export -> Kineto JSON with nongemm-trace's converter."""
    import gzip

    import msgspec

    from nongemm_trace.load import load_trace
    from nongemm_trace.load.nsys import to_kineto

    doc = to_kineto(load_trace(sqlite))
    trace.write_bytes(gzip.compress(msgspec.json.encode(doc), 6))


def nvtx_steps(step: Callable[[], Any], steps: int = 5, warmup: int = 2, marker: str = "## step ##") -> None:
    """Run ``step``: ``warmup`` times uncaptured, then ``steps`` times inside the capture range,
    each step in an NVTX range named ``marker``, ops as ``emit_nvtx`` ranges with shapes."""
    import torch

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    with torch.autograd.profiler.emit_nvtx(record_shapes=True):
        for _ in range(steps):
            with torch.autograd.profiler.record_function(marker):
                step()
        torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nongemm_trace.collectors.nsys", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("profile", help="run a command under nsys and convert the report")
    p.add_argument("-o", "--out", required=True, help="output path without extension")
    p.add_argument("--nsys", help="nsys binary (default: $NSYS or PATH)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to profile")
    s = sub.add_parser("steps", help="the profiled side: run MODULE:FUNCTION's step under NVTX ranges")
    s.add_argument("factory")
    s.add_argument("--steps", type=int, default=5)
    s.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args(argv)
    if args.cmd == "profile":
        cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not cmd:
            ap.error("give the command to profile after --")
        for k, v in profile(cmd, args.out, nsys=args.nsys).items():
            print(f"{k}: {v}")
        return 0
    from .torch_profiler import load_factory
    step, _ = load_factory(args.factory)
    nvtx_steps(step, steps=args.steps, warmup=args.warmup)
    return 0


if __name__ == "__main__":
    sys.exit(main())
