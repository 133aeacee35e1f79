"""Cross-stream dependencies: what an activity waits for on another stream, as a table.

Two sources, one table (``deps``: ``act, dep, delta, recorded``: the waiting activity's row,
the awaited activity's row, the delay from the awaited end to the waiting start that the
replay keeps, and whether the trace recorded the wait):

* **Recorded waits** (Kineto ``cuda_sync`` events of kind ``Stream Wait Event``, written with
  ``_ExperimentalConfig(enable_cuda_sync_events=True)``). Such a record names the
  ``cudaStreamWaitEvent`` call (``correlation``), the waiting ``stream``, the stream the event
  was recorded on (``wait_on_stream``) and the ``cudaEventRecord`` call that recorded it
  (``wait_on_cuda_event_record_corr_id``). The event completes when the work queued on
  ``wait_on_stream`` before the record call has run: the awaited activity is the last one on
  that stream whose launch call started before the record call. The waiting activity is the
  first one on ``stream`` whose launch call started at or after the wait call (the stream runs
  in launch order, so the ones after it follow it). Several waits on one activity are all kept.
* **Waits on a communication kernel** that the trace does not record
  (:func:`.graph._after_communication`).
* **Hand-offs between streams** that the trace does not record (:func:`stream_handoffs`): a queued
  activity that started long after the previous one on its stream ended, within a few queue gaps of
  an activity's end on another stream of its device, waited for that one (cuDNN's FFT convolutions
  run on a stream of their own, fed and read by the main stream through event waits that a trace
  without ``cuda_sync`` events does not show). The measured gap would keep the wait's length fixed
  in a what-if (ResNet-50 b32 fp32 -> TF32: an 11 ms gap on the FFT stream held each step's end);
  the dependency moves it with the awaited work.

A recorded wait *held* its activity when the activity was queued (not waiting for its launch),
started later than the typical queue gap ``g0`` after the previous activity on its stream, and
the awaited activity ended after that previous one: then ``delta`` is the measured delay and the
measured gap gives way to the usual one (the wait, not the queue, set the start). Otherwise the
wait did not bind, and ``delta`` is the measured delay capped at ``g0`` (the hand-off a binding
wait would cost), so that a what-if in which the awaited work runs later still delays it. A wait
whose awaited activity ended after the waiting one started (clock skew, or an identification the
timeline contradicts) is dropped.

Synchronizing calls (:mod:`.runtime`) take their stream from the records too: ``Stream Sync``
names the stream a ``cudaStreamSynchronize`` waited for, ``Event Sync`` the stream and the
record call of the event a ``cudaEventSynchronize`` waited for (:func:`recorded_sync_targets`).
"""

from __future__ import annotations

import polars as pl

from ...schema import DType

#: ``cuda_sync_kind`` of a stream waiting for an event (cudaStreamWaitEvent)
WAIT_EVENT = "Stream Wait Event"
#: ``cuda_sync_kind`` of a host call waiting for a stream / an event
STREAM_SYNC, EVENT_SYNC = "Stream Sync", "Event Sync"

DEPS_SCHEMA = pl.Schema({"act": pl.Int64, "dep": pl.Int64, "delta": pl.Int64, "recorded": pl.Boolean,
                         "holds": pl.Boolean})


def _stream_keys(acts: pl.DataFrame) -> pl.DataFrame:
    """``device, stream, skey`` of every stream with activities (nulls as -1, as :func:`.graph._stream_order`)."""
    return acts.select(pl.col("device").fill_null(-1), pl.col("stream").fill_null(-1), "skey").unique()


def _call_times(calls: pl.DataFrame) -> pl.DataFrame:
    """``correlation, t``: each runtime call's start by its correlation (the first call of one)."""
    return calls.filter(pl.col("correlation").is_not_null()).sort("ts_ns").unique(
        "correlation", keep="first").select("correlation", pl.col("ts_ns").alias("t"))


def _on_stream(records: pl.DataFrame, keys: pl.DataFrame, stream: str) -> pl.DataFrame:
    return records.join(keys.rename({"stream": stream, "skey": f"{stream}_skey"}), on=["device", stream])


