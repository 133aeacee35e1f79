"""A stored report: the breakdown report's JSON document (``analyze --format json``) read back.

The one reader of a stored report, for every analysis that accepts one in place of a trace (a
``check`` baseline, a ``compare`` side): the document's times are checked before they are used
(a negative, NaN, infinite or ill-typed time, or categories that do not add up to the total,
would turn a gate off: a regression against -1 us never fires), then it is read with
:meth:`Report.from_dict`. Such a report has the document's tables only, never the per-activity
ones; an analysis reads what the document holds.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl

from ..core.reader import open_input, read_input
from ..errors import TraceError
from ..vocabulary import TIME_BASES
from .report import Report

#: the largest time a stored report may hold: int64 nanoseconds (292 years)
_MAX_NS = 2**63 - 1
_NOT_A_REPORT = "not a report JSON of 'analyze --format json'"


def is_stored_report(path: Any) -> bool:
    """Whether ``path`` names a report's JSON document (not a trace, which may end in .json too)."""
    if not str(path).endswith(".json"):
        return False
    try:
        with open_input(path) as f:
            if not f.regular:  # a stream cannot be peeked at and read again: read as a trace
                return False
            head = f.read(4096)
    except TraceError:
        return False
    return b'"schema_version"' in head and b'"tool_version"' in head and b'"traceEvents"' not in head


def read_stored_report(path: str | Path, role: str = "stored report") -> Report:
    """The report stored at ``path``, its times checked; bad input raises one :class:`TraceError`
    whose message names the report by its ``role`` (``baseline`` for a gate's)."""
    try:
        d = json.loads(read_input(path, what=role))  # bounded, whatever the path names; json drops a BOM
    except (ValueError, RecursionError) as exc:
        raise TraceError(path, f"{_NOT_A_REPORT} ({type(exc).__name__}: {exc})") from None
    if not isinstance(d, dict) or not isinstance(d.get("categories"), list) or not isinstance(d.get("steps"), list):
        raise TraceError(path, f"{_NOT_A_REPORT} (no categories and steps lists)")
    check_times(path, d, role)
    try:
        return Report.from_dict(d)
    except KeyError as exc:
        raise TraceError(path, f"{_NOT_A_REPORT} (no field {exc.args[0]!r})") from None
    except (TypeError, ValueError, AttributeError, pl.exceptions.PolarsError) as exc:
        raise TraceError(path, f"{_NOT_A_REPORT} ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})") from None


def check_times(path: str | Path, d: dict[str, Any], role: str) -> None:
    """The document's total and per-category times: numbers of microseconds in range, each category
    named once, and the categories adding up to the total (each rounded to the nanosecond); and its
    count of GPU activities, a whole number."""
    metric = d.get("metric")
    field = f"{metric}_time_us" if metric in TIME_BASES else "gpu_time_us"
    total = _time_ns(path, d.get("gpu_time_us"), f"{role} gpu_time_us")
    cats: dict[str, int] = {}
    for c in d["categories"]:
        name = c.get("category") if isinstance(c, dict) else None
        if not isinstance(name, str) or name in cats:
            raise TraceError(path, f"{role} category entry {c!r:.80} has no category name of its own")
        cats[name] = _time_ns(path, c.get(field), f"{role} {field} of category {name!r}")
    if abs(sum(cats.values()) - total) > len(cats):
        raise TraceError(path, f"{role} categories sum to {sum(cats.values()) / 1000:,.3f} us, not its "
                               f"gpu_time_us {total / 1000:,.3f} us: not a report as analyze writes it")
    count = d.get("gpu_activities")  # a gate's floor of activities is a share of it
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= _MAX_NS:
        raise TraceError(path, f"{role} gpu_activities is {count!r:.40}, not a count of GPU activities")


def _time_ns(path: str | Path, value: Any, what: str) -> int:
    """A time in microseconds -> nanoseconds: a finite number (not a bool, not text) from 0 to the
    int64 range, else a one-line refusal naming the field."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TraceError(path, f"{what} is {value!r:.40}, not a number of microseconds")
    if not math.isfinite(value) or value < 0 or value * 1000 > _MAX_NS:
        raise TraceError(path, f"{what} is {value!r}: a time must be finite, at least 0 and at most "
                               "292 years")
    return int(round(value * 1000))
