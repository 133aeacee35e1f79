"""What each Kineto event category means to us: the trace-format knowledge as data.

Kineto spells categories differently across versions (``kernel``/``Kernel``,
``cuda_runtime``/``Runtime``); every spelling seen in real traces maps to one role.
"""

from __future__ import annotations

from typing import Any

#: |ts| and dur beyond this many microseconds (~127 years) cannot be real and would
#: overflow int64 nanoseconds once added together (both decoding paths, and the C scanner, use it)
TIME_LIMIT_US = 4e15

#: GPU activities: work that ran on the device. Value: the activity ``kind``.
ACTIVITY_KIND = {
    "kernel": "kernel",
    "Kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "Memcpy": "memcpy",
    "gpu_memset": "memset",
    "Memset": "memset",
}

#: Host calls that launch device work, paired with activities by ``correlation``.
LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "Driver", "mtia_runtime", "xpu_runtime",
                               "xpu_driver", "privateuse1_runtime", "privateuse1_driver"})

#: Host ranges that can launch work and nest: operators and record_function scopes.
OP_CATEGORIES = frozenset({"cpu_op", "user_annotation", "Operator", "operator"})

#: The profiler's own bookkeeping on the host (``Activity Buffer Request``: Kineto fetching a CUPTI
#: buffer), written with pid -1. Routed with the ops and set apart as ``Trace.profiler_overhead`` when
#: the tables are built (load/kineto/build.py): never an op, but the op it interrupted does not own
#: its time (metrics/op_cpu.py).
OVERHEAD_CATEGORIES = frozenset({"overhead"})

#: Python stack events, kept only on request (often most of a trace's events).
PYTHON_CATEGORIES = frozenset({"python_function"})

#: CUDA synchronization records (``_ExperimentalConfig(enable_cuda_sync_events=True)``): on the GPU's
#: track, ``args.cuda_sync_kind`` ("Stream Wait Event", "Event Sync", "Stream Sync", "Context Sync"),
#: the synchronizing runtime call's ``correlation``, and for the event kinds the stream and the
#: ``cudaEventRecord`` correlation of the awaited event. The latency graph reads them.
SYNC_CATEGORIES = frozenset({"cuda_sync"})

#: Device-side events that are not GPU activities this tool reads (other accelerators, CUPTI's
#: range profiler, other converters' GPU categories), with what they are. They are counted and
#: reported in a warning, never summed silently.
OTHER_DEVICE_NOTES = {
    "mtia_ccp_events": "MTIA device work",
    "cuda_profiler_range": "CUPTI range-profiler ranges: per-range GPU metrics, not kernel timings",
    "cuda": "GPU events of another converter",
    "gpu": "GPU events of another converter",
    "GPU": "GPU events of another converter",
}
OTHER_DEVICE_CATEGORIES = frozenset(OTHER_DEVICE_NOTES)

#: the tables an event can go to, by category (the loader's routing)
ROUTES: dict[str, str] = {
    **{c: "acts" for c in ACTIVITY_KIND},
    **{c: "ops" for c in OP_CATEGORIES},
    **{c: "ops" for c in OVERHEAD_CATEGORIES},
    **{c: "launches" for c in LAUNCH_CATEGORIES},
    **{c: "syncs" for c in SYNC_CATEGORIES},
    **{c: "other" for c in OTHER_DEVICE_CATEGORIES},
}
#: the same with Python stack events kept
def mark_graph_launches(launches: Any, activities: Any = None) -> Any:
    """The launch table with the contract's CUDA/HIP graph columns, so the linker and the analyses
    need no runtime API names: ``graph_launch`` (the call replays a graph) and ``captured`` (a launch
    recorded into a graph, not run; ``activities``: the trace's, whose correlations ran). The call
    names are data (``facts/cuda_graphs.toml``, :mod:`.graph_capture`)."""
    from .graph_capture import mark_graph_calls

    return mark_graph_calls(launches, activities)


PY_ROUTES = {**ROUTES, **{c: "py" for c in PYTHON_CATEGORIES}}
#: the loader's partial tables
TABLES = ("ops", "launches", "acts", "py", "syncs")

#: the name the Kineto loader gives every ``ProfilerStep#N`` op, their numbers kept in the ops table's
#: ``step_number`` (as ``torch.profiler``'s ``key_averages`` groups them): a trace of a million steps
#: would otherwise hold a million op names
STEP_OP = "ProfilerStep*"
