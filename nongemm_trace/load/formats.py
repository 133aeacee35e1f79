"""Which format a trace file is in, told from its first bytes: the loaders' registry.

Every input format is one :class:`Format`: a name, a ``sniff`` that looks at the start of the
(decompressed) file, and a ``load`` that turns the whole decoded document into a
:class:`~nongemm_trace.trace.Trace` (Kineto and Nsight Systems stream their files and are
dispatched by name). :func:`sniff` tries them in order; a document that no loader reads but
that is recognised (a TensorRT layer-information file without its profile, a rocprofiler-sdk
or Perfetto trace) is refused with one line naming what it is, instead of loading as an
empty Kineto trace. A new format is one entry in :data:`FORMATS` (or :data:`RECOGNISED`
while it is not read).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import TraceError
from .source import SQLITE_MAGIC


#: how much of the file's start the sniffers look at
SNIFF_BYTES = 64 << 10

#: trtexec --exportProfile: ``[{"count": N}, {"name": …, "timeMs": …}, …]``
_TRT_PROFILE = re.compile(rb'^\s*\[\s*\{\s*"count"\s*:\s*\d+\s*\}\s*[,\]]')
#: trtexec --exportLayerInfo / TREx ``*.engine.graph.json``: an object whose first key is "Layers"
_TRT_LAYERS = re.compile(rb'^\s*\{\s*"Layers"\s*:')
#: onnxruntime's profiler: Chrome-trace events whose categories are "Session" and "Node"
_ORT_EVENT = re.compile(rb'^\s*\[\s*\{[^{}]*"cat"\s*:\s*"(Session|Node|Api)"')
#: rocprofiler-sdk's JSON output (rocprofv3 --output-format json)
_ROCPROF = re.compile(rb'^\s*\{\s*"rocprofiler-sdk-tool"\s*:')


@dataclass(frozen=True)
class Format:
    """One input format: ``sniff(head, path)`` says whether the file is in it."""

    name: str
    description: str
    sniff: Callable[[bytes, str], bool]
    #: ``load(path, document, options)`` for formats read from their decoded JSON document
    load: Callable[[str, Any, dict[str, Any]], Any] | None = None


def _is_sqlite(head: bytes, path: str) -> bool:
    return head.startswith(SQLITE_MAGIC)


def _is_kineto(head: bytes, path: str) -> bool:
    """Whatever no other format claims: the Kineto loader checks the document itself (a JSON
    object with a ``traceEvents`` key, or a bare array of events) and names what is wrong."""
    return True


def _load_tensorrt(path: str, doc: Any, options: dict[str, Any]) -> Any:
    from .tensorrt import load_tensorrt

    return load_tensorrt(path, doc, options.get("layer_info"))


def _load_onnxruntime(path: str, doc: Any, options: dict[str, Any]) -> Any:
    from .onnxruntime import load_onnxruntime

    return load_onnxruntime(path, doc)


#: formats that are read, in the order they are tried (the first that claims a file loads it)
FORMATS: list[Format] = [
    Format("nsys-sqlite", "Nsight Systems SQLite export", _is_sqlite),
    Format("tensorrt-profile", "TensorRT per-layer profile (trtexec --exportProfile, TREx *.engine.profile.json)",
           lambda head, path: bool(_TRT_PROFILE.match(head)), _load_tensorrt),
    Format("onnxruntime-profile", "ONNX Runtime profile (SessionOptions.enable_profiling)",
           lambda head, path: bool(_ORT_EVENT.match(head)), _load_onnxruntime),
    Format("kineto", "Kineto / Chrome-trace JSON (torch.profiler)", _is_kineto),
]

#: formats that are recognised but not read: (name, what it is, how to spot it)
RECOGNISED: list[Format] = [
    Format("tensorrt-layers", "a TensorRT layer-information file (trtexec --exportLayerInfo or TREx engine "
                              "graph): analyze the engine's profile instead (found next to it by name, or "
                              "given this file with --layer-info)",
           lambda head, path: bool(_TRT_LAYERS.match(head))),
    Format("rocprofiler-sdk", "a rocprofiler-sdk JSON trace (rocprofv3): not supported; export a Kineto trace "
                              "with torch.profiler instead", lambda head, path: bool(_ROCPROF.match(head))),
]


def sniff(head: bytes, path: str) -> str:
    """The name of the format ``head`` (the file's first bytes, decompressed) is in. A recognised
    format that is not read raises :class:`TraceError` naming it."""
    head = head[:SNIFF_BYTES]
    for fmt in RECOGNISED:
        if fmt.sniff(head, path):
            raise TraceError(path, f"is {fmt.description}")
    return next(fmt.name for fmt in FORMATS if fmt.sniff(head, path))  # the last claims every file


def by_name(name: str) -> Format:
    return next(fmt for fmt in FORMATS if fmt.name == name)
