"""``check``'s gates on a distributed rank: its exposed communication, and the arrival skew of its
collectives against the other ranks of the run.

Why: the share gates read GPU time per class, where communication kernels that computation hides
cost nothing and those that it does not are the step's time; and a rank whose host is late makes
every other rank wait inside each collective, which no single trace's total shows. So:

* ``max_exposed_communication``: the communication time no computation on the same device hid, as
  a share of the device's busy time (the time anything ran: ``metrics/launch.py``'s union of
  activities, the denominator of ``launch``'s busy-by-class line);
* ``max_skew_us``: with the other ranks' traces, the largest arrival skew of a collective matched
  across the ranks (``metrics/collectives.py``: the latest rank's start minus the earliest's), the
  time the earliest rank waited in it; the message names the call and the rank that came last, and
  how often each rank was last.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from ..errors import OptionError
from ..metrics.collectives import match_calls
from ..metrics.launch import busy_ns, exposed_communication
from ..pipeline.analysis import open_analysis

if TYPE_CHECKING:  # pragma: no cover
    from ..core.trace import Trace
    from ..pipeline.context import Context
    from ..pipeline.selection import Selection

#: a gate as ``check``'s :class:`~.check.Gate` takes it: limit, measured value, allowed, ok, message
GateRow = tuple[str, float, float, bool, str]


def _pct(share: float) -> str:
    return f"{100 * share:.1f}"


def validate_comm_limits(max_exposed_communication: float | None, max_skew_us: float | None,
                         ranks: list[str | Path] | None, path: Any = None) -> None:
    """Refuse a limit that could never fire: a share outside 0..1, a skew that is no finite time of 0 or
    more, a skew limit without the other ranks' traces to match the collectives with."""
    if max_exposed_communication is not None and not 0.0 <= max_exposed_communication <= 1.0:
        raise OptionError(path, f"max_exposed_communication is {max_exposed_communication:g}, not a share "
                                "between 0 and 1", "max_exposed_communication")
    if max_skew_us is not None:
        if isinstance(max_skew_us, bool) or not isinstance(max_skew_us, (int, float)) \
                or not math.isfinite(max_skew_us) or max_skew_us < 0:
            raise OptionError(path, f"max_skew_us is {max_skew_us!r}, not a finite time in us of 0 or more",
                              "max_skew_us")
        if not ranks:
            raise OptionError(path, "max_skew_us needs the traces of the run's other rank(s) to match its "
                                    "collectives with", "max_skew_us")


def parse_us(text: str | float, where: str) -> float:
    """``500``, ``500us``, ``0.5ms`` or ``1 s`` -> microseconds."""
    t = str(text).strip().replace(" ", "").lower()
    for unit, scale in (("us", 1.0), ("ms", 1e3), ("s", 1e6)):
        if t.endswith(unit):
            t, factor = t[:-len(unit)], scale
            break
    else:
        factor = 1.0
    try:
        return float(t) * factor
    except ValueError:
        raise OptionError(None, f"{where}: {text!r} is not a time (500, 500us, 0.5ms)", where) from None


def exposed_share(acts: pl.DataFrame) -> tuple[float, int, int]:
    """The exposed communication's share of the busy time, with both (ns), over the kept activities ``acts``."""
    if acts.height == 0:
        return 0.0, 0, 0
    acts = acts.with_columns((pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns"))
    exposed = int(exposed_communication(acts, ["device"])["exposed_communication_ns"].sum() or 0)
    busy = sum(busy_ns(acts.filter(pl.col("device") == d)) for d in acts["device"].unique().to_list())
    return (exposed / busy if busy else 0.0), exposed, busy


def _rank_of(trace: Trace, fallback: int) -> int:
    info = trace.metadata.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    return rank if isinstance(rank, int) and not isinstance(rank, bool) else fallback


def matched_collectives(sel: Selection, ctx: Context, ranks: list[str | Path], options: dict[str, Any]) -> pl.DataFrame:
    """The collectives of this rank (its selection ``sel`` and context ``ctx``) and the ``ranks`` given
    (opened under ``options``), matched across them (``match_calls``' table; empty where fewer than two
    ranks hold collectives)."""
    from .collectives import calls_of, collective_calls

    frames, seen = [], set()
    for i, source in enumerate([None, *ranks]):
        other = None if source is None else open_analysis(source, options, metric="gpu")
        path, trace = (ctx.path, ctx.trace()) if other is None else (other[0].path, other[0].trace())
        rank = _rank_of(trace, i)
        if rank in seen:
            raise OptionError(path, f"rank {rank} is given twice (distributedInfo.rank): give each rank's "
                                    "trace once", "ranks")
        seen.add(rank)
        calls = calls_of(sel, trace, path) if other is None else collective_calls(other[0], other[1])
        frames.append(calls.with_columns(pl.lit(rank, pl.Int64).alias("rank")))
    one, _ = match_calls(pl.concat(frames)) if frames else (pl.DataFrame(), pl.DataFrame())
    return one


def comm_gates(sel: Selection, ctx: Context, options: dict[str, Any], *,
               max_exposed_communication: float | None = None, max_skew_us: float | None = None,
               ranks: list[str | Path] | None = None) -> list[GateRow]:
    """The gates asked for, each with its measured value (:data:`GateRow`), of the rank whose selection
    and context are ``sel`` and ``ctx`` (the other ``ranks`` opened under ``options``)."""
    out: list[GateRow] = []
    if max_exposed_communication is not None:
        share, exposed, busy = exposed_share(sel.activities)
        ok = not share > max_exposed_communication
        out.append(("max-exposed-communication", share, max_exposed_communication, ok,
                    f"exposed communication is {_pct(share)} % of the busy GPU time ({exposed / 1000:,.1f} "
                    f"of {busy / 1000:,.1f} us), {'within' if ok else 'above'} the limit of "
                    f"{_pct(max_exposed_communication)} %"))
    if max_skew_us is not None:
        one = matched_collectives(sel, ctx, list(ranks or []), options)
        if one.height == 0:
            out.append(("max-skew", math.inf, max_skew_us, False,
                        "no collective was matched across the ranks given: a skew gate cannot pass ranks "
                        "whose collectives it cannot see"))
            return out
        worst = one.sort(["skew_ns", "first_ns"], descending=[True, False]).row(0, named=True)
        skew = worst["skew_ns"] / 1000
        lasts = one.group_by("last_rank").len().sort("last_rank")
        often = ", ".join(f"rank {r} {n}" for r, n in lasts.iter_rows())
        where = f"{worst['kind']} #{worst['k']}" + (f" of {worst['step_name']}" if worst["step_name"] else "")
        ok = not skew > max_skew_us
        out.append(("max-skew", skew, max_skew_us, ok,
                    f"the largest collective arrival skew is {skew:,.1f} us ({where}, rank {worst['last_rank']} "
                    f"last; last on the {one.height} collectives: {often}), {'within' if ok else 'above'} "
                    f"the limit of {max_skew_us:,.1f} us"))
    return out
