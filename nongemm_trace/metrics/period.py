"""The step time users mean: the loop's period, one definition for every command.

A training or inference loop profiled the way PyTorch teaches (``schedule()`` and ``prof.step()``,
no synchronize per step) lets the host run ahead of the device: a step's kernels queue behind the
previous step's. From a step's host start to its last kernel's end is then *queueing latency*,
which grows with the queue (three identical steps measure 46, 57 and 69 ms), not what one more step
costs. The period is:

* each step's **boundary** is the later of its CPU range's end and the end of the last GPU
  activity launched in that range (the running maximum over the steps, so that boundaries never
  go back when streams overlap);
* each step **starts** at the later of its own CPU start and the previous step's boundary: where
  the host runs ahead, the device paces the loop and the step starts where the device finished the
  previous one; where the host waits for the device (a synchronize per step), the host paces it and
  the step starts with its CPU range, so host time between two marked steps is not charged to
  either;
* the first step of the trace starts no earlier than the end of the device work that was launched
  before it (before the profiler's window opened: activities with no launch call in the trace, or
  launched before the first step); that work is set apart, not charged to a step.

The period tiles the time between the first step's start and the last step's boundary, so the
mean period times the number of steps is the loop's wall time. ``latency`` keeps the queueing
figure (host start to boundary) under its own name.

The run *without* the profiler is a steady-state estimate, not a record of the window: its step is
the median of the window's step periods (``steady_step`` in ``vocabulary.py``), since the window's
first step carries the profiler's own switch from warm-up to recording, which the run without it
never pays.
"""

from __future__ import annotations

import polars as pl

#: what each step table gains: where the step starts (ns), its period and its queueing latency
PERIOD_COLUMNS = ("start", "wall", "latency")


def step_periods(steps: pl.DataFrame, acts: pl.DataFrame) -> pl.DataFrame:
    """``steps`` (``step, ts, cpu_end, gpu_end``; ns, ``gpu_end`` null for a step that launched
    nothing) with ``end`` (the boundary), ``start``, ``wall`` (the period) and ``latency`` (host start
    to the boundary), in step order. ``acts`` (``step, ts, end, launched, launch_t``: every activity,
    ``step`` null outside every step) gives the device work launched before the first step."""
    st = steps.sort("step").with_columns(pl.max_horizontal("cpu_end", "gpu_end").alias("end"))
    before = _launched_before(acts, st)
    boundary = pl.col("end").cum_max()
    prev = boundary.shift(1).fill_null(pl.lit(before, pl.Int64))
    start = pl.min_horizontal(pl.max_horizontal("ts", prev), "end")
    return st.with_columns(start.alias("start")).with_columns(
        (pl.col("end") - pl.col("start")).alias("wall"), (pl.col("end") - pl.col("ts")).alias("latency"))


def _launched_before(acts: pl.DataFrame, steps: pl.DataFrame) -> int | None:
    """The end of the device work launched before the first step, within that step: activities
    outside every step, with no launch call in the trace or one before the first step's start, that
    started before the first step's end (clipped to it)."""
    if acts.height == 0 or steps.height == 0:
        return None
    first_ts, first_end = int(steps["ts"][0]), int(steps["end"][0])
    early = acts.filter(pl.col("step").is_null() & (~pl.col("launched") | (pl.col("launch_t") < first_ts))
                        & (pl.col("ts") < first_end))
    value = early["end"].max() if early.height else None
    return min(int(value), first_end) if value is not None else None  # type: ignore[arg-type]


def step_times(acts: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """``step, start, end, wall, latency`` (ns) of every step of a selection, from its activities
    (``step``, ``ts_ns``, ``dur_ns``, ``launch_ts_ns``: every activity, before any is left out) and
    its steps (``step, ts_ns, end_ns``): the same figures the latency graph gives on the measured
    timeline (tests/test_step_time.py checks both agree on every shared trace with steps). An
    activity belongs to the step its launch call started in; one with no launch call in the trace
    to none (the selection places it by its start, for its tables)."""
    if steps.height == 0:
        return pl.DataFrame(schema={"step": pl.Int64, "start": pl.Int64, "end": pl.Int64, "wall": pl.Int64,
                                    "latency": pl.Int64})
    launched = pl.col("launch_ts_ns").is_not_null()
    a = acts.select(pl.when(launched).then(pl.col("step")).alias("step"), pl.col("ts_ns").alias("ts"),
                    (pl.col("ts_ns") + pl.col("dur_ns")).alias("end"), pl.col("launch_ts_ns").alias("launch_t"),
                    launched.alias("launched"))
    gpu = a.filter(pl.col("step").is_not_null()).group_by("step").agg(pl.col("end").max().alias("gpu_end"))
    st = steps.select("step", pl.col("ts_ns").alias("ts"), pl.col("end_ns").alias("cpu_end")).join(
        gpu, on="step", how="left")
    return step_periods(st, a).select("step", "start", "end", "wall", "latency")


def host_slack(steps: pl.DataFrame) -> pl.DataFrame:
    """``step, slack``: how much longer each step's CPU range (``ts`` to ``cpu_end``) was than its period
    (0 where it was not) on a timeline a what-if starts from: the host time a step's range holds that
    its period did not need (waiting for work launched before it, a step the device paced)."""
    return steps.select("step", (pl.col("cpu_end") - pl.col("ts") - pl.col("wall")).clip(lower_bound=0).alias("slack"))


def paced_by_host(steps: pl.DataFrame, slack: pl.DataFrame, waits: pl.DataFrame) -> pl.DataFrame:
    """A what-if's step periods (``steps`` with ``thr, ts, cpu_end, end, start, wall``), each at least its
    CPU range less the ``slack`` it had on the timeline the what-if changed (:func:`host_slack`), unless
    its host waited in it (``waits``: ``thr, ts`` of each call or thread wait that waited, on the
    what-if's timeline): a wait is the device's or another thread's time, which the period already
    follows.

    A what-if replays the trace's window from where the measured run stood when it opened. In a loop
    whose host ran ahead of a slower device, a backlog of queued work stands at the window's start, and
    a device made faster works through it faster than the host issues new steps: its boundaries come
    faster than the host's, for as long as the backlog lasts, and a window of a few steps would report
    that transient as the step. In steady state the loop cannot run faster than its host issues it, so
    such a step is paced by its host: its period is its host's time, and ``host_lo`` (null for the
    others) is where its critical path starts on its CPU range (``analyses/latency/path.py``). With
    nothing changed, every step keeps its period (the slack is what the range had over it)."""
    s = steps.join(slack, on="step", how="left").with_columns(pl.col("slack").fill_null(0))
    w = waits.select(pl.col("thr").cast(pl.Int64), pl.col("ts").alias("t")).sort("t")
    waited = s.select("step", pl.col("thr").cast(pl.Int64), "ts", "cpu_end").sort("ts").join_asof(
        w, left_on="ts", right_on="t", by="thr", strategy="forward", check_sortedness=False).select(
        "step", (pl.col("t") < pl.col("cpu_end")).fill_null(False).alias("waited"))
    s = s.join(waited, on="step", how="left")
    floor = pl.col("cpu_end") - pl.col("ts") - pl.col("slack")
    paced = (floor > pl.col("wall")) & ~pl.col("waited").fill_null(False)
    return s.with_columns(
        pl.when(paced).then(pl.col("ts") + pl.col("slack")).alias("host_lo"),
        pl.when(paced).then(pl.col("end") - floor).otherwise(pl.col("start")).alias("start"),
        pl.when(paced).then(floor).otherwise(pl.col("wall")).alias("wall")).drop("slack", "waited")
