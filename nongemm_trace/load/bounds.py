"""Every sum of a trace's durations must fit the int64 nanoseconds it is computed in.

Each loader bounds single times (a Kineto ``ts`` or ``dur`` beyond 4e15 us is refused as
invalid), but a few in-range durations can still add up past 2^63 ns: three kernels of
4e15 us each, or three TensorRT layers of 4.6e12 ms, and the summed GPU time wraps to a large
negative number, which every share and check downstream would then trust. No real run is
that long (2^62 ns is 146 years), so a trace whose activities, ops or launch calls add up to
more is refused in one line at load, for every format. The limit is 2^62 rather than 2^63 so
that the sums built from them (CPU + GPU time per op for the ``paper`` metric) fit as well.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..errors import TraceError

#: the most nanoseconds one table's durations may add up to (146 years)
MAX_SUM_NS = 1 << 62

#: the tables whose durations are summed, and what the refusal calls their rows
_TABLES = (("activities", "GPU activities"), ("ops", "CPU ops"), ("launches", "launch calls"))


def check_sums(trace) -> None:
    """Refuse ``trace`` when one table's durations add up past :data:`MAX_SUM_NS` (summed in
    floating point, which cannot wrap)."""
    for table, what in _TABLES:
        df = getattr(trace, table)
        if df.height and "dur_ns" in df.columns:
            total = df["dur_ns"].cast(float).abs().sum() or 0.0
            if total > MAX_SUM_NS:
                raise TraceError(trace.path, f"the durations of its {what} add up to {total / 3.156e16:,.0f} years, "
                                             "more than int64 nanoseconds can sum (no real run is that long)")


def sums_checked(load: Callable) -> Callable:
    """A loader whose every trace passes :func:`check_sums`."""
    @functools.wraps(load)
    def checked(*args, **kwargs):
        trace = load(*args, **kwargs)
        check_sums(trace)
        return trace
    return checked
