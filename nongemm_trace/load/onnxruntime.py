"""ONNX Runtime profiles (``SessionOptions.enable_profiling``) -> :class:`~nongemm_trace.core.trace.Trace`.

The profile is a JSON array of Chrome-trace events. ``cat: "Session"`` events are the
session's phases; each ``model_run`` is one run (a step). ``cat: "Node"`` events come in
threes per node and run: ``…_fence_before``, ``…_kernel_time`` and ``…_fence_after``; the
``kernel_time`` one is the node's work and carries ``args.op_name`` (the ONNX op type, or
ORT's fused op: ``FusedConv``, ``SkipLayerNormalization`` …), ``args.provider`` and the
input/output shapes. A build with CUDA (or ROCm) profiling adds ``cat: "Kernel"`` events,
each following the node that launched it.

Activities: the GPU kernels when the profile has them (GPU time, each with its node's op
type), else the nodes' kernel time (CPU time on the CPU provider): ``onnx_ops`` is the op
type, ``onnx_nodes`` the node name, ``provider`` the execution provider. Runs become ops named
``model_run`` (user annotations), which the step finder takes as the steps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from ..core.trace import Trace
from ..errors import TraceError
from ..schema import EXTRA_COLUMNS
from .engines import activities, empty_table

_KERNEL_CATS = ("Kernel", "kernel")
_NODE_SUFFIX = "_kernel_time"


def is_profile(doc: Any) -> bool:
    """A JSON array of events with ONNX Runtime's ``Session``/``Node`` categories."""
    if not isinstance(doc, list) or not doc:
        return False
    cats = {e.get("cat") for e in doc[:200] if isinstance(e, dict)}
    return "Session" in cats or "Node" in cats and any(
        isinstance(e, dict) and str(e.get("name", "")).endswith(_NODE_SUFFIX) for e in doc[:200])


#: the largest time (µs) an event may have, as for Kineto: in nanoseconds a sum stays inside int64
MAX_US = 4e15


def _num(v: Any) -> float | None:
    """A finite time in microseconds within ±:data:`MAX_US` (not a bool, string or 1e300), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if -MAX_US < v < MAX_US else None


def _small_int(v: Any) -> int:
    """A device or stream number: an integral number that fits int32, else 0."""
    return int(v) if _num(v) is not None and v == int(v) and -(1 << 31) <= v < 1 << 31 else 0


def _text(v: Any) -> str | None:
    """A text field (op type, provider): a non-empty string, else None (a list or object is no name)."""
    return v if isinstance(v, str) and v else None


def load_onnxruntime(path: str | Path, doc: list) -> Trace:
    """The trace of an ONNX Runtime profile ``doc`` (already decoded) read from ``path``."""
    if not is_profile(doc):
        raise TraceError(path, "is not an ONNX Runtime profile (no Session or Node events)")
    nodes, kernels, runs = [], [], []
    bad = 0
    last_node: dict[str, Any] | None = None
    for i, ev in enumerate(doc):
        if not isinstance(ev, dict) or ev.get("ph", "X") != "X":
            continue
        ts, dur = _num(ev.get("ts")), _num(ev.get("dur"))
        cat, name = ev.get("cat"), str(ev.get("name", ""))
        raw_args = ev.get("args")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        if cat not in ("Session", "Node", *_KERNEL_CATS):
            continue
        if ts is None or dur is None or dur < 0:
            bad += 1
            continue
        row = {"ts_ns": int(round(ts * 1000)), "dur_ns": int(round(dur * 1000)), "ev_idx": i,
               "pid": str(ev.get("pid")), "tid": str(ev.get("tid"))}
        if cat == "Session" and name == "model_run":
            runs.append({**row, "name": "model_run", "cat": "user_annotation"})
        elif cat == "Node" and name.endswith(_NODE_SUFFIX):
            last_node = {**row, "name": name[: -len(_NODE_SUFFIX)], "cat": "onnxruntime_node", "kind": "node",
                         "device": -1, "stream": 0, "onnx_ops": _text(args.get("op_name")),
                         "onnx_nodes": name[: -len(_NODE_SUFFIX)], "provider": _text(args.get("provider"))}
            nodes.append(last_node)
        elif cat in _KERNEL_CATS:
            owner: dict[str, Any] = last_node or {}
            kernels.append({**row, "name": name, "cat": "kernel", "kind": "kernel",
                            "device": _small_int(args.get("device")), "stream": _small_int(args.get("stream")),
                            "onnx_ops": owner.get("onnx_ops"), "onnx_nodes": owner.get("onnx_nodes"),
                            "provider": owner.get("provider")})
    gpu = bool(kernels)
    acts = activities(kernels if gpu else nodes, EXTRA_COLUMNS["onnxruntime"]["activities"])
    ops = empty_table("ops")
    if runs:
        run_df = pl.DataFrame(runs, schema={"name": pl.String, "cat": pl.String, "pid": pl.String, "tid": pl.String,
                                            "ts_ns": pl.Int64, "dur_ns": pl.Int64, "ev_idx": pl.Int64})
        ops = pl.concat([ops, run_df.with_columns(
            pl.lit(None, pl.Int64).alias("external_id"), (pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns"),
            pl.lit(None, pl.Int64).alias("seq"),
            *(pl.lit(None, pl.Categorical).alias(c) for c in ("input_dims", "input_type", "concrete_inputs")),
        ).with_row_index("op_id").select(ops.columns)], how="vertical_relaxed")
    providers = sorted({n["provider"] for n in nodes if n.get("provider")})
    meta = {"time_basis": "gpu" if gpu else "node", "step_marker": "model_run", "onnxruntime": {
        "runs": len(runs), "nodes": len(nodes), "kernels": len(kernels), "providers": providers}}
    trace = Trace(path=str(path), source_format="onnxruntime", metadata=meta, ops=ops,
                  launches=empty_table("launches"), activities=acts, python=empty_table("python"))
    trace.note("missing_duration", bad, f"{bad} ONNX Runtime events had no valid ts/dur; skipped")
    if not nodes:
        trace.note("no_nodes", 1, "the profile has no node events (profiling started after the runs?)")
    return trace