def recorded_waits(acts: pl.DataFrame, cuda_syncs: pl.DataFrame, calls: pl.DataFrame, gap0: int) -> pl.DataFrame:
    """The recorded cross-stream waits as ``deps`` rows (``acts``: in stream order, with ``row, skey,
    call_ts, ts, end, prev_end, gap, launch_bound``)."""
    w = cuda_syncs.filter((pl.col("kind") == WAIT_EVENT) & (pl.col("wait_on_stream") >= 0)
                          & (pl.col("wait_on_stream") != pl.col("stream"))
                          & pl.col("wait_on_cuda_event_record_corr_id").is_not_null())
    if w.height == 0 or acts.height == 0:
        return pl.DataFrame(schema=DEPS_SCHEMA)
    times = _call_times(calls)
    w = w.select(pl.col("device").fill_null(-1), "stream", "wait_on_stream", "correlation",
                 "wait_on_cuda_event_record_corr_id")
    w = w.join(times.rename({"t": "t_wait"}), on="correlation").join(
        times.rename({"correlation": "wait_on_cuda_event_record_corr_id", "t": "t_rec"}),
        on="wait_on_cuda_event_record_corr_id")
    keys = _stream_keys(acts)
    w = _on_stream(_on_stream(w, keys, "stream"), keys, "wait_on_stream")
    launched = (acts.filter(pl.col("call_ts").is_not_null())
                .select("skey", pl.col("call_ts").alias("t"), "row").sort("t"))
    waiting = w.select("stream_skey", "wait_on_stream_skey", "t_rec", pl.col("t_wait").alias("t")).sort("t").join_asof(
        launched.rename({"skey": "stream_skey", "row": "act"}), on="t", by="stream_skey", strategy="forward",
        check_sortedness=False)
    awaited = waiting.drop_nulls("act").select("act", "wait_on_stream_skey", pl.col("t_rec").alias("t")).sort(
        "t").join_asof(launched.rename({"skey": "wait_on_stream_skey", "row": "dep"}), on="t", by="wait_on_stream_skey",
                       strategy="backward", allow_exact_matches=False, check_sortedness=False).drop_nulls("dep")
    a = acts.select("row", "ts", "end", "prev_end", "gap", "launch_bound")
    pairs = awaited.select("act", "dep").unique().join(a.rename({"row": "act"}), on="act").join(
        a.select(pl.col("row").alias("dep"), pl.col("end").alias("dep_end")), on="dep")
    delay = pl.col("ts") - pl.col("dep_end")
    holds = (~pl.col("launch_bound").fill_null(True) & (pl.col("gap") > gap0)
             & (pl.col("dep_end") > pl.col("prev_end").fill_null(pl.col("dep_end"))))
    return pairs.filter(delay >= 0).select(
        "act", "dep", pl.when(holds).then(delay).otherwise(pl.min_horizontal(delay, pl.lit(gap0))).alias("delta"),
        pl.lit(True).alias("recorded"), holds.alias("holds")).cast(DEPS_SCHEMA).sort(["act", "dep"])


def dependencies(acts: pl.DataFrame, cuda_syncs: pl.DataFrame, calls: pl.DataFrame, gap0: int,
                 tol: int, lat0: int) -> pl.DataFrame:
    """Every cross-stream dependency (``deps``): the recorded waits, the waits on communication
    kernels (``acts``' ``dep`` / ``dep_delta``) and the other streams' hand-offs (``tol``: how close to
    the awaited end a wait's start lies; ``lat0``: the typical launch latency)."""
    comm = acts.filter(pl.col("dep").is_not_null()).select(
        pl.col("row").alias("act"), "dep", pl.col("dep_delta").alias("delta"), pl.lit(False).alias("recorded"),
        pl.lit(True).alias("holds")).cast(DEPS_SCHEMA)
    recorded = recorded_waits(acts, cuda_syncs, calls, gap0)
    known = pl.concat([recorded["act"], comm["act"]]).implode()
    handoffs = stream_handoffs(acts.filter(~pl.col("row").is_in(known)), acts, gap0, tol, lat0)
    return pl.concat([recorded, comm, handoffs]).sort(["act", "dep"])


