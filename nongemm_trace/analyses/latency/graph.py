"""The dependency graph of a trace, as tables: what the latency attribution and the what-if
replay read.

* **host pieces**: each CPU thread's timeline cut at every op and runtime-call boundary into
  elementary pieces, each labelled by what ran in it: a launch call (``launch``), a
  synchronizing call (``sync``), another runtime call (``call``), the innermost op's own time
  (``op``), a wrapper range's own time (``wrapper``), or nothing recorded (``gap``). The pieces
  of a thread tile it without holes, so their order is the thread's op/launch order and their
  lengths are its CPU gaps.
* **activities** in stream order (``skey``, ``pos``), each with its launch call's piece (the
  launch → activity edge, by correlation; one graph launch fans out to many) and the two
  numbers that say how it started: ``lat`` (launch call start → activity start when the stream
  was waiting for the launch) and ``gap`` (previous activity's end → its start when it was
  queued behind it). See :mod:`.replay` for how they reproduce the measured start exactly.
* **deps**: cross-stream dependencies (:mod:`.waits`): an activity that waited for one on another
  stream, recorded (a ``cuda_sync`` stream wait) or inferred (a communication kernel).
* **syncs**: each synchronizing call's piece and the activities it waited for
  (:mod:`.runtime` says which), and each wait of a thread on another (:mod:`.threads`: the
  awaited host piece, ``point``), in the order they resolve, with ``late`` (how far the awaited
  work ended after the call returned, clock skew: kept so the measured timeline is reproduced exactly).

Everything is columnar (sorts, ``join_asof``, one sweep for the pieces' labels); no loop
per event.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from ...core.frames import int_scalar, per_value
from ...load.graph_capture import capture_windows
from ...schema import empty
from .labels import capture_bound, host_category, label_pieces
from .pieces import host_pieces, thread_codes
from .runtime import EVENT_RECORDS, SYNC_KINDS
from .threads import with_thread_waits
from .waits import DEPS_SCHEMA, dependencies, recorded_sync_targets

#: a call name with a version suffix (nsys writes ``cudaStreamSynchronize_v3020``)
_VERSION_SUFFIX = r"_v\d{4,}$"


@dataclass
class Graph:
    """The tables of one trace's dependency graph (times in int64 ns, measured)."""

    # row, thr, ts, end, kind, bound, category, op_id, launch_id: dtypes in .pieces (a sync's piece: syncs)
    pieces: pl.DataFrame
    # row, skey, pos, activity_id, name, category, class, ts, end, dur, lp (launch piece row), lat, gap, step,
    # backlog (queued behind the previous activity, with no launch call)
    acts: pl.DataFrame
    # sync (row), piece, end_piece, thr, kind, launch_id, late, tail, point (awaited host piece), key
    syncs: pl.DataFrame
    awaits: pl.DataFrame   # sync, act (row in acts)
    steps: pl.DataFrame    # step, name, first (piece row of its start), last (piece row of its end), ts, end
    launch_latency_ns: int
    queue_gap_ns: int
    # cross-stream dependencies (:mod:`.waits`): act waits for dep's end + delta; recorded: a cuda_sync wait
    deps: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=DEPS_SCHEMA))


def _stream_order(acts: pl.DataFrame) -> pl.DataFrame:
    """Activities sorted by stream and start, with ``skey``, ``pos`` and the previous activity's end."""
    acts = acts.with_columns(pl.struct(pl.col("device").fill_null(-1), pl.col("stream").fill_null(-1))
                             .rank("dense").cast(pl.Int64).alias("skey"))
    acts = acts.sort(["skey", "ts", "end", "activity_id"]).with_row_index("row")
    return acts.with_columns(pl.col("row").cast(pl.Int64), pl.int_range(pl.len()).over("skey").alias("pos"),
                             pl.col("end").shift(1).over("skey").alias("prev_end"))


