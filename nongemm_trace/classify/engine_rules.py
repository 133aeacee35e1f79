"""A taxonomy's rules for deployment stacks: ``[onnx]`` (ONNX op types, ONNX Runtime's fused ops)
and ``[tensorrt]`` (layer types, which of a profile's times is a layer's)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import TraceError


@dataclass(frozen=True)
class EngineRules:
    """How engine layers and ONNX nodes are classified (``[onnx]`` and ``[tensorrt]`` of a taxonomy):
    ONNX op types (and ONNX Runtime's fused ops) and TensorRT layer types to categories, the order in
    which a fused layer's non-GEMM ops decide its category, ORT's own fused op types, and which of
    a TensorRT profile's times is a layer's (``mean`` or ``median`` per inference)."""

    onnx_ops: dict[str, str] = field(default_factory=dict)
    layer_types: dict[str, str] = field(default_factory=dict)
    priority: tuple[str, ...] = ()
    fused_ops: frozenset[str] = frozenset()
    layer_time: str = "mean"


def engine_rules(raw: dict[str, Any], check: Callable[[Any, str], str], where: str) -> EngineRules:
    """The ``[onnx]`` and ``[tensorrt]`` tables of a taxonomy; ``check(category, where)`` refuses an
    undeclared category."""
    onnx, trt = raw.get("onnx", {}), raw.get("tensorrt", {})
    onnx_ops: dict[str, str] = {}
    for cat, names in onnx.get("ops", {}).items():
        check(cat, "[onnx.ops]")
        for n in names:
            onnx_ops.setdefault(str(n), cat)
    layer_types: dict[str, str] = {}
    for cat, names in trt.get("layer_types", {}).items():
        check(cat, "[tensorrt.layer_types]")
        for n in names:
            layer_types.setdefault(str(n), cat)
    priority = tuple(check(c, "[onnx] priority") for c in onnx.get("priority", []))
    layer_time = str(trt.get("layer_time", "mean"))
    if layer_time not in ("mean", "median"):
        raise TraceError(where, f"[tensorrt] layer_time must be mean or median, not {layer_time!r}")
    return EngineRules(onnx_ops, layer_types, priority, frozenset(onnx.get("fused_ops", [])), layer_time)