def stream_handoffs(waiting: pl.DataFrame, acts: pl.DataFrame, gap0: int, tol: int, lat0: int) -> pl.DataFrame:
    """The unrecorded waits on another stream (module docstring): each launched activity of ``waiting``
    that started more than ``tol`` after its release (its launch's typical one, call + ``lat0``, and the
    previous end on its stream + ``gap0``) waited for something; the latest end on another stream of its
    device between that release and its start is taken for it (cuDNN's event hand-off adds 10-30 us
    after it), unless it was launched after the waiting one (an event wait follows what it awaits).
    ``delta`` is the measured delay, and it holds (the replay then takes the usual launch latency and
    queue gap for it: :func:`.graph.build`)."""
    release = pl.max_horizontal(pl.col("launch_ts") + lat0, (pl.col("prev_end") + gap0).fill_null(pl.col("launch_ts")))
    q = waiting.filter(pl.col("launch_ts").is_not_null() & (pl.col("ts") - release > tol))
    if q.height == 0 or acts["skey"].n_unique() < 2:
        return pl.DataFrame(schema=DEPS_SCHEMA)
    ends = acts.select("device", pl.col("end").alias("t"), pl.col("end").alias("dep_end"), pl.col("row").alias("dep"),
                       pl.col("skey").alias("dep_skey"), pl.col("call_ts").alias("dep_call")).sort("t")
    left = q.select("row", "device", "skey", pl.col("ts").alias("t"), pl.col("ts").alias("start"),
                    release.alias("release"), "call_ts").sort("t")
    # the latest end on any stream before the start is another stream's: the waiting stream's own previous
    # activity ended before the release
    hit = left.join_asof(ends, on="t", by="device", strategy="backward", check_sortedness=False)
    # an event wait follows the awaited work's launch: work launched after the waiting one cannot be awaited
    hit = hit.filter(pl.col("dep_end").is_not_null() & (pl.col("dep_skey") != pl.col("skey"))
                     & (pl.col("dep_end") > pl.col("release"))
                     & (pl.col("dep_call").is_null() | (pl.col("dep_call") < pl.col("call_ts"))))
    return hit.select(pl.col("row").alias("act"), "dep", (pl.col("start") - pl.col("dep_end")).alias("delta"),
                      pl.lit(False).alias("recorded"), pl.lit(True).alias("holds")).cast(DEPS_SCHEMA)


def recorded_sync_targets(cuda_syncs: pl.DataFrame, calls: pl.DataFrame, acts: pl.DataFrame) -> pl.DataFrame:
    """``launch_id, rec_skey, rec_t``: for each synchronizing call with a ``Stream Sync`` or ``Event
    Sync`` record, the stream it waited for and (event) the start of the record call of the awaited
    event, before which the awaited work was launched."""
    s = cuda_syncs.filter((pl.col("kind") == STREAM_SYNC) & (pl.col("stream") >= 0)).select(
        "device", "correlation", pl.col("stream").alias("on"), pl.lit(None, pl.Int64).alias("rec_corr"))
    e = cuda_syncs.filter((pl.col("kind") == EVENT_SYNC) & (pl.col("wait_on_stream") >= 0)
                          & pl.col("wait_on_cuda_event_record_corr_id").is_not_null()).select(
        "device", "correlation", pl.col("wait_on_stream").alias("on"),
        pl.col("wait_on_cuda_event_record_corr_id").alias("rec_corr"))
    both = pl.concat([s, e]).with_columns(pl.col("device").fill_null(-1))
    out_cols: dict[str, DType] = {"launch_id": calls.schema["launch_id"], "rec_skey": pl.Int64, "rec_t": pl.Int64}
    out_schema = pl.Schema(out_cols)
    if both.height == 0:
        return pl.DataFrame(schema=out_schema)
    keys = _stream_keys(acts).rename({"stream": "on", "skey": "rec_skey"})
    ids = calls.filter(pl.col("correlation").is_not_null()).sort("ts_ns").unique("correlation", keep="first").select(
        "correlation", "launch_id")
    both = both.join(keys, on=["device", "on"]).join(
        ids, on="correlation").join(_call_times(calls).rename({"correlation": "rec_corr", "t": "rec_t"}),
                                    on="rec_corr", how="left")
    bad_event = pl.col("rec_corr").is_not_null() & pl.col("rec_t").is_null()  # the record call is not in the file
    return both.filter(~bad_event).unique("launch_id", keep="first").select(list(out_schema)).cast(out_schema)