#: the queue gap between kernels that follow one another on a stream, when a trace has too few
#: clearly queued activities to measure it (H200: 0.9-1.4 us in eager captures: docs/latency.md)
DEFAULT_QUEUE_GAP_NS = 1000
#: how many clearly queued activities a trace needs for its own queue gap
_MIN_QUEUED = 5
#: an activity with no launch call this many queue gaps or less after the previous one on its stream
#: ended was queued behind it (the backlog of a loop whose host runs ahead: :func:`start_terms`)
BACKLOG_GAPS = 4


def start_terms(acts: pl.DataFrame) -> tuple[pl.DataFrame, int, int]:
    """``lat`` and ``gap`` per activity, and the trace's typical launch latency and queue gap.

    The typical launch latency ``L0`` is the median (start - launch call start) of the activities
    launched after their stream had drained; the typical queue gap ``g0`` the median (start -
    previous end) of those launched at least ``L0`` before their stream drained. An activity waited
    for its launch when, at those typical values, its launch would have come after the queue
    (``launch + L0 > previous end + g0``): then ``lat`` = its start minus the call's start and
    ``gap`` = min(``g0``, what there was). Otherwise it was queued: ``gap`` = its start minus the
    previous end, ``lat`` = min(``L0``, what there was). Either way ``max(launch + lat, previous end
    + gap)`` is its measured start. Activities with no launch call in the file (``lat`` null) keep
    their measured start, except the **backlog**: one that follows the previous activity on its
    stream within :data:`BACKLOG_GAPS` queue gaps was queued behind it (a loop whose host runs ahead
    has a step's kernels queued when the profiler's window opens, launched before it), so its start
    is the queue's (previous end + gap): when the device work gets faster, so does the backlog,
    instead of holding the first steps at the measured times."""
    launched = pl.col("launch_ts").is_not_null()
    since_launch = pl.col("ts") - pl.col("launch_ts")
    since_prev = pl.col("ts") - pl.col("prev_end")
    drained = launched & (pl.col("prev_end").is_null() | (pl.col("launch_ts") > pl.col("prev_end")))
    lat0 = int(acts.filter(drained).select(since_launch.clip(lower_bound=0).median()).item() or 0)
    queued = acts.filter(launched & (pl.col("prev_end") - pl.col("launch_ts") >= lat0))
    gap0 = int(queued.select(since_prev.clip(lower_bound=0).median()).item() or 0) \
        if queued.height >= _MIN_QUEUED else DEFAULT_QUEUE_GAP_NS
    bound = launched & (pl.col("prev_end").is_null() | (pl.col("launch_ts") + lat0 > pl.col("prev_end") + gap0))
    backlog = ~launched & pl.col("prev_end").is_not_null() & (since_prev <= BACKLOG_GAPS * max(gap0, 1))
    acts = acts.with_columns(bound.alias("launch_bound"), backlog.alias("backlog"))
    acts = acts.with_columns(
        pl.when(~launched).then(None).when(pl.col("launch_bound")).then(since_launch)
        .otherwise(pl.min_horizontal(pl.lit(lat0), since_launch)).alias("lat"),
        pl.when(pl.col("prev_end").is_null()).then(0).when(pl.col("launch_bound"))
        .then(pl.min_horizontal(pl.lit(gap0), since_prev)).otherwise(since_prev).alias("gap"),
    )
    return acts, lat0, gap0


