"""Waits between CPU threads: one thread idle while another of its process does the work.

A training step's main thread calls ``loss.backward()``, and autograd's engine runs the
backward pass on its own thread while the caller blocks; torch.profiler records nothing on
the caller meanwhile (no op, no runtime call: one long ``gap`` piece), and the backward
ops, their launches and the optimizer's resumption show the hand-offs. Such a wait is read
from the timeline: a host piece on thread A with no op or call of its own (``gap``, or a
wrapper range's own time), at least :data:`MIN_WAIT_NS` long, inside which another thread B
of the same process

* was idle when the piece began (its last busy piece before ended by then),
* starts work after the piece began and is idle again when it ends (its last busy piece
  inside ends by then), and
* starts within an eighth of the piece after it began, and ends within an eighth before it
  ends (the hand-offs: a thread that idles long before or after the other's work, such as a
  worker sleeping between steps, did not wait for it).

Two dependencies follow, both expressed as host *waits* (rows of the sync table with an
awaited host point instead of awaited activities, so the replay and the path treat them
like synchronizing calls):

* the **fork**: B's idle piece before its work waits for A's piece's start (B was woken by
  A; its return cost is the measured wake-up delay);
* the **join**: A's piece waits for B's end (A resumes the measured delay after B's last
  busy piece ends).

So the critical path follows the wait onto B and back, and ``whatif`` shortens A's wait
when B's work (its ops, launches, or the GPU work B synchronizes on) shrinks. Columnar: one
``join_asof`` per condition over the candidate pieces and their process's other threads.
"""

from __future__ import annotations

import polars as pl

from .pieces import locate

#: the shortest host piece read as a wait on another thread (shorter idle pieces are Python
#: between ops; a hand-off to autograd's thread and back costs tens of microseconds alone)
MIN_WAIT_NS = 200_000

#: each hand-off (A's idle start to B's first work, B's last work to A's resumption) is at most this
#: fraction's inverse of the wait: a thread idle long before or after the other's work (a worker
#: that sleeps between steps) did not wait for it
HANDOFF_SHARE = 8

_SCHEMA = pl.Schema({"piece": pl.Int64, "point": pl.Int64, "thr": pl.Int64, "key": pl.Int64})


def thread_waits(pieces: pl.DataFrame, threads: pl.DataFrame) -> pl.DataFrame:
    """``piece, point, thr, key``: each host wait (the waiting piece, the host piece whose start it
    waits for, the waiting thread, and the time the wait is resolved at, for ordering with the
    synchronizing calls). ``pieces``: labelled (``row, thr, ts, end, kind``); ``threads``:
    ``pid, tid, thr``."""
    p = pieces.select("row", "thr", "ts", "end", "kind")  # filters copy every column: only those read here
    cand = p.filter(pl.col("kind").is_in(["gap", "wrapper"]) & (pl.col("end") - pl.col("ts") >= MIN_WAIT_NS)).join(
        threads.select("thr", "pid"), on="thr", how="left")
    if cand.height == 0:
        return pl.DataFrame(schema=_SCHEMA)
    busy = p.filter((pl.col("kind") != "gap") & (pl.col("end") > pl.col("ts"))).select(
        pl.col("thr").alias("b"), "row", "ts", "end")
    pairs = cand.select(pl.col("row").alias("a_row"), pl.col("thr").alias("a"), "pid", "ts", "end").join(
        threads.select("pid", pl.col("thr").alias("b")), on="pid").filter(pl.col("a") != pl.col("b"))
    if pairs.height == 0:
        return pl.DataFrame(schema=_SCHEMA)
    # B's busy piece around the wait's start (must have ended), its first one after, its last one before the
    # end (the busy pieces are in (thread, time) order: rows are numbered along each thread)
    b = pairs["b"]
    at, after, inside = locate(busy["b"], busy["ts"], [(b, pairs["ts"], "right", -1), (b, pairs["ts"], "right", 0),
                                                       (b, pairs["end"], "left", -1)])
    w = pairs.with_columns(busy["end"].gather(at).alias("prev_end"), busy["row"].gather(after).alias("first_row"),
                           busy["ts"].gather(after).alias("b_start"), busy["row"].gather(inside).alias("last_row"),
                           busy["end"].gather(inside).alias("b_end"))
    w = w.filter((pl.col("prev_end").is_null() | (pl.col("prev_end") <= pl.col("ts")))
                 & (pl.col("b_start") < pl.col("end")) & (pl.col("b_end") <= pl.col("end"))
                 & (pl.col("last_row") >= pl.col("first_row"))
                 & (HANDOFF_SHARE * (pl.col("b_start") - pl.col("ts")) <= pl.col("end") - pl.col("ts"))
                 & (HANDOFF_SHARE * (pl.col("end") - pl.col("b_end")) <= pl.col("end") - pl.col("ts")))
    w = w.sort(["a_row", "b_end", "b"]).unique("a_row", keep="last")
    if w.height == 0:
        return pl.DataFrame(schema=_SCHEMA)
    # the join: A's piece waits for the piece after B's last busy one (it starts at B's end)
    join = w.select(pl.col("a_row").alias("piece"), (pl.col("last_row") + 1).alias("point"),
                    pl.col("a").alias("thr"), pl.col("b_end").alias("key"))
    # the fork: B's idle piece before its work waits for A's piece's start (when B had one)
    fork = w.select(pl.col("first_row") - 1, pl.col("a_row"), "b", "ts").rename(
        {"first_row": "piece", "a_row": "point", "b": "thr", "ts": "key"})
    # pieces are numbered by position (``row`` = index): B's piece gathered, not joined on every piece
    fork = fork.filter(pl.col("piece") >= 0)
    at_fork = fork["piece"]
    fork = fork.filter((p["thr"].gather(at_fork) == fork["thr"]) & (p["kind"].gather(at_fork) == "gap")).select(
        list(_SCHEMA))
    return pl.concat([join.select(list(_SCHEMA)).cast(_SCHEMA), fork.cast(_SCHEMA)])


