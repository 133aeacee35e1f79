"""Which format a trace file is in, told from its first bytes: the loaders' registry.

Every input format is one :class:`Format`: its one name (the loaded trace's ``source_format``),
a ``sniff`` that looks at the start of the (decompressed) file, an ``open`` that turns the file
into a :class:`~nongemm_trace.core.trace.Trace`, and what the format is (suffixes, host timeline,
time basis, extra columns, whether it can be annotated or converted): commands ask the entry.
:func:`sniff` tries them in order; a document that no loader reads but that is recognised (a
TensorRT layer-information file without its profile, a rocprofiler-sdk or Perfetto trace) is
refused with one line naming what it is, instead of loading as an empty Kineto trace. A new format
is one entry in :data:`FORMATS` (or :data:`RECOGNISED` while it is not read).

Formats written as a JSON array (a TensorRT profile, an ONNX Runtime profile, Chrome's array of
trace events) are told by the structure of the array's first item, decoded (:func:`first_item`),
never by its spelling: a profile whose first object has one more key, or a count written as a
float, is still the format its keys say. An array whose first item no format claims is refused
with one line naming the file and what the item is: read as Kineto, it would be an empty trace.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..errors import TraceError
from ..schema import EXTRA_COLUMNS, DType
from .bom import without_bom
from .source import SQLITE_MAGIC, join_capped

#: how much of the file's start the sniffers look at
SNIFF_BYTES = 64 << 10

#: trtexec --exportLayerInfo / TREx ``*.engine.graph.json``: an object whose first key is "Layers"
_TRT_LAYERS = re.compile(rb'^\s*\{\s*"Layers"\s*:')
#: rocprofiler-sdk's JSON output (rocprofv3 --output-format json)
_ROCPROF = re.compile(rb'^\s*\{\s*"rocprofiler-sdk-tool"\s*:')


@dataclass(frozen=True)
class Format:
    """One input format and what it is: every command asks its entry, never its name.

    ``sniff(head, path)`` says whether the file is in it; ``open(path, blocks, options)`` turns the
    file's (decompressed) blocks into a :class:`~nongemm_trace.core.trace.Trace` whose
    ``source_format`` is ``name``; ``suffixes``: the file names it is found under (a folder given
    to ``batch`` is searched for them); ``host_timeline``: the trace holds the host's calls and
    launches in time (latency, what-if and launch read them), else its activities are a deployment
    stack's layers or nodes with no launch calls; ``time_basis``: what its activity times measure
    (``gpu``, or a deployment stack's ``layer``/``node`` time: ``vocabulary.TIME_BASES``; a profile
    may say otherwise in its metadata); ``annotate``: ``annotate`` can write it back with the
    categories; ``convert``: ``convert`` writes it as a Kineto trace; ``noun``: how messages name
    a file in it."""

    name: str
    description: str
    sniff: Callable[[bytes, str], bool]
    open: Callable[[str, Iterator[bytes], dict[str, Any]], Any] | None = None
    suffixes: tuple[str, ...] = ()
    host_timeline: bool = True
    time_basis: str = "gpu"
    annotate: bool = False
    convert: bool = False
    noun: str = "trace"
    #: file names that are another tool's report, exported to this format by that tool first
    exported_from: tuple[str, ...] = ()

    @property
    def extra_columns(self) -> dict[str, dict[str, DType]]:
        """The columns its loader adds to the contract tables (declared in :mod:`..schema`)."""
        return EXTRA_COLUMNS.get(self.name, {})


def _is_sqlite(head: bytes, path: str) -> bool:
    return head.startswith(SQLITE_MAGIC)


#: the first item of a JSON array could not be decoded from the file's start (it is longer than
#: :data:`SNIFF_BYTES`, or not JSON): the loader that reads the array whole says what it is
UNDECIDED = object()
#: the array has no item
NO_ITEM = object()


@lru_cache(maxsize=4)
def first_item(head: bytes) -> Any:
    """The first item of the JSON array that ``head`` (a file's first bytes, decompressed) opens,
    decoded; :data:`NO_ITEM` for an empty array, :data:`UNDECIDED` when the item does not end
    within ``head`` or is not JSON, None when ``head`` opens no array."""
    text = without_bom(head).lstrip()
    if text[:1] != b"[":
        return None
    body = text[1:].decode("utf-8", "replace")
    start = len(body) - len(body.lstrip())
    if body[start:start + 1] == "]":
        return NO_ITEM
    try:
        return json.JSONDecoder().raw_decode(body, start)[0]
    except (ValueError, RecursionError):
        return UNDECIDED


def _array_of(claims: Callable[[dict[str, Any]], bool]) -> Callable[[bytes, str], bool]:
    """A sniffer for a format written as a JSON array whose first item is an object that ``claims``."""
    def sniff(head: bytes, path: str) -> bool:
        item = first_item(head)
        return isinstance(item, dict) and claims(item)
    return sniff


def _is_kineto(head: bytes, path: str) -> bool:
    """A JSON object (the Kineto loader checks it has a ``traceEvents`` key and names what is wrong)
    or Chrome's array of trace events: each item has a phase ``ph`` (an empty array is an empty trace;
    an item too long to decode from the file's start is left to the loader)."""
    item = first_item(head)
    return item is None or item is NO_ITEM or item is UNDECIDED or (isinstance(item, dict) and "ph" in item)


def _is_trt_profile(item: dict[str, Any]) -> bool:
    """trtexec --exportProfile: ``[{"count": N}, {"name": …, "timeMs": …, "averageMs": …}, …]``: the first
    object holds the count of inferences (other keys beside it are tolerated), not a trace event's phase."""
    return "count" in item and "ph" not in item


#: onnxruntime's profiler: Chrome-trace events whose categories are "Session", "Node" and "Api"
_ORT_CATEGORIES = ("Session", "Node", "Api")


def _what_item(item: Any) -> str:
    """What the first item of an unknown JSON array is, for the refusal (its keys, cut short)."""
    if isinstance(item, dict):
        keys = [json.dumps(k)[:40] for k in list(item)[:6]]
        more = ", …" if len(item) > 6 else ""
        return f"an object with the keys {', '.join(keys)}{more}" if keys else "an empty object"
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(item), "a number")


