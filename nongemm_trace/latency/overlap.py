"""Steps whose device work runs into the next step.

Without a synchronize per step the host runs ahead of a busy device: step N+1 starts on the host
while step N's kernels still run. A step's wall time (its CPU range's start to its last
activity's end) then includes the wait behind the earlier steps' queued work, so it is a
*latency* longer than the step's share of the throughput, and a what-if that speeds the host up
lengthens it (the steps start earlier behind the same queue). Users should know when their
numbers mean that.
"""

from __future__ import annotations

import polars as pl

from ..core.trace import Anomaly


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
                   f"starts on the host (up to {most / 1000:,.1f} us later; no synchronize per step): their wall time "
                   f"includes waiting behind earlier steps' queued work, and a faster host lengthens it")