def with_thread_waits(pieces: pl.DataFrame, syncs: pl.DataFrame, awaits: pl.DataFrame,
                      threads: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """``pieces, syncs, awaits`` with the host waits added as sync rows (``kind`` ``thread``, ``point``
    the awaited host piece; the synchronizing calls' ``point`` is null), all renumbered in the order
    they resolve (a call at its start, a wait when what it waits for happens), which is the order
    the replay fixes them in. The waiting pieces' ``kind`` becomes ``wait``."""
    ts = pieces["ts"]
    dev = syncs.with_columns(pl.lit(None, pl.Int64).alias("point"), ts.gather(syncs["piece"]).alias("key"))
    waits = thread_waits(pieces, threads).unique("piece", keep="first").join(
        syncs.select("piece"), on="piece", how="anti")
    if waits.height:
        # pieces are numbered by position (``row`` = index): their times gathered, not joined on every piece
        w = waits.with_columns(ts.gather(waits["piece"]).alias("ts"), pieces["end"].gather(waits["piece"]).alias("end"),
                               ts.gather(waits["point"]).alias("p_ts"))
        w = w.select(pl.lit(None, pl.Int64).alias("sync"), "piece", (pl.col("piece") + 1).alias("end_piece"), "thr",
                     pl.lit("thread").alias("kind"), pl.lit(None, syncs.schema["launch_id"]).alias("launch_id"),
                     (pl.col("p_ts") - pl.col("end")).clip(lower_bound=0).alias("late"),
                     (pl.col("end") - pl.col("p_ts")).clip(0, pl.col("end") - pl.col("ts")).alias("tail"),
                     "point", "key")
        dev = pl.concat([dev, w.cast(dev.schema)])
    new = dev.with_columns(pl.col("sync").alias("old")).sort(["key", "thr", "old"], nulls_last=True).drop(
        "sync").with_row_index("sync").with_columns(pl.col("sync").cast(pl.Int64))
    remap = new.filter(pl.col("old").is_not_null()).select(pl.col("old").alias("sync"), pl.col("sync").alias("new"))
    awaits = awaits.join(remap, on="sync").select(pl.col("new").alias("sync"), "act").sort(["sync", "act"])
    # pieces are numbered by position (``row`` = index): the marks are written to their rows. A piece's sync
    # row is no column of theirs: the syncs' ``piece`` says it, and no reader asks a piece for its sync
    waiting = new.filter(pl.col("kind") == "thread")["piece"]
    if waiting.len():
        pieces = pieces.with_columns(pieces["kind"].scatter(waiting, "wait"))
    return pieces, new.drop("old"), awaits
