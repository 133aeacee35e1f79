"""The critical path of each step, walked backward from its end, and its attribution.

At the step's end the path is on the device (the last activity launched in the step ends after
the CPU range) or on the CPU. Backward from there:

* **on a stream** at activity ``k``: the path runs back through the activities queued behind
  one another to the chain's head (the last activity before ``k`` that waited for its launch),
  then through that launch's latency (``launch`` of the head's category) to its launch call on
  the CPU; when a recorded wait on another stream set the head's start (:mod:`.waits`), the delay
  after the awaited activity's end is ``sync`` (of the head's category) and the path goes onto
  that activity;
* **on a CPU thread** at time ``t``: the path runs back through the thread's pieces until the
  latest synchronizing call that waited (its awaited work ended after it began); the call's
  return cost after that work ended is ``sync``, and the path goes onto the device at the
  awaited activity's end. A wait on another thread (:mod:`.threads`) works the same way: the
  resumption after the awaited point is ``other``, and the path goes onto that thread there.

It stops at the step's start. The walk jumps between host and device only at waiting syncs
(a few per step), so it is a short loop over jumps; what each stretch holds is attributed in
one columnar pass. The stretches tile the step's wall time, so the attribution sums to it to
the nanosecond (checked).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ...models.latency import BOUNDS  # noqa: F401  (re-exported: the walk produces these)
from .pieces import locate
from .replay import Timeline


def _thread_syncs(tl: Timeline) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per thread, its waiting syncs ordered by end: (ends, sync rows)."""
    w = tl.syncs.filter(pl.col("waited")).sort(["thr", "end", "sync"])
    out = {}
    for (thr,), part in w.group_by(["thr"], maintain_order=True):
        out[int(thr)] = (part["end"].to_numpy(), part["sync"].to_numpy())
    return out


