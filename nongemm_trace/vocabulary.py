"""The words every stage and renderer shares, spelled once.

Argparse choices, option validation, renderers and sort orders import these names;
a new metric, level or evidence rung is added here and nowhere else. Categories are
not here: each taxonomy declares its own in its ``[classes]`` table (data, not code).
"""

from __future__ import annotations

from typing import Any, overload

#: version of every JSON document the tool writes (report, launch, flops, compare)
SCHEMA_VERSION = "1.0"

#: what a share is a share of
METRICS = {
    "gpu": "GPU activity time",
    "cpu": "operator CPU time",
    "paper": "op CPU time + GPU time",
}

#: what the activities of a deployment stack's profile measure (the metric of its report)
TIME_BASES = {
    "layer": "TensorRT layer time (GPU, per inference)",
    "node": "ONNX Runtime node time",
}

#: what every metric and time basis measures, in words (headers, figures, comparisons)
METRIC_TEXT = {**METRICS, **TIME_BASES}

#: which op an activity is charged to
LEVELS = {
    "launch": "the op that launched the activity",
    "top": "the outermost real operator around it",
    "module": "the innermost named nn.Module around it",
}

#: what every command's step figure is (``step_us``, ``wall_us``, ``mean_step_us``: nongemm_trace/metrics/period.py),
#: and the queueing figure kept beside it under its own name (``latency_us``)
STEP_TIME = ("period: one step's cost in steady state, from the later of its CPU start and the previous "
             "step's end to its own end (the later of its CPU range's end and its last kernel's end)")
#: the step of the run without the profiler, a steady state (:func:`steady_step`)
STEADY_STEP = ("steady: the median of the window's steps without the profiler (the window's first step carries "
               "the profiler's switch from warm-up to recording, which the run without it never pays)")
STEP_LATENCY = "queueing latency: the step's CPU start to its end, waits behind earlier steps' queued work included"

#: the classes of the paper's taxonomy, in report order
CLASSES = ("GEMM", "non-GEMM", "communication", "transfer", "unclassified")

#: who owns busy time where activities of several classes overlap: compute first, communication
#: last (then its share is the exposed communication: ``busy(all) - busy(all but communication)``)
BUSY_CLASS_ORDER = ("GEMM", "non-GEMM", "transfer", "unclassified", "communication")
#: classes listed only where the trace has activities of them (host<->device transfers)
OPTIONAL_BUSY_CLASSES = ("transfer",)

#: categories the classifier itself names (a taxonomy must declare them)
BUILTIN_CATEGORIES = ("qdq", "communication", "unclassified")

#: the rungs of the evidence ladder, strongest first (docs/taxonomy.md)
EVIDENCE = ("semantics", "dataflow", "family", "generic", "none")

#: how strong a kernel rule's evidence is: a named vendor/library kernel family, or a generic word
KERNEL_EVIDENCE = ("family", "generic")

#: how an activity found its launching op (docs/architecture.md)
ATTRIBUTIONS = ("external_id", "nesting", "graph_launch", "launch_only", "none")


def either(words: Any) -> str:
    """Words as a choice in a sentence: ``launch, top or module``."""
    words = list(words)
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def us(ns: Any, digits: int = 3) -> float:
    """Nanoseconds (int, float or None) as microseconds rounded for a JSON document."""
    return round(float(ns or 0) / 1000.0, digits)


def steady_step(walls: Any) -> float | None:
    """The loop's step in steady state from a window's step periods (a polars Series of ns): their
    median, None for no step. The window's first step is where torch.profiler's schedule turns from
    warm-up to recording; that switch costs the first step alone (figures: docs/latency.md), so a mean
    charges one step's transient to every step of a run that has no profiler, and a median of the
    window's steps does not. Every figure of the run without the profiler (``latency``, ``whatif``, the calibration that
    matches a measured step) is this one."""
    values = walls.drop_nulls()
    return float(values.median()) if values.len() else None


@overload
def ns(us_value: None) -> None: ...
@overload
def ns(us_value: float | str) -> int: ...
def ns(us_value: Any) -> int | None:
    """Microseconds of a JSON document back to whole nanoseconds (None stays None): the inverse of
    :func:`us` for the integer nanoseconds the reports hold."""
    return None if us_value is None else int(round(float(us_value) * 1000))


def us_text(ns: Any) -> str:
    """Nanoseconds as microseconds for a table cell: thousands separated, one decimal."""
    return f"{float(ns or 0) / 1000:,.1f}"

#: the tables of each result model that ``--table`` picks (csv, parquet), the default first; the
#: models declare theirs from here (``Model.TABLES``) and the command line reads them without polars
MODEL_TABLES = {
    "report": ("categories", "ops", "kernels", "phases"),
    "launch": ("streams", "steps", "devices", "categories", "activities"),
    "flops": ("ops", "categories", "calls"),
}

#: the dtypes ``whatif --autocast`` takes (torch.autocast's lower precisions on CUDA)
AUTOCAST_DTYPES = ("bf16", "fp16")
