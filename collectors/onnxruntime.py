"""Profile N runs of an ONNX Runtime session, with the profile and our summary side by side.

    from nongemm_trace.collectors.onnxruntime import profile_session

    profile = profile_session("model.onnx", {"x": x}, "out", "resnet50_ort", runs=10,
                              providers=["CUDAExecutionProvider"], optimization="all")

From the shell (inputs are random arrays of each input's shape; symbolic dimensions get
``--dim``, default 1)::

    python -m nongemm_trace.collectors.onnxruntime model.onnx --runs 10 -o out/ --name resnet50_ort

Writes ``NAME.ort.json`` (the profile ONNX Runtime wrote, moved there) and, when
nongemm-trace is importable, ``NAME.nongemm.json`` (the ``analyze`` report). ``warmup``
runs happen in a session of their own, outside the profile. ``optimization`` is the graph
optimization level: ``disable``, ``basic``, ``extended`` or ``all``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

LEVELS = {"disable": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED",
          "all": "ORT_ENABLE_ALL"}


def _session(model: str | os.PathLike, providers: list[str] | None, optimization: str, profile_prefix: str | None):
    import onnxruntime as ort

    if optimization not in LEVELS:
        raise ValueError(f"optimization must be one of {', '.join(LEVELS)}, not {optimization!r}")
    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, LEVELS[optimization])
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    return ort.InferenceSession(str(model), so, providers=providers or ort.get_available_providers())


def profile_session(model: str | os.PathLike, inputs: Mapping[str, Any], out_dir: str | os.PathLike, name: str, *,
                    runs: int = 10, warmup: int = 2, providers: list[str] | None = None, optimization: str = "all",
                    summary: bool = True) -> Path:
    """Run ``model`` ``warmup`` times unprofiled, then ``runs`` times profiled; return the profile's path."""
    if runs < 1:
        raise ValueError("runs must be >= 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if warmup:
        warm = _session(model, providers, optimization, None)
        for _ in range(warmup):
            warm.run(None, dict(inputs))
    sess = _session(model, providers, optimization, str(out / f".{name}.ort"))
    for _ in range(runs):
        sess.run(None, dict(inputs))
    written = Path(sess.end_profiling())
    dest = out / f"{name}.ort.json"
    shutil.move(str(written), dest)
    if summary:
        write_summary(dest)
    return dest


def write_summary(profile: Path) -> Path | None:
    """``analyze`` the profile and write the JSON report next to it (skipped, with a note, when
    nongemm-trace is not importable)."""
    try:
        from nongemm_trace import analyze
        from nongemm_trace.report.json_out import render_json
    except ImportError as exc:  # pragma: no cover - the collector is used without the package
        print(f"collectors: no summary for {profile} (nongemm-trace not importable: {exc})", file=sys.stderr)
        return None
    dest = profile.with_name(profile.name.replace(".ort.json", "") + ".nongemm.json")
    dest.write_text(render_json(analyze(profile)))
    return dest


def random_inputs(model: str | os.PathLike, dim: int = 1) -> dict[str, Any]:
    """Random arrays for every input of ``model`` (symbolic dimensions set to ``dim``)."""
    import numpy as np
    import onnxruntime as ort

    types = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
             "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": np.bool_}
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds: dict[str, Any] = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else dim for d in i.shape]
        dtype = types.get(i.type, np.float32)
        feeds[i.name] = (rng.standard_normal(shape).astype(dtype) if np.issubdtype(dtype, np.floating)
                         else np.zeros(shape, dtype))
    return feeds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nongemm_trace.collectors.onnxruntime",
                                 description="Profile N runs of an ONNX model with ONNX Runtime.")
    ap.add_argument("model", help="the .onnx file")
    ap.add_argument("-o", "--out", default=".", help="output folder")
    ap.add_argument("--name", help="output name (default: the model's stem)")
    ap.add_argument("--runs", type=int, default=10, help="profiled runs")
    ap.add_argument("--warmup", type=int, default=2, help="unprofiled runs first")
    ap.add_argument("--providers", nargs="*", help="execution providers (default: those available)")
    ap.add_argument("--optimization", choices=tuple(LEVELS), default="all", help="graph optimization level")
    ap.add_argument("--dim", type=int, default=1, help="size of symbolic input dimensions")
    args = ap.parse_args(argv)
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        print("collectors: onnxruntime is not installed (pip install onnxruntime or onnxruntime-gpu)", file=sys.stderr)
        return 2
    path = profile_session(args.model, random_inputs(args.model, args.dim), args.out,
                           args.name or Path(args.model).stem,
                           runs=args.runs, warmup=args.warmup, providers=args.providers, optimization=args.optimization)
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