def walk(tl: Timeline) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The path's stretches: host (``step, thr, lo, hi``), device chains (``step, h, k, lo, hi``:
    act rows ``h..k`` of one stream) and single pieces (``step, bound, category, ns``)."""
    a = tl.acts
    S, E = a["ts"].to_numpy(), a["end"].to_numpy()
    skey = a["skey"].to_numpy()
    stream_first = np.zeros(len(S), np.int64)
    if len(S):
        new = np.r_[True, skey[1:] != skey[:-1]]
        stream_first = np.maximum.accumulate(np.where(new, np.arange(len(S)), 0))
    head_row, launched, jump = a["head_row"].to_numpy(), a["launched"].to_numpy(), a["jump"].to_numpy()
    launch_t, launch_thr = a["launch_t"].to_numpy(), a["thr"].fill_null(-1).to_numpy()
    act_cat = a["category"]  # indexed at chain heads only: no list of every activity
    sy = tl.syncs.sort("sync")
    s_ts, s_end, s_G = sy["ts"].to_numpy(), sy["end"].to_numpy(), sy["G"].fill_null(0).to_numpy()
    s_late, s_k = sy["late"].to_numpy(), sy["k"].fill_null(-1).to_numpy()
    s_point_thr = sy["point_thr"].fill_null(-1).to_numpy()
    s_cat = tl.pieces["category"].gather(sy["piece"]).to_list()
    by_thr = _thread_syncs(tl)
    # each step's last activity to end (the last row among ties): its latest end's rows, without a sort
    last_act = a.filter(pl.col("step").is_not_null()).group_by("step").agg(
        pl.col("row").filter(pl.col("end") == pl.col("end").max()).max())
    last_of = dict(zip(last_act["step"].to_list(), last_act["row"].to_list()))
    n_jumps = int((jump >= 0).sum())
    host, chains, single = [], [], []
    for st in tl.steps.iter_rows(named=True):
        step, lo, t = st["step"], st["start"], st["end"]  # the step's period (metrics/period.py)
        k = last_of.get(step)
        on_gpu = k is not None and st["gpu_end"] is not None and st["gpu_end"] > st["cpu_end"]
        if st.get("host_lo") is not None:  # a what-if's step paced by its host (metrics/period.paced_by_host)
            lo, t, on_gpu = st["host_lo"], st["cpu_end"], False
        thr = st["thr"]
        bound_of: dict[int, int] = {}
        for _ in range(4 * (len(s_ts) + n_jumps + 2) + 8):
            if t <= lo:
                break
            if on_gpu:
                h = int(head_row[k])
                start = min(max(int(S[h]), lo), t)
                chains.append((step, h, k, start, t))
                t = start
                if t <= lo:
                    break
                if jump[h] >= 0:  # a recorded wait on another stream set its start: onto the awaited activity
                    k = int(jump[h])
                    e = max(min(int(E[k]), t), lo)
                    single.append((step, "sync", act_cat[h], t - e))
                    t = e
                    continue
                if not launched[h]:
                    single.append((step, "other", "unclassified", t - lo))
                    t = lo
                    break
                tl_ = max(min(int(launch_t[h]), t), lo)
                single.append((step, "launch", act_cat[h], t - tl_))
                t, thr, on_gpu = tl_, int(launch_thr[h]), False
                continue
            ends, rows = by_thr.get(thr, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
            i = int(np.searchsorted(ends, t, side="right")) - 1
            i = min(i, bound_of.get(thr, len(ends)) - 1)
            if i < 0 or ends[i] <= lo:
                host.append((step, thr, lo, t))
                t = lo
                break
            j = int(rows[i])
            bound_of[thr] = i
            host.append((step, thr, int(s_end[j]), t))
            g = min(max(int(s_G[j]) - int(s_late[j]), int(s_ts[j])), int(s_end[j]))
            g = max(g, lo)
            if s_point_thr[j] >= 0:  # a wait on another thread: resumed after it, then onto that thread
                single.append((step, "other", "unclassified", int(s_end[j]) - g))
                t, thr = g, int(s_point_thr[j])
                continue
            single.append((step, "sync", s_cat[j], int(s_end[j]) - g))
            t = g
            k = _running_at(int(s_k[j]), t, S, stream_first)
            if k < 0:  # nothing it awaited was running: the whole call is sync
                single.append((step, "sync", s_cat[j], t - max(int(s_ts[j]), lo)))
                t = max(int(s_ts[j]), lo)
                continue
            if E[k] < t:  # the stream had finished before the call returned
                single.append((step, "sync", s_cat[j], t - max(int(E[k]), lo)))
                t = max(int(E[k]), lo)
            on_gpu = True
        if t > lo:  # the walk's guard ran out (cannot happen on a consistent timeline): say so, never drop time
            single.append((step, "other", "unclassified", t - lo))
    return (pl.DataFrame(host, schema={"step": pl.Int64, "thr": pl.Int64, "lo": pl.Int64, "hi": pl.Int64},
                         orient="row"),
            pl.DataFrame(chains,
                         schema={"step": pl.Int64, "h": pl.Int64, "k": pl.Int64, "lo": pl.Int64, "hi": pl.Int64},
                         orient="row"),
            pl.DataFrame(single, schema={"step": pl.Int64, "bound": pl.Utf8, "category": pl.Utf8, "ns": pl.Int64},
                         orient="row"))


def _running_at(k: int, t: int, S: np.ndarray, stream_first: np.ndarray) -> int:
    """The last activity at or before row ``k`` on its stream that had started before ``t`` (-1: none)."""
    if k < 0:
        return -1
    lo = int(stream_first[k])
    i = int(np.searchsorted(S[lo:k + 1], t, side="left")) - 1
    return lo + i if i >= 0 else -1


def _codes(column: pl.Series) -> tuple[np.ndarray, pl.Series]:
    """A text column as small codes and the sorted texts they index (an Enum of its own values); an
    enum column (the pieces' labels) as its own codes and values."""
    if isinstance(column.dtype, pl.Enum):
        return column.to_physical().to_numpy(), column.dtype.categories
    names = column.unique().drop_nulls().sort()
    return column.cast(pl.Enum(names)).to_physical().to_numpy(), names


def _host_share(tl: Timeline, host: pl.DataFrame, categories: bool = True) -> pl.DataFrame:
    """Each host stretch's time per piece label, summed per step and label; time on a thread before its
    first piece is ``other``. The stretches cover most of the pieces (every replay's, once per
    attribution), so the covered rows are numpy arrays of row numbers and label codes, summed before
    any text is gathered: a table of every covered piece with its texts took a third of the peak.
    ``categories`` False: the label is the bound alone (category null), for :func:`bound_times`."""
    empty = pl.DataFrame(schema={"step": pl.Int64, "bound": pl.Utf8, "category": pl.Utf8, "ns": pl.Int64})
    if host.height == 0:
        return empty
    # already in (thread, time) order: rows are numbered along each thread, which the replay keeps in order
    # the piece at or else after each stretch's start, and the last one before its end: by binary search
    on_start, after, before_end = locate(tl.pieces["thr"], tl.pieces["ts"], [
        (host["thr"], host["lo"], "right", -1), (host["thr"], host["lo"], "left", 0),
        (host["thr"], host["hi"], "left", -1)])
    p_lo = on_start.fill_null(after).fill_null(-1).to_numpy()
    p_hi = before_end.fill_null(-1).to_numpy()
    lo, hi, step = host["lo"].to_numpy(), host["hi"].to_numpy(), host["step"].to_numpy()
    # pieces are numbered by position (``row`` = index): each stretch's pieces are rows p_lo..p_hi
    n = np.where((p_lo >= 0) & (p_hi >= p_lo), p_hi - p_lo + 1, 0)
    first = np.cumsum(n) - n
    full = n > 0
    # the covered rows, one array: steps of 1, each stretch's first slot set so the running sum lands on its p_lo
    rows = np.ones(int(n.sum()), np.int64)
    if len(rows):
        at, p0 = first[full], p_lo[full]
        rows[at] = p0 - np.r_[0, (p0 + n[full] - 1)[:-1]]
        np.cumsum(rows, out=rows)
    # each covered piece's time inside its stretch (in place: these arrays have a slot per covered piece).
    # A piece ends where the next one on its thread starts, and they start in order: only a stretch's
    # first piece can start before it (clipped to ``lo``) and only its last end after it (to ``hi``)
    ts, end = tl.pieces["ts"].to_numpy(), tl.pieces["end"].to_numpy()
    ns = end[rows]
    label = ts[rows]  # the starts, then (the same slots) each covered piece's label
    ns -= label
    ends = np.r_[first[full], (first + n - 1)[full]]
    s_of = np.r_[np.flatnonzero(full), np.flatnonzero(full)]
    r = rows[ends]
    ns[ends] = np.minimum(end[r], hi[s_of]) - np.maximum(ts[r], lo[s_of])
    np.maximum(ns, 0, out=ns)
    covered = np.zeros(len(n), np.int64)
    if len(rows):
        covered[full] = np.add.reduceat(ns, first[full])
    rest = pl.DataFrame({"step": step, "bound": "other", "category": "unclassified", "ns": hi - lo - covered},
                        schema=empty.schema)
    b, b_names = _codes(tl.pieces["bound"])
    c, c_names = _codes(tl.pieces["category"]) if categories else (None, pl.Series([None], dtype=pl.Utf8))
    n_c, n_label = len(c_names), len(b_names) * len(c_names)
    label[...] = b[rows]
    if c is not None:
        label *= n_c
        label += c[rows]
    del rows, b, c
    steps, sums = _per_step_label(step, n, label, n_label, ns)
    del label, ns
    k = pl.Series(np.flatnonzero(sums))
    return pl.concat([pl.DataFrame({"step": pl.Series(steps).gather(k // n_label),
                                    "bound": b_names.gather(k % n_label // n_c),
                                    "category": c_names.gather(k % n_c), "ns": sums[k.to_numpy()]}).cast(empty.schema),
                      rest])


def _per_step_label(step: np.ndarray, n: np.ndarray, label: np.ndarray, n_label: int,
                    ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The steps, and the covered pieces' time summed per (step, label) at ``step index * n_label + label``
    (``step``, ``n``: each stretch's step and number of pieces; ``label``, ``ns``: each covered piece's).
    The attribution adds a step's stretches up anyway, and its times are never negative here, so a sum per
    step (zero where none) is what it reads; the keys of steps times labels are few enough to add up by
    position (integers, exact), where a hash group-by of every covered piece cost more than the rest."""
    steps, step_of = np.unique(step, return_inverse=True)
    sums = np.zeros((len(steps), n_label), np.int64)
    # a stretch at a time (a few per step): no array of every covered piece's key, most of an attribution's peak
    for i, lo in enumerate(np.cumsum(n) - n):
        if n[i]:
            np.add.at(sums[step_of[i]], label[lo:lo + n[i]], ns[lo:lo + n[i]])
    return steps, sums.ravel()


def _device_share(tl: Timeline, chains: pl.DataFrame, queue_gap_ns: int) -> pl.DataFrame:
    """Each device chain's time per activity: its run (plus the usual queue gap before it) is
    ``gpu`` (``communication`` for communication kernels); a longer wait behind the previous activity
    (a dependency the trace does not record) is ``communication`` when a communication kernel on its
    device ended just before it started, else ``sync``."""
    if chains.height == 0:
        return pl.DataFrame(schema={"step": pl.Int64, "bound": pl.Utf8, "category": pl.Utf8, "ns": pl.Int64})
    a = tl.acts.select("row", "ts", "end", "dur", "category", "after_comm")
    rows = chains.with_row_index("chain").select(
        "chain", "step", "lo", "hi", pl.int_ranges("h", pl.col("k") + 1).alias("row")).explode("row")
    rows = rows.join(a, on="row").sort(["chain", "row"])
    # the chain's activities tile [head's start, its last end]: each from the chain's running end before it
    e = pl.col("end").cum_max().over("chain")
    rows = rows.with_columns(e.alias("e"))
    rows = rows.with_columns(pl.col("e").shift(1).over("chain").fill_null(pl.col("ts")).alias("b"))
    rows = rows.with_columns(pl.max_horizontal("b", pl.col("e") - pl.col("dur") - queue_gap_ns).alias("busy_from"))

    def clipped(a_: str, b_: str) -> pl.Expr:
        return (pl.min_horizontal(pl.col(b_), pl.col("hi"))
                - pl.max_horizontal(pl.col(a_), pl.col("lo"))).clip(lower_bound=0)

    busy = rows.select("step", pl.when(pl.col("category") == "communication").then(pl.lit("communication"))
                       .otherwise(pl.lit("gpu")).alias("bound"), "category", clipped("busy_from", "e").alias("ns"))
    waited = pl.when(pl.col("after_comm")).then(pl.lit("communication")).otherwise(pl.lit("sync"))
    wait = rows.select("step", waited.alias("bound"), "category", clipped("b", "busy_from").alias("ns"))
    return pl.concat([busy, wait])


def _summed(tl: Timeline, queue_gap_ns: int, keys: list[str], categories: bool = True) -> pl.DataFrame:
    """The path's stretches attributed, their positive times summed per ``keys``, checked to tile each
    step's wall time."""
    host, chains, single = walk(tl)
    parts = pl.concat([_host_share(tl, host, categories), _device_share(tl, chains, queue_gap_ns), single])
    # lazily: the eager group_by of millions of host rows (in chunks) costs over ten times as much
    out = parts.lazy().filter(pl.col("ns") > 0).group_by(keys).agg(pl.col("ns").sum()).collect()
    got = out.group_by("step").agg(pl.col("ns").sum().alias("sum"))
    bad = tl.steps.join(got, on="step", how="left").filter(pl.col("sum").fill_null(0) != pl.col("wall"))
    if bad.height:
        raise AssertionError(f"critical path does not tile the wall time of steps {bad['step'].to_list()[:5]}")
    return out


def attribute(tl: Timeline, classes: dict[str, str], queue_gap_ns: int) -> pl.DataFrame:
    """``step, category, class, bound, ns`` along each step's critical path; per step the rows sum
    to its wall time exactly."""
    out = _summed(tl, queue_gap_ns, ["step", "category", "bound"])
    out = out.with_columns(pl.col("category").replace_strict(classes, default="unclassified",
                                                             return_dtype=pl.Utf8).alias("class"))
    return out.select("step", "category", "class", "bound", "ns").sort(["step", "ns", "category", "bound"],
                                                                        descending=[False, True, False, False])


def bound_times(tl: Timeline, queue_gap_ns: int) -> pl.DataFrame:
    """``step, bound, ns``: :func:`attribute`'s times summed over the categories, which is all that
    :func:`~nongemm_trace.models.latency.bound_of` and ``bounds_per_step`` read: the host pieces are
    summed per bound, with no category gathered, grouped or mapped to its class (most replays are
    attributed only for their bound: a what-if's three, the calibration's, ``launch``'s). The same sums
    as :func:`attribute`'s: the times summed are its positive ones, and integers add up in any order."""
    return _summed(tl, queue_gap_ns, ["step", "bound"], categories=False)
