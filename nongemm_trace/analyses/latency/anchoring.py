"""Matching a replay to a measured step: which side of the run a measured step says differed, and the
factor on it (the device's durations or the host's time) that the replay needs to reach it, by bisection
(the replay is monotone in each), with the exact residual as the anchor. Used by :mod:`.unprofiled`'s
calibration; definitions and the evidence behind each range: docs/latency.md, *Anchoring*."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import polars as pl

from ...models.latency import bound_of
from .graph import Graph
from .path import bound_times
from .replay import Timeline

if TYPE_CHECKING:  # pragma: no cover
    from ...pipeline.context import Context

#: bisection steps of every search here
_BISECTIONS = 14
#: the device durations' scale search range (a run's clocks and contention differ, not by more)
DEVICE_SCALE_RANGE = (0.25, 4.0)
#: the host's time scale search range, where a measured step longer than the profiled run says the host was
#: slower than in the trace (1: no slower; the profiler's own cost is already taken out at most)
HOST_SCALE_RANGE = (1.0, 4.0)
#: how far two runs of the same kernels on one GPU may differ (its base clock is about 0.8 of its boost
#: clock): a device-bound estimate is calibrated on the device only where a scale in this band reaches
#: the measured step; a step the device cannot explain so is the host's
DEVICE_DRIFT = (0.8, 1.25)
#: a replay within this share of the measured step needs no device scaling (the anchor closes it)
_ANCHOR_TOLERANCE = 0.01


def device_bound(ctx: Context, g: Graph, tl: Timeline, steps: pl.Series) -> bool:
    """Whether the device holds more of the steps' critical path than the host on timeline ``tl``."""
    kept = replace(tl, steps=tl.steps.filter(pl.col("step").is_in(steps.implode())))
    return bound_of(bound_times(kept, g.queue_gap_ns)) == "device-bound"


def device_reaches(wall_at: Any, goal: float) -> bool:
    """Whether the device durations scaled within :data:`DEVICE_DRIFT` take the replayed mean step
    (``wall_at(scale)``, us) to ``goal``: a loop the model calls device-bound whose step hardly moves
    with the device (the host holds nearly as much of its critical path) cannot have its measured step
    explained by the device's clocks: scaling the device to reach it would take the durations far past
    any clock difference, and every what-if then inherits that device (docs/latency.md)."""
    lo, hi = DEVICE_DRIFT
    return wall_at(lo) <= goal <= wall_at(hi)


def anchor_on(wall_at: Any, goal: float, search: tuple[float, float] = DEVICE_SCALE_RANGE,
            what: str = "device durations") -> tuple[float, float, str | None]:
    """(scale, anchor, why) that make the replayed mean step (``wall_at(scale)``, us) equal the measured
    ``goal``: ``what`` (the device durations, or the host's time) scaled within ``search`` where the replay
    misses it by more than the tolerance, the exact residual as the anchor; ``why`` says so when the scale
    was needed."""
    wall = wall_at(1.0)
    if wall <= 0:
        return 1.0, 1.0, None
    if abs(wall - goal) <= _ANCHOR_TOLERANCE * goal:
        return 1.0, goal / wall, None
    lo, hi = search
    a, b = (1.0, hi) if wall < goal else (lo, 1.0)
    if (wall_at(b) < goal) if wall < goal else (wall_at(a) > goal):
        scale = b if wall < goal else a  # the range's end: the anchor closes the rest
    else:
        scale = bisect(lambda x: wall_at(x) > goal, a, b)  # longer durations, a longer step
    reached = wall_at(scale)
    anchor = goal / reached if reached > 0 else 1.0
    return scale, anchor, (f"the replay reaches the measured step {goal:,.1f} us only with the {what} "
                           f"scaled by {scale:.3g} (anchor {anchor:.4g})")


def bisect(past: Any, a: float, b: float) -> float:
    """The point in [a, b] where the monotone predicate ``past`` turns from False to True."""
    for _ in range(_BISECTIONS):
        mid = (a + b) / 2
        if past(mid):
            b = mid
        else:
            a = mid
    return (a + b) / 2
