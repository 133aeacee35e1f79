"""The profiler-overhead model's data (``devices/profiler_overhead.toml``): per profiler setting and
process, the share of each kind of host piece that remains without the profiler. Its own module, so
that the fitting scripts and the replay read one definition of the model and the processes it
describes (:mod:`.unprofiled` applies it)."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from importlib import resources
from typing import Any

#: the trace metadata key the collectors write (nongemm_trace/collectors/unprofiled.py)
METADATA_KEY = "nongemm_unprofiled"
#: the piece kinds the model scales (a graph launch is a ``launch`` piece of a ``cudaGraphLaunch``)
PIECE_KINDS = ("op", "wrapper", "gap", "launch", "call", "graph_launch")
#: every kind a piece can have, by the code :func:`.unprofiled.piece_kinds` gives it (the model's kinds first)
KIND_CODES = PIECE_KINDS + ("sync", "wait", "unknown")


@dataclass(frozen=True)
class OverheadModel:
    """The share of each kind of host piece that remains without the profiler, for one setting."""

    setting: str
    remains: dict[str, float]
    activity_ns: float  # device time the profiler's activity tracing adds to each GPU activity
    torch: str
    fit: str  # where the numbers come from (captures, error)
    side_thread: float = 1.0  # the factor on the profiler's time in the pieces of threads other than the steps'
    graph_activity_ns: float | None = None  # activity_ns for an activity a CUDA/HIP graph replay ran (None: the same)
    graph_replay_gap_ns: float = 0.0  # the device time the profiler adds before each graph replay's first activity
    process: str = "never_profiled"  # the process it describes: one the profiler never attached to, or ``attached``


@functools.cache
def _models() -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    return tomllib.loads((resources.files("nongemm_trace.devices") / "profiler_overhead.toml").read_text())


def profiler_settings(metadata: dict[str, Any], has_shapes: bool) -> dict[str, bool]:
    """The profiler's settings for the trace: the collectors' record, else torch's own metadata keys
    (it writes ``record_shapes``, ``with_stack``, ``profile_memory``, ``with_flops`` when set), else what
    the events show (input shapes recorded)."""
    doc = metadata.get(METADATA_KEY)
    recorded = doc.get("profiler") if isinstance(doc, dict) else None
    out = {}
    for key, seen in (("record_shapes", has_shapes), ("with_stack", False), ("profile_memory", False),
                      ("with_flops", False)):
        if isinstance(recorded, dict) and key in recorded:
            out[key] = bool(recorded[key])
        elif key in metadata:
            out[key] = str(metadata[key]).strip().lower() in ("1", "true", "yes")
        else:
            out[key] = seen
    return out


#: the processes a model can describe: one torch.profiler never attached to (the run without the profiler),
#: and one it stayed attached to after its window (the loop's steps after a profiled window)
PROCESSES = ("never_profiled", "attached")
#: the piece kinds that are runtime calls, whose CUPTI callbacks stay after a window
RUNTIME_KINDS = ("launch", "call", "graph_launch")


def process_of(attached: bool) -> str:
    """The process an answer is for: the loop after its profiled window, the profiler still attached
    (``attached``), else a process the profiler never attached to (the run without the profiler)."""
    return "attached" if attached else "never_profiled"


def model_for(settings: dict[str, bool], process: str = "never_profiled") -> OverheadModel:
    """The fitted model of the nearest setting: with_stack, record_shapes, or neither; with
    ``profile_memory`` its factors on the shares that remain (the allocator's events are recorded
    inside the ops, so only the ops' and wrappers' shares change: ``[profile_memory]`` in the data).
    ``process``: the run in a process the profiler never attached to (the fitted shares of the runtime
    calls times ``[never_profiled] runtime``), or in one it left attached (the shares as fitted)."""
    if process not in PROCESSES:
        raise ValueError(f"process must be one of {', '.join(PROCESSES)}, not {process!r}")
    data = _models()
    name = "with_stack" if settings.get("with_stack") else "record_shapes" if settings.get("record_shapes") else "plain"
    row = data["settings"][name]
    remains = {k: float(row["remains"][k]) for k in PIECE_KINDS}
    fit = str(row.get("fit", ""))
    memory = data.get("profile_memory")
    if settings.get("profile_memory") and memory:
        remains = {k: v * float(memory["remains"].get(k, 1.0)) for k, v in remains.items()}
        name, fit = f"{name}+profile_memory", f"{fit}; profile_memory: {memory.get('fit', '')}"
    never = data.get("never_profiled")
    if process == "never_profiled" and never:
        remains = {k: v * float(never["runtime"]) if k in RUNTIME_KINDS else v for k, v in remains.items()}
        fit = f"{fit}; never profiled: {never.get('fit', '')}"
    device = data.get("device", {})
    graph_ns = device.get("graph_activity_ns")
    return OverheadModel(name, remains, float(device.get("activity_ns", 0.0)), str(data.get("torch", "")), fit,
                         float(row.get("side_thread", 1.0)), None if graph_ns is None else float(graph_ns),
                         float(device.get("graph_replay_gap_ns", 0.0)), process)
