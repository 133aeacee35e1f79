"""Steps whose device work runs into the next step.

Without a synchronize per step the host runs ahead of a busy device: step N+1 starts on the host
while step N's kernels still run. The step figure is then the loop's period, paced by the device
(:mod:`nongemm_trace.metrics.period`), and the queueing latency from a step's host start to its
end (``latency_us``) is longer than it: it includes the wait behind the earlier steps' queued work,
and a faster host lengthens it. Users should know which of the two their numbers differ by.
"""

from __future__ import annotations

import polars as pl

from ...core.trace import Anomaly


def overlapping_steps(steps: pl.DataFrame, what: str) -> Anomaly | None:
    """A warning when some step's device work ends after the next step on its thread started.

    ``steps`` has ``thr`` (or ``tid``), ``ts`` (the CPU range's start) and ``gpu_end``; ``what``
    names the timeline (measured or predicted) in the message."""
    if steps.height < 2 or "gpu_end" not in steps.columns:
        return None
    thread = "thr" if "thr" in steps.columns else "tid"
    ordered = steps.sort(thread, "ts").with_columns(pl.col("ts").shift(-1).over(thread).alias("next_ts"))
    late = ordered.filter(pl.col("next_ts").is_not_null() & (pl.col("gpu_end") > pl.col("next_ts")))
    if late.height == 0:
        return None
    most = int((late["gpu_end"] - late["next_ts"]).max())
    return Anomaly("steps_overlap", late.height,
                   f"in the {what} timeline {late.height} step(s) still run on the device when the next step "
                   f"starts on the host (up to {most / 1000:,.1f} us later; no synchronize per step): the device paces "
                   f"the loop; each step is its period, and its queueing latency (latency_us) includes waiting "
                   f"behind earlier steps' queued work")