def sync_table(pieces: pl.DataFrame, first: pl.DataFrame, calls: pl.DataFrame,
               acts: pl.DataFrame, targets: pl.DataFrame | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The synchronizing calls (one per call, at its first piece: ``first`` = ``launch_id, lp, thr``)
    and what each waited for; ``targets`` (:func:`.waits.recorded_sync_targets`): the stream (and
    event record) a call's ``cuda_sync`` record names, in place of the inferred one."""
    # once per distinct call name (text or categorical)
    kind = per_value(calls, "name", lambda e: e.str.replace(_VERSION_SUFFIX, "").replace_strict(
        SYNC_KINDS, default=None, return_dtype=pl.Utf8), pl.Utf8)
    is_record = per_value(calls, "name", lambda e: e.str.replace(_VERSION_SUFFIX, "").is_in(list(EVENT_RECORDS)),
                          pl.Boolean)
    kinds = calls.with_columns(kind.alias("kind"), is_record.alias("_record"))
    sy = kinds.filter(pl.col("kind").is_not_null()).select("launch_id", "kind", "ts_ns", "end_ns", "dur_ns")
    sy = sy.join(first.rename({"lp": "piece"}), on="launch_id").sort(["ts_ns", "thr"]).with_row_index("sync")
    sy = sy.with_columns(pl.col("sync").cast(pl.Int64))
    launched = acts.filter(pl.col("lp").is_not_null())
    t_key = pl.coalesce("launch_ts", "ts")
    # the stream each thread launched to last, at each sync (and at its last event record before it)
    by_thr = launched.select("thr", pl.col("launch_ts").alias("t"), pl.col("skey").alias("cur_skey")).sort("t")
    records = kinds.filter(pl.col("_record")).join(
        first.select("launch_id", "thr"), on="launch_id").select(
        "thr", pl.col("ts_ns").alias("t"), pl.col("ts_ns").alias("rec_t")).sort("t")
    q = sy.select("sync", "thr", "kind", "launch_id", pl.col("ts_ns").alias("t")).sort("t")
    q = q.join_asof(records, on="t", by="thr", strategy="backward", check_sortedness=False)
    q = q.with_columns(pl.when(pl.col("kind") == "event").then(pl.coalesce("rec_t", "t"))
                       .otherwise(pl.col("t")).alias("t"))
    q = q.sort("t").join_asof(by_thr, on="t", by="thr", strategy="backward", check_sortedness=False)
    if targets is not None and targets.height:
        named = pl.col("kind").is_in(["stream", "event"]) & pl.col("rec_skey").is_not_null()
        q = q.join(targets, on="launch_id", how="left").with_columns(
            pl.when(named).then(pl.col("rec_skey")).otherwise(pl.col("cur_skey")).alias("cur_skey"),
            pl.when(named & (pl.col("kind") == "event") & pl.col("rec_t").is_not_null()).then(pl.col("rec_t"))
            .otherwise(pl.col("t")).alias("t"))
    own = launched.select(pl.col("launch_id").alias("launch_id"), pl.col("row").alias("act"))
    copy = q.filter(pl.col("kind") == "copy").join(own, on="launch_id").select("sync", "act")
    streams = acts.select("skey").unique()
    dev = q.filter(pl.col("kind") == "device").select("sync", "t").join(streams, how="cross")
    one = q.filter(pl.col("kind").is_in(["stream", "event"]) |
                   ((pl.col("kind") == "copy") & ~pl.col("sync").is_in(copy["sync"].implode())))
    one = one.select("sync", "t", pl.col("cur_skey").alias("skey")).drop_nulls("skey")
    order = acts.select("skey", t_key.alias("t"), pl.col("row").alias("act")).sort("t")
    last = pl.concat([dev, one]).sort("t").join_asof(order, on="t", by="skey", strategy="backward",
                                                     check_sortedness=False)
    awaits = pl.concat([copy, last.select("sync", "act").drop_nulls("act")]).unique()
    awaits = pl.concat([awaits, _returned_after(sy, awaits, acts)]).unique().sort(["sync", "act"])
    done = awaits.join(acts.select(pl.col("row").alias("act"), "end"), on="act").group_by("sync").agg(
        pl.col("end").max().alias("awaited_end"))
    sy = sy.join(done, on="sync", how="left")
    waited = pl.col("awaited_end").is_not_null() & (pl.col("awaited_end") > pl.col("ts_ns"))
    sy = sy.with_columns(
        pl.when(waited).then((pl.col("awaited_end") - pl.col("end_ns")).clip(lower_bound=0)).otherwise(0).alias("late"),
        pl.when(waited).then((pl.col("end_ns") - pl.col("awaited_end")).clip(0, pl.col("dur_ns")))
        .otherwise(pl.col("dur_ns")).alias("tail"),
    )
    ends = pieces.filter(pl.col("ts").is_in(sy["end_ns"].implode())).join(
        sy.select("thr", pl.col("end_ns").alias("ts")), on=["thr", "ts"], how="semi").select(
        "thr", pl.col("ts").alias("end_ns"), pl.col("row").alias("end_piece"))
    sy = sy.join(ends, on=["thr", "end_ns"], how="left")
    return sy.select("sync", "piece", "end_piece", "thr", "kind", "launch_id", "late", "tail").sort("sync"), awaits


def _returned_after(sy: pl.DataFrame, awaits: pl.DataFrame, acts: pl.DataFrame) -> pl.DataFrame:
    """``sync, act`` for the synchronizing calls whose identified work had ended before they began (an
    event recorded on another thread's stream, a stream the trace does not name): the activity that
    ended last while the call ran, when one did, is what it waited for."""
    ends = awaits.join(acts.select(pl.col("row").alias("act"), "end"), on="act").group_by("sync").agg(
        pl.col("end").max().alias("e"))
    unexplained = sy.join(ends, on="sync", how="left").filter(pl.col("e").is_null() | (pl.col("e") <= pl.col("ts_ns")))
    if unexplained.height == 0:
        return awaits.head(0)
    by_end = acts.select(pl.col("row").alias("act"), pl.col("end").alias("t"), pl.col("end").alias("act_end")).sort("t")
    hit = unexplained.select("sync", "ts_ns", pl.col("end_ns").alias("t")).sort("t").join_asof(
        by_end, on="t", strategy="backward")
    return hit.filter(pl.col("act").is_not_null() & (pl.col("act_end") > pl.col("ts_ns"))).select(
        "sync", pl.col("act").cast(awaits.schema["act"]))


def build(ops: pl.DataFrame, calls: pl.DataFrame, activities: pl.DataFrame, step_ranges: pl.DataFrame,
          generic: list[str], level: str, cuda_syncs: pl.DataFrame | None = None) -> Graph:
    """The graph of a linked, classified trace: ``ops`` (linked, with the classify stage's op
    columns), ``calls`` (every runtime/driver call), ``activities`` (classified at ``level``),
    ``step_ranges`` (``step, name, pid, tid, ts, end``), ``cuda_syncs`` (the trace's CUDA sync
    records, if any)."""
    if cuda_syncs is None:
        cuda_syncs = empty("cuda_syncs")
    # the ops' own categories first, while no table of every piece is alive: the fold's columns over every op
    # are the largest of its temporaries (made after the pieces, they were the build's peak)
    op_cats = host_category(ops, generic, level)
    # the columns the pieces are cut from, filtered only where some have no length (a filter copies every
    # column it is given, kept or not)
    when = ("pid", "tid", "ts_ns", "dur_ns", "end_ns")
    real_ops, real_calls = (t.select(i, *when) for t, i in ((ops, "op_id"), (calls, "launch_id")))
    real_ops, real_calls = (t if t.height == 0 or int_scalar(t["dur_ns"].min()) > 0 else t.filter(pl.col("dur_ns") > 0)
                            for t in (real_ops, real_calls))
    threads, op_thr, call_thr = thread_codes(real_ops, real_calls)
    pieces = host_pieces(real_ops, real_calls, op_thr, call_thr)
    del real_ops, real_calls, op_thr, call_thr
    # a call's first piece: where its id starts (only those rows are grouped: most pieces are not calls)
    starts_call = pl.col("launch_id").is_not_null() & pl.col("launch_id").ne_missing(pl.col("launch_id").shift(1))
    first_piece = pieces.filter(starts_call).group_by("launch_id").agg(pl.col("row").min().alias("lp"),
                                                                       pl.col("thr").first())
    # the classify stage's columns as text: the graph's tables meet text from its host pieces
    text = [pl.col(c).cast(pl.String) for c in ("category", "class", "launch_op", "top_op")]
    acts = activities.select(
        "activity_id", "name", text[0], text[1], pl.col("ts_ns").alias("ts"),
        (pl.col("ts_ns") + pl.col("dur_ns")).alias("end"), pl.col("dur_ns").alias("dur"), "device", "stream",
        "launch_id", pl.col("launch_ts_ns").alias("launch_ts"), *text[2:])
    acts = acts.join(first_piece, on="launch_id", how="left")
    # a launch call of no length has no piece: its activities start as measured (no launch edge), but still
    # belong to the step their call started in
    acts = acts.with_columns(pl.col("launch_ts").alias("call_ts"),
                             pl.when(pl.col("lp").is_null()).then(None).otherwise(pl.col("launch_ts")).alias("launch_ts"))
    acts, lat0, gap0 = start_terms(_stream_order(acts))
    acts = acts.join(_after_communication(acts, gap0), on="row", how="left").with_columns(
        pl.col("after_comm").fill_null(False))
    deps = dependencies(acts, cuda_syncs, calls, gap0, max(4 * gap0, COMM_WAIT_NS), lat0)
    # a wait that held the activity replaces the measured gap and launch latency: both are the usual ones
    held = pl.col("row").is_in(deps.filter(pl.col("holds"))["act"].unique().implode())
    acts = acts.with_columns(pl.when(held).then(pl.min_horizontal("gap", pl.lit(gap0))).otherwise(pl.col("gap"))
                             .alias("gap"), pl.when(held & pl.col("lat").is_not_null())
                             .then(pl.min_horizontal("lat", pl.lit(lat0))).otherwise(pl.col("lat")).alias("lat")
                             ).drop("dep", "dep_delta")
    acts = acts.join(_step_of(acts, step_ranges), on="row", how="left").sort("row")
    syncs, awaits = sync_table(pieces, first_piece, calls, acts, recorded_sync_targets(cuda_syncs, calls, acts))
    launch_cats = acts.filter(pl.col("launch_id").is_not_null()).group_by(["launch_id", "category"]).agg(
        pl.col("dur").sum()).sort(["dur", "category"], descending=[True, False]).unique(
        "launch_id", keep="first").select("launch_id", pl.col("category").alias("launch_category"))
    pieces = label_pieces(pieces, op_cats, launch_cats, syncs)
    del op_cats
    pieces, syncs, awaits = with_thread_waits(pieces, syncs, awaits, threads)
    pieces = capture_bound(pieces, capture_windows(calls), threads)
    # the pieces at the steps' bounds: those few picked by time first (a join of millions of rows costs seconds)
    at = pieces.select("thr", "ts", "row").filter(pl.col("ts").is_in(pl.concat([step_ranges["ts"], step_ranges["end"]])
                                                                    .implode()))
    steps = step_ranges.with_columns(pl.col(c).cast(threads.schema[c]) for c in ("pid", "tid")).join(
        threads, on=["pid", "tid"]).join(
        at.select("thr", "ts", pl.col("row").alias("first")), on=["thr", "ts"]).join(
        at.select("thr", pl.col("ts").alias("end"), pl.col("row").alias("last")), on=["thr", "end"]).sort("step")
    return Graph(pieces, acts, syncs, awaits, steps, lat0, gap0, deps)


#: an activity that starts this soon (or 4 typical queue gaps, if longer) after a communication kernel
#: on its device ended is taken to have waited for it
COMM_WAIT_NS = 5_000


def _after_communication(acts: pl.DataFrame, gap0: int) -> pl.DataFrame:
    """``row, after_comm, dep, dep_delta``: the activity started right after a communication kernel on
    its device ended (a cross-stream wait the trace does not record: its wait on the path is
    ``communication``). When it was queued and waited longer than the typical queue gap, on a stream
    that runs no communication itself, that kernel is its dependency (``dep``, the act row; its start
    minus that end: ``dep_delta``), which the replay keeps in place of the measured gap."""
    comm = acts.filter(pl.col("category") == "communication")
    if comm.height == 0:
        return acts.select("row", pl.lit(False).alias("after_comm"), pl.lit(None, pl.Int64).alias("dep"),
                           pl.lit(None, pl.Int64).alias("dep_delta"))
    right = comm.select("device", pl.col("end").alias("t"), pl.col("end").alias("comm_end"),
                        pl.col("row").alias("comm_row"), pl.col("skey").alias("comm_skey")).sort("t")
    q = acts.select("row", "device", "skey", pl.col("ts").alias("t"), pl.col("ts").alias("start"), "launch_bound",
                    "gap").sort("t")
    hit = q.join_asof(right, on="t", by="device", strategy="backward", check_sortedness=False)
    tol = max(4 * gap0, COMM_WAIT_NS)
    after = pl.col("comm_end").is_not_null() & (pl.col("start") - pl.col("comm_end") <= tol)
    comm_streams = comm["skey"].unique().implode()
    is_dep = (after & ~pl.col("launch_bound") & (pl.col("gap") > gap0) & (pl.col("skey") != pl.col("comm_skey"))
              & ~pl.col("skey").is_in(comm_streams))
    return hit.select("row", after.alias("after_comm"), pl.when(is_dep).then(pl.col("comm_row")).alias("dep"),
                      pl.when(is_dep).then(pl.col("start") - pl.col("comm_end")).alias("dep_delta"))


def _step_of(acts: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """``row, step``: the step whose CPU range contains the activity's launch call's start."""
    if steps.height == 0:
        return acts.select("row", pl.lit(None, pl.Int64).alias("step"))
    left = acts.filter(pl.col("call_ts").is_not_null()).select("row", pl.col("call_ts").alias("t")).sort("t")
    right = steps.select("step", pl.col("ts").alias("t"), pl.col("end").alias("s_end")).sort("t")
    hit = left.join_asof(right, on="t", strategy="backward")
    return hit.select("row", pl.when(pl.col("t") <= pl.col("s_end")).then(pl.col("step")).alias("step"))


def graph_launch_ids(launches: pl.DataFrame) -> pl.Series:
    """The launch ids of the trace's graph launches (``cudaGraphLaunch``, ``hipGraphLaunch``)."""
    if "graph_launch" not in launches.columns:
        return pl.Series("launch_id", [], dtype=launches.schema.get("launch_id", pl.Int64))
    return launches.filter(pl.col("graph_launch"))["launch_id"]


def graph_replayed(g: Graph, launches: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Which activities a graph launch ran, and which of them is a replay's first on its stream and
    was queued behind earlier work (its gap is the queue's)."""
    n = g.acts.height
    ids = graph_launch_ids(launches)
    if ids.len() == 0 or n == 0:
        return np.zeros(n, bool), np.zeros(n, bool)
    ids = ids.implode()
    a = g.acts.select("row", "skey", "launch_id", "launch_bound", "prev_end").with_columns(
        pl.col("launch_id").is_in(ids).fill_null(False).alias("replayed"))
    first = a.filter(pl.col("replayed")).group_by("launch_id", "skey").agg(pl.col("row").min())["row"]
    is_first = np.zeros(n, bool)
    is_first[first.to_numpy()] = True
    queued = (~a["launch_bound"].fill_null(True) & a["prev_end"].is_not_null()).to_numpy()
    return a["replayed"].to_numpy(), is_first & queued
