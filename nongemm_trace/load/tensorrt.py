"""TensorRT engine profiles -> :class:`~nongemm_trace.core.trace.Trace`: one activity per engine layer.

Reads ``trtexec --exportProfile=P.json`` (also TREx's ``*.engine.profile.json``): a JSON array
whose first element is ``{"count": N}`` (inferences profiled) and whose others are
``{"name", "timeMs", "averageMs", "medianMs", "percentage"}`` per layer. The layer
information (``trtexec --exportLayerInfo=L.json --profilingVerbosity=detailed``, TREx's
``*.engine.graph.json``) gives each layer's ``LayerType``, ``Origin`` and ``Metadata``; it is
found next to the profile by name (``…profile.json`` -> ``…graph.json`` / ``…layer_info.json``
/ ``…layers.json``) or given. At low verbosity it is a list of names only.

Each layer becomes one activity of the layer's mean time per inference (``dur_ns``), laid end
to end in engine order (TensorRT reports no start times); ``median_ns`` keeps the median
(the NonGEMM artifact's choice). ``layer_type``, ``origin`` and ``onnx_ops`` (the op types of
the ONNX nodes the layer fused, see :mod:`.engines`) are the classifier's evidence;
``origin_nodes`` is ``endpoints`` for a Myelin region known by its first and last node only;
``input_ops`` the op types its input tensors name as their consumers (``onnx::MatMul_12``) and
``tactic`` its tactic, what a region's contents show besides its name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core.trace import Trace
from ..errors import TraceError
from ..schema import EXTRA_COLUMNS
from .engines import activities, consumer_op_types, empty_table, is_region, layer_nodes, node_op_types

#: the layer-information file's names beside a profile named ``…profile.json``
LAYER_INFO_NAMES = ("graph.json", "layer_info.json", "layerinfo.json", "layers.json")


def is_profile(doc: Any) -> bool:
    return (isinstance(doc, list) and bool(doc) and isinstance(doc[0], dict) and "count" in doc[0]
            and all(isinstance(r, dict) and "name" in r and ("averageMs" in r or "timeMs" in r) for r in doc[1:]))


def is_layer_info(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("Layers"), list)


def find_layer_info(profile: str | Path) -> Path | None:
    """The layer-information file next to ``profile`` by name, if there is one."""
    p = Path(profile)
    for suffix in ("profile.json", "profile.json.gz"):
        if p.name.endswith(suffix):
            stem = p.name[: -len(suffix)]
            for name in LAYER_INFO_NAMES:
                cand = p.with_name(stem + name)
                if cand.is_file():
                    return cand
    return None


def _read_json(path: str | Path, what: str) -> Any:
    from .bom import without_bom
    from .source import read_bytes

    try:
        return json.loads(without_bom(read_bytes(path)))
    except (ValueError, RecursionError) as exc:
        raise TraceError(path, f"invalid {what} JSON ({exc})") from None


def _inferences(count: Any) -> int | None:
    """The profile's count of inferences: a whole number above 0 (``50`` or ``50.0``), else None (a
    fraction, text, a boolean, NaN: a ``timeMs`` total cannot be divided by it)."""
    if isinstance(count, bool) or not isinstance(count, (int, float)):
        return None
    return int(count) if count == count and 1 <= count < 1 << 62 and count == int(count) else None


def _layer_table(info: Any, path: str | Path) -> dict[str, dict[str, Any]]:
    if not is_layer_info(info):
        raise TraceError(path, "is not a TensorRT layer-information file (no 'Layers' list)")
    out: dict[str, dict[str, Any]] = {}
    for layer in info["Layers"]:
        if isinstance(layer, str):
            out.setdefault(layer, {})
        elif isinstance(layer, dict) and isinstance(layer.get("Name"), str):
            out.setdefault(layer["Name"], layer)
    return out


def _text(v: Any) -> str | None:
    """A layer-information text field: a string, else None (a number or object names no type)."""
    return v if isinstance(v, str) else None


def load_tensorrt(path: str | Path, doc: list, layer_info: str | Path | None = None) -> Trace:
    """The trace of a TensorRT profile ``doc`` (already decoded) read from ``path``."""
    if not is_profile(doc):
        raise TraceError(path, "is not a TensorRT profile (a list starting with {\"count\": N} and layer records)")
    notes: list[tuple[str, int, str]] = []
    info_path = Path(layer_info) if layer_info else find_layer_info(path)
    layers = _layer_table(_read_json(info_path, "TensorRT layer-information"), info_path) if info_path else {}
    detailed = any(v for v in layers.values())
    count = doc[0].get("count")
    inferences = _inferences(count)
    if inferences is None:
        notes.append(("bad_inference_count", 1, f"the profile's count {count!r:.40} is not a whole number of "
                                                "inferences: layers without averageMs cannot be averaged and are "
                                                "skipped"))
    rows: list[dict[str, Any]] = []
    ts = 0
    bad = 0
    for i, rec in enumerate(doc[1:], start=1):
        if "averageMs" not in rec and inferences is None:  # a total over runs that were not counted
            bad += 1
            continue
        try:  # averageMs is per inference; a profile without it has only the total over `count` runs
            mean_ms = float(rec["averageMs"]) if "averageMs" in rec else float(rec["timeMs"]) / (inferences or 1)
            mean_ns = int(round(mean_ms * 1e6))
            median_ns = int(round(float(rec.get("medianMs", mean_ms)) * 1e6))
        except (TypeError, ValueError, OverflowError):
            bad += 1
            continue
        if mean_ns < 0 or median_ns < 0 or not (mean_ns < 1 << 62 and median_ns < 1 << 62):
            bad += 1
            continue
        name = str(rec["name"])
        info = layers.get(name) or {}
        meta = info.get("Metadata") if isinstance(info.get("Metadata"), str) else None
        nodes, bracket = layer_nodes(name, meta)
        rows.append({"name": name, "cat": "tensorrt_layer", "pid": "tensorrt", "tid": "engine", "ts_ns": ts,
                     "dur_ns": mean_ns, "kind": "layer", "device": 0, "stream": 0, "ev_idx": i,
                     "median_ns": median_ns, "layer_type": _text(info.get("LayerType")) or bracket,
                     "origin": _text(info.get("Origin")), "onnx_ops": ",".join(node_op_types(nodes)) or None,
                     "input_ops": ",".join(consumer_op_types(info.get("Inputs"))) or None,
                     "onnx_nodes": " + ".join(nodes) or None, "tactic": _text(info.get("TacticName")),
                     "origin_nodes": "endpoints" if is_region(name, meta) else "all"})
        ts += mean_ns
    if not rows:
        notes.append(("no_layers", 1, "the profile lists no layer times (an engine that was not run?)"))
    if bad:
        notes.append(("bad_layer_time", bad, f"{bad} profile records had no valid averageMs / medianMs; skipped"))
    if info_path is None:
        notes.append(("no_layer_info", 1, "no TensorRT layer information next to the profile (trtexec "
                      "--exportLayerInfo with --profilingVerbosity=detailed, or --layer-info FILE): layers are "
                      "classified from their names alone"))
    elif not detailed:
        notes.append(("layer_names_only", 1, f"{info_path.name} lists layer names only (built without "
                      "--profilingVerbosity=detailed): layers are classified from their names"))
    if layers and info_path is not None:  # (layers come from the info file)
        missing = sum(1 for r in rows if r["name"] not in layers)
        if missing:
            notes.append(("layer_not_in_info", missing, f"{missing} profiled layers are not in {info_path.name} "
                                                        "(another engine's file?): classified from their names"))
    acts = activities(rows, EXTRA_COLUMNS["tensorrt"]["activities"])
    meta = {"time_basis": "layer", "tensorrt": {
        "inferences": inferences, "layers": len(rows), "layer_info": str(info_path) if info_path else None,
        "detailed_layer_info": detailed,
        "mean_time_per_inference_ms": round(sum(r["dur_ns"] for r in rows) / 1e6, 6),
        "median_time_per_inference_ms": round(sum(r["median_ns"] for r in rows) / 1e6, 6)}}
    trace = Trace(path=str(path), source_format="tensorrt", metadata=meta, ops=empty_table("ops"),
                  launches=empty_table("launches"), activities=acts, python=empty_table("python"))
    for code, n, msg in notes:
        trace.note(code, n, msg)
    return trace
