"""Replay a dependency graph with changed durations: the measured timeline (every factor 1)
or a what-if one.

The rules (integer ns):

* **Host**: each thread runs its pieces in order; a piece takes its (scaled) length, except
  that a synchronizing call cannot return before the device work it waits for has ended plus
  its own return cost (``tail``). So a host point's time is its position ``o`` on the thread
  (the summed lengths before it) plus ``W``, the thread's accumulated waiting, which only a
  sync raises: ``W' = max(W, G - o_sync)``, ``G`` the awaited work's end.
* **Device**: an activity starts at ``max(R, E_prev + gap)``: ``R`` = its launch call's start
  + ``lat`` (when it waited for its launch), ``E_prev`` = the previous activity's end on its
  stream. Unrolled per stream, ``E_k = C_k + max_{m<=k}(R_m + d_m - C_m)`` with ``C`` the
  running sum of ``gap + d``: a running maximum (``cum_max``), no loop per activity.
* **Cross-stream waits** (``deps``): an activity that waits for another stream's activity starts no
  earlier than that one's end + the kept delay; the bound joins its running maximum (``X``). Each
  is resolved once, in launch order, from the ends known by then.
* The host and the device meet only at syncs, so one pass over the syncs in time order (a
  few per step) fixes every thread's ``W``; each pass extends the streams' running maxima
  only over the activities not yet seen (numpy slices). Then every time is one columnar
  expression.

With every factor 1 this reproduces the measured timeline exactly (``lat``/``gap`` are
defined so: :func:`.graph.start_terms`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ...metrics.period import step_periods
from .graph import Graph

_NEG = np.iinfo(np.int64).min // 4
#: the host pieces a replay adds their waits to at once (a loop per block of pieces, not per piece)
_BLOCK = 1 << 16


@dataclass
class Timeline:
    """A replayed (or the measured) timeline of a graph; times in int64 ns."""

    pieces: pl.DataFrame  # row, thr, ts, end, kind, bound, category, op_id, launch_id
    acts: pl.DataFrame    # row, skey, pos, ts, end, dur, head, head_row, launch_t, thr, category, class, step, ...
    syncs: pl.DataFrame   # sync, piece, thr, ts, end, G, k (awaited act row ending last), waited
    steps: pl.DataFrame   # step, name, thr, first, last, ts, cpu_end, gpu_end, end, start, wall (the period), latency


def replay(g: Graph, act_dur: np.ndarray, piece_dur: np.ndarray, lat: np.ndarray | None = None,
           gap: np.ndarray | None = None) -> Timeline:
    """The timeline of ``g`` with activity durations ``act_dur`` (by act row), host piece lengths
    ``piece_dur`` (by piece row; a sync's piece: its return cost), launch latencies ``lat`` and
    queue gaps ``gap`` (default the graph's)."""
    o, gseg, starts, n_seg_thr = _host_positions(g, piece_dur)
    sync_piece = g.syncs["piece"].to_numpy()
    W = np.zeros(int(n_seg_thr.sum()) + 1, np.int64)  # the last slot stays 0: activities with no launch call

    a = g.acts
    d = np.asarray(act_dur, np.int64)
    lat = a["lat"].to_numpy(allow_copy=True) if lat is None else lat
    launched = a["lp"].is_not_null().to_numpy()
    lp = a["lp"].fill_null(0).to_numpy()
    skey = a["skey"].to_numpy()
    gap = a["gap"].to_numpy() if gap is None else np.asarray(gap, np.int64)
    C = _stream_cumsum(skey, gap + d)
    lat_v = np.where(launched, np.nan_to_num(lat.astype(np.float64), nan=0.0), 0).astype(np.int64)
    o_lp = o[lp] if len(o) else np.zeros(len(lp), np.int64)
    gseg_lp = gseg[lp] if len(o) else np.zeros(len(lp), np.int64)
    ready = _unlaunched_ready(g, d)  # once a replay: the start terms and the chains' heads read it
    U = np.where(launched, o_lp + lat_v, ready) + d - C
    act_seg = np.where(launched, gseg_lp, len(W) - 1)

    # cross-stream waits (recorded, or on a communication kernel): start >= the awaited end + the delay
    streams = _Streams(U, C, W, act_seg, skey, d, g.deps)
    _sync_pass(g, o, gseg, sync_piece, W, streams, a)
    streams.resolve_all()

    V = np.maximum(U + W[act_seg], streams.X)
    E = C + _stream_cummax(skey, V)
    launch_t = np.where(launched, o_lp + W[gseg_lp], E - d)
    # the host pieces' starts, in place and by blocks (no gathered copy of every piece's wait): a million
    # pieces' arrays are most of a replay's peak
    for lo in range(0, len(o), _BLOCK):
        o[lo:lo + _BLOCK] += W[gseg[lo:lo + _BLOCK]]
    del gseg
    return _assemble(g, d, E, launch_t, lat_v, gap, launched, o, starts, ready)


def _host_positions(g: Graph, piece_dur: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``o`` (each piece's start on its thread before any wait: the thread's first start plus the lengths
    before it), ``gseg`` (its global segment: threads one after another, each with its syncs + 1
    segments, a sync's piece closing one: the syncs before it on the whole timeline plus its thread's
    ordinal), the threads' first pieces and each thread's segment count. Each made by one running sum,
    in place, of what changes where a thread begins or a sync closes (no array of every piece's thread
    ordinal, no loop per thread or per block: a trace may hold a thread per op): these arrays have one
    slot per host piece and a replay runs many times (the calibration, every what-if)."""
    p = g.pieces
    thr = p["thr"].to_numpy()
    n = len(thr)
    if n == 0:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0, bool), z
    starts = np.r_[True, thr[1:] != thr[:-1]]
    thr_first = np.flatnonzero(starts)
    # each thread from its first piece's start: the shift from the lengths before it to that start, added
    # where the thread begins and carried by the running sum (one pass, no thread ordinal per piece)
    before = np.cumsum(np.add.reduceat(piece_dur, thr_first, dtype=np.int64))
    before = np.r_[0, before[:-1]]
    shift = p["ts"].to_numpy()[thr_first] - before
    o = np.asarray(piece_dur).astype(np.int64)
    o[thr_first] += np.diff(shift, prepend=0)
    np.cumsum(o, out=o)
    o -= piece_dur
    is_sync = np.zeros(n, np.int8)  # summed as int64
    is_sync[g.syncs["piece"].to_numpy()] = 1
    n_seg_thr = np.add.reduceat(is_sync, thr_first, dtype=np.int64) + 1
    # the syncs before each piece plus its thread's ordinal: a running count of the threads begun and the
    # syncs closed before each piece, less one
    rise = starts.astype(np.int8)
    rise[1:] += is_sync[:-1]
    del is_sync
    gseg = np.cumsum(rise, dtype=np.int32)  # 32-bit: a trace has far fewer syncs than that, and it lives per replay
    gseg -= 1
    return o, gseg, starts, n_seg_thr


def _assemble(g: Graph, d, E, launch_t, lat_v, gap, launched, t, starts, ready, end=None) -> Timeline:
    """The timeline from activity ends ``E`` (durations ``d``), launch call starts ``launch_t``, host
    piece starts ``t`` (and ends ``end``, else made from the starts) and the unlaunched activities' earliest
    starts ``ready`` (:func:`_unlaunched_ready` of the same durations): which activities head a chain
    (their launch, not the queue, set their start)."""
    a = g.acts
    skey = a["skey"].to_numpy()
    S = E - d
    R = np.where(launched, launch_t + lat_v, ready)
    first = np.r_[True, skey[1:] != skey[:-1]] if len(skey) else np.zeros(0, bool)
    E_prev = np.r_[_NEG, E[:-1]] if len(E) else E
    # the backlog is queued, like a launched activity whose launch came early: the queue sets its start
    head, jump = _heads(g.deps, first, launched | a["backlog"].to_numpy(), R, E, E_prev, gap)
    rows = np.arange(len(E))
    head_row = np.maximum.accumulate(np.where(head, rows, -1)) if len(E) else rows
    acts = a.with_columns(pl.Series("ts", S), pl.Series("end", E), pl.Series("dur", d), pl.Series("head", head),
                          pl.Series("head_row", head_row), pl.Series("launch_t", launch_t),
                          pl.Series("launched", launched), pl.Series("jump", jump))
    if end is None:
        end = np.empty_like(t)  # the next piece's start, a thread's last piece its own
        if len(t):
            end[:-1] = t[1:]
            last = np.r_[starts[1:], True]
            end[last] = t[last]
    pieces = g.pieces.with_columns(pl.Series("ts", t), pl.Series("end", end))
    return Timeline(pieces, acts, _sync_times(g, pieces, acts), _step_times(g, pieces, acts))


def _unlaunched_ready(g: Graph, d: np.ndarray) -> np.ndarray:
    """When an activity with no launch call could start (``d``: the replay's durations): for the backlog
    (:func:`.graph.start_terms`) no earlier bound than its stream's queue; else its measured start, except
    for the head of a stream's queue when the first step began.

    That head is the first activity of its stream the trace recorded, queued before the first step and
    starting while that step runs on the host: a loop whose host runs ahead has its device still working
    through earlier steps' kernels when the profiler's window opens, launched before the profiler recorded
    launches (or activities), so the head's measured start is where that unrecorded queue ended. That
    queue is earlier steps' kernels, the same kernels as the head's own backlog, so a replay shortens or
    lengthens it as it does that backlog: the head's delay after the first step's start scales by the
    ratio of the backlog's (head included) replayed to measured device time. Held at its measured time
    instead, the head would keep a device made faster busy with old work into the first step, and that
    step's period would lose the host time it ran beside it. With the measured durations the ratio is 1
    and every start is the measured one."""
    ts = g.acts["ts"].to_numpy()
    backlog = g.acts["backlog"].to_numpy()
    ready = np.where(backlog, _NEG, ts)
    if g.steps.height == 0 or len(ts) == 0:
        return ready
    skey = g.acts["skey"].to_numpy()
    first = np.r_[True, skey[1:] != skey[:-1]]
    w0, w1 = int(g.steps["ts"].min()), int(g.steps.sort("ts")["end"][0])  # type: ignore[arg-type]
    heads = np.flatnonzero(first & g.acts["lp"].is_null().to_numpy() & ~backlog & (ts > w0) & (ts < w1))
    if heads.size == 0:
        return ready
    group = np.cumsum(~backlog | first) - 1  # a head and the backlog queued behind it
    replayed = np.bincount(group, weights=d)
    measured = np.bincount(group, weights=g.acts["dur"].to_numpy())
    hg = group[heads]
    ratio = np.where(measured[hg] > 0, replayed[hg] / np.maximum(measured[hg], 1), 1.0)
    moved = ratio != 1.0
    ready[heads[moved]] = w0 + np.round((ts[heads[moved]] - w0) * ratio[moved]).astype(np.int64)
    return ready


def _stream_cumsum(skey: np.ndarray, x: np.ndarray) -> np.ndarray:
    if len(x) == 0:
        return x.astype(np.int64)
    c = np.cumsum(x)
    first = np.r_[True, skey[1:] != skey[:-1]]
    before = np.where(first, c - x, _NEG)
    return c - np.maximum.accumulate(before)


def _stream_cummax(skey: np.ndarray, v: np.ndarray) -> np.ndarray:
    if len(v) == 0:
        return v
    return pl.DataFrame({"k": skey, "v": v}).select(pl.col("v").cum_max().over("k"))["v"].to_numpy()


def _heads(deps: pl.DataFrame, first, launched, R, E, E_prev, gap) -> tuple[np.ndarray, np.ndarray]:
    """Which activities head a chain, and for each, the activity it jumps to (-1: none). A head's start
    was set by its launch (or it is its stream's first, or has no launch call), or by a recorded wait
    that outlasted both its launch and the previous activity (then the path jumps to the awaited
    activity: ``jump``). A wait on a communication kernel that outlasted the launch keeps the activity
    queued in its chain (its wait is ``communication`` on the path)."""
    n = len(E)
    jump = np.full(n, -1, np.int64)
    E_prev = np.where(first, _NEG, E_prev)  # a stream's first activity follows nothing
    base = ~launched | (R >= E_prev + gap)
    if deps.height == 0:
        return first | base, jump
    act, dep = deps["act"].to_numpy(), deps["dep"].to_numpy()
    after = E[dep] + deps["delta"].to_numpy()
    rec = deps["recorded"].to_numpy()
    after_rec, after_comm = np.full(n, _NEG, np.int64), np.full(n, _NEG, np.int64)
    np.maximum.at(after_rec, act[rec], after[rec])
    np.maximum.at(after_comm, act[~rec], after[~rec])
    base &= R >= np.maximum(after_rec, after_comm)
    waited = launched & (after_rec > R) & (after_rec > E_prev + gap) & (after_rec >= after_comm)
    # the awaited activity that ended last (+ its delay): the one that set the start
    order = np.lexsort((after[rec], act[rec]))
    r_act, r_dep = act[rec][order], dep[rec][order]
    last = np.r_[r_act[1:] != r_act[:-1], True] if len(r_act) else np.zeros(0, bool)
    best = np.full(n, -1, np.int64)
    best[r_act[last]] = r_dep[last]
    jump = np.where(waited, best, -1)
    return first | base | waited, jump


class _Streams:
    """The streams' running maxima, extended only over activities not yet seen (the sync pass), and
    the cross-stream waits' bounds ``X`` (in the running maximum's terms: the awaited end + delay +
    d - C), each resolved once, in launch order, so that extending a stream never recurses far."""

    def __init__(self, U, C, W, act_seg, skey, d, deps: pl.DataFrame):
        self.U, self.C, self.W, self.act_seg, self.skey, self.d = U, C, W, act_seg, skey, d
        n = len(U)
        self.start = np.zeros(int(skey.max()) + 2 if n else 1, np.int64)
        if n:
            firsts = np.flatnonzero(np.r_[True, skey[1:] != skey[:-1]])
            self.start[skey[firsts]] = firsts
        self.ptr = self.start.copy()
        self.PM = np.full(n, _NEG, np.int64)
        self.X = np.full(n, _NEG, np.int64)
        self.pending = np.zeros(n, bool)
        self.dep, self.delta = deps["dep"].to_numpy(), deps["delta"].to_numpy()
        act = deps["act"].to_numpy()  # sorted by act
        self.pending[act] = True
        self.lo = np.searchsorted(act, np.arange(n), side="left")
        self.hi = np.searchsorted(act, np.arange(n), side="right")
        self.waiting = np.unique(act)

    def resolve(self, w: int) -> None:
        """Fix activity ``w``'s wait bound from the ends of what it awaits."""
        if not self.pending[w]:
            return
        self.pending[w] = False
        x = max(self.end(int(self.dep[i])) + int(self.delta[i]) for i in range(self.lo[w], self.hi[w]))
        self.X[w] = x + self.d[w] - self.C[w]

    def resolve_all(self) -> None:
        for w in self.waiting:
            self.resolve(int(w))

    def end(self, k: int) -> int:
        """Activity ``k``'s end with the waits known so far."""
        s = self.skey[k]
        lo = self.ptr[s]
        if k >= lo:
            for i in np.flatnonzero(self.pending[lo:k + 1]):  # not resolved in launch order (rare)
                self.resolve(int(lo + i))
            vals = np.maximum(self.U[lo:k + 1] + self.W[self.act_seg[lo:k + 1]], self.X[lo:k + 1])
            prev = self.PM[lo - 1] if lo > self.start[s] else _NEG
            self.PM[lo:k + 1] = np.maximum.accumulate(np.maximum(vals, prev))
            self.ptr[s] = max(self.ptr[s], k + 1)
        return int(self.C[k] + self.PM[k])


def _sync_pass(g: Graph, o, gseg, sync_piece, W, streams: _Streams, a: pl.DataFrame) -> None:
    """Fix every thread's waiting ``W``: the syncs in time order, each extending the running maxima of
    the streams it waits on only over activities not yet seen; the cross-stream waits launched
    before each sync are resolved first (in launch order)."""
    waiting = streams.waiting
    w_key = a["call_ts"].fill_null(a["ts"]).to_numpy()[waiting] if len(waiting) else np.zeros(0, np.int64)
    order = np.argsort(w_key, kind="stable")
    waiting, w_key = waiting[order], w_key[order]
    streams.waiting = waiting
    if g.syncs.height == 0:
        return
    aw = g.awaits.group_by("sync", maintain_order=True).agg("act")
    awaited = dict(zip(aw["sync"].to_list(), aw["act"].to_list()))
    late = g.syncs["late"].to_numpy()
    point = g.syncs["point"].fill_null(-1).to_numpy()
    s_key = g.syncs["key"].to_numpy()
    done = 0
    for j, piece in enumerate(sync_piece):
        upto = int(np.searchsorted(w_key, s_key[j], side="right"))
        for w in waiting[done:upto]:
            streams.resolve(int(w))
        done = max(done, upto)
        if point[j] >= 0:  # a wait on another thread: that thread's point is final (it resolved earlier)
            G = int(o[point[j]] + W[gseg[point[j]]])
        else:
            G = max((streams.end(k) for k in awaited.get(j, ())), default=_NEG)
        before = gseg[piece]
        W[before + 1] = max(W[before], G - int(late[j]) - int(o[piece])) if G > _NEG else W[before]


def _sync_times(g: Graph, pieces: pl.DataFrame, acts: pl.DataFrame) -> pl.DataFrame:
    ends = g.awaits.join(acts.select(pl.col("row").alias("act"), "end"), on="act").sort(
        ["sync", "end", "act"]).group_by("sync").agg(pl.col("end").last().alias("G"), pl.col("act").last().alias("k"))
    ts = pieces["ts"]
    sy = g.syncs.with_columns(ts.gather(g.syncs["piece"]).alias("ts"), ts.gather(g.syncs["end_piece"]).alias("end"))
    sy = sy.join(ends, on="sync", how="left", maintain_order="left")
    host = sy["point"].is_not_null()
    if host.any():  # a wait on another thread: what it awaits is that thread's point
        p_ts = ts.gather(sy["point"].fill_null(0))
        sy = sy.with_columns(pl.when(host).then(p_ts).otherwise(pl.col("G")).alias("G"),
                             pl.when(host).then(pieces["thr"].gather(sy["point"].fill_null(0))).alias("point_thr"))
    else:
        sy = sy.with_columns(pl.lit(None, pl.Int64).alias("point_thr"))
    return sy.with_columns((pl.col("G").is_not_null() & (pl.col("G") - pl.col("late") > pl.col("ts"))).alias("waited"))


def _step_times(g: Graph, pieces: pl.DataFrame, acts: pl.DataFrame) -> pl.DataFrame:
    """Each step's host start, CPU end, last activity's end and its period (``wall``; the queueing
    ``latency`` beside it): :mod:`nongemm_trace.metrics.period`, on this timeline's times."""
    gpu = acts.filter(pl.col("step").is_not_null()).group_by("step").agg(pl.col("end").max().alias("gpu_end"))
    # pieces are numbered by position (``row`` = index): the steps' first and last pieces' starts gathered, not
    # joined on every piece (each replay)
    st = g.steps.select("step", "name", "thr", "first", "last")
    st = st.with_columns(pieces["ts"].gather(st["first"]).alias("ts"), pieces["ts"].gather(st["last"]).alias("cpu_end"))
    return step_periods(st.join(gpu, on="step", how="left"), acts)


def measured_timeline(g: Graph) -> Timeline:
    """The measured times as a timeline (the replay with every factor 1 gives the same: tested)."""
    p, a = g.pieces, g.acts
    thr = p["thr"].to_numpy()
    starts = np.r_[True, thr[1:] != thr[:-1]] if len(thr) else np.zeros(0, bool)
    launched = a["lp"].is_not_null().to_numpy()
    lat = a["lat"].to_numpy(allow_copy=True).astype(np.float64)
    lat_v = np.where(launched, np.nan_to_num(lat, nan=0.0), 0).astype(np.int64)
    ts = p["ts"].to_numpy()
    lp = a["lp"].fill_null(0).to_numpy()
    launch_t = np.where(launched, ts[lp] if len(ts) else 0, a["ts"].to_numpy())
    dur = a["dur"].to_numpy()
    # the pieces' measured ends are what the starts make of them (they tile each thread): kept, not made anew
    return _assemble(g, dur, a["end"].to_numpy(), launch_t, lat_v, a["gap"].to_numpy(), launched, ts, starts,
                     _unlaunched_ready(g, dur), p["end"].to_numpy())


def measured_piece_lengths(g: Graph) -> np.ndarray:
    """Each host piece's measured length; a sync's piece: its return cost (its wait is the replay's)."""
    p = g.pieces
    length = np.subtract(p["end"].to_numpy(), p["ts"].to_numpy())  # one array: no Series, then its copy
    sy = g.syncs
    if sy.height:
        length[sy["piece"].to_numpy()] = sy["tail"].to_numpy()
    return length