def _open_kineto(path: str, blocks: Iterator[bytes], options: dict[str, Any]) -> Any:
    from .kineto.loader import load_kineto

    return load_kineto(path, keep_python=options.get("keep_python", False), blocks=blocks)


def _open_nsys(path: str, blocks: Iterator[bytes], options: dict[str, Any]) -> Any:
    from .nsys import load_nsys

    return load_nsys(path, join_capped(path, blocks))


def _document(path: str, blocks: Iterator[bytes]) -> Any:
    """A deployment stack's profile (small) decoded as one JSON document."""
    import msgspec

    data = without_bom(join_capped(path, blocks))
    try:
        return msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise TraceError(path, f"invalid or truncated JSON ({' '.join(str(exc).split())[:120]})") from None


def _open_tensorrt(path: str, blocks: Iterator[bytes], options: dict[str, Any]) -> Any:
    from .tensorrt import load_tensorrt

    return load_tensorrt(path, _document(path, blocks), options.get("layer_info"))


def _open_onnxruntime(path: str, blocks: Iterator[bytes], options: dict[str, Any]) -> Any:
    from .onnxruntime import load_onnxruntime

    return load_onnxruntime(path, _document(path, blocks))


_JSON = (".json", ".json.gz")

#: formats that are read, in the order they are tried (the first that claims a file loads it)
FORMATS: list[Format] = [
    Format("nsys", "Nsight Systems SQLite export", _is_sqlite, _open_nsys, (".sqlite", ".sqlite.gz"),
           convert=True, noun="Nsight Systems export", exported_from=(".nsys-rep", ".nsys-rep.gz")),
    Format("tensorrt", "TensorRT per-layer profile (trtexec --exportProfile, TREx *.engine.profile.json)",
           _array_of(_is_trt_profile), _open_tensorrt, _JSON, host_timeline=False,
           time_basis="layer", noun="TensorRT profile"),
    Format("onnxruntime", "ONNX Runtime profile (SessionOptions.enable_profiling)",
           _array_of(lambda item: item.get("cat") in _ORT_CATEGORIES), _open_onnxruntime, _JSON,
           host_timeline=False, time_basis="node", noun="ONNX Runtime profile"),
    Format("kineto", "Kineto / Chrome-trace JSON (torch.profiler)", _is_kineto, _open_kineto, _JSON,
           annotate=True, noun="Kineto JSON trace"),
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
    """The name of the format ``head`` (the file's first bytes, decompressed; a UTF-8 byte order mark
    is skipped) is in. A recognised format that is not read, and a JSON array that no format claims,
    raise :class:`TraceError` naming the file and what it is."""
    head = bytes(without_bom(head[:SNIFF_BYTES]))
    for fmt in RECOGNISED:
        if fmt.sniff(head, path):
            raise TraceError(path, f"is {fmt.description}")
    found = next((fmt.name for fmt in FORMATS if fmt.sniff(head, path)), None)
    if found is None:  # only an array is claimed by none (Kineto's loader reads every other document)
        raise TraceError(path, f"is a JSON array whose first item is {_what_item(first_item(head))}: not a format "
                               f"this tool reads ({', '.join(fmt.noun for fmt in FORMATS if _JSON == fmt.suffixes)})")
    return found


def by_name(name: str) -> Format:
    """The entry of a format by its name (a trace's ``source_format``)."""
    return next(fmt for fmt in FORMATS if fmt.name == name)


def format_of(trace: Any) -> Format:
    """The entry of the format a loaded trace was read from."""
    return by_name(trace.source_format)


def exported_by_name(path: str) -> Format | None:
    """The format a file must be exported to first, told by its name (an ``.nsys-rep``), else None."""
    return next((fmt for fmt in FORMATS if fmt.exported_from and path.endswith(fmt.exported_from)), None)


def trace_suffixes() -> tuple[str, ...]:
    """Every file name a trace is found under (each format's suffixes and the reports exported to one),
    the catch-all Kineto JSON first."""
    return tuple(dict.fromkeys(s for fmt in reversed(FORMATS) for s in (*fmt.suffixes, *fmt.exported_from)))


def suffix_text(suffixes: tuple[str, ...], sep: str = ", ") -> str:
    """``.json[.gz], .sqlite[.gz]``: suffixes for a message, a gzipped twin folded in."""
    plain = [s for s in suffixes if not (s.endswith(".gz") and s[:-3] in suffixes)]
    return sep.join(f"{s}[.gz]" if f"{s}.gz" in suffixes else s for s in plain)
