"""The run without the profiler: the host time the profiler added, taken out of the replay.

A profiled run's host is slower than the user's: every op event, runtime call and launch runs the
profiler's callbacks (more with ``record_shapes``, much more with ``with_stack``), and a CUDA-graph
launch instruments every kernel of the graph before the first one starts. The **overhead model**
(data: ``devices/profiler_overhead.toml``, fitted by ``bench/fit_profiler_overhead.py`` on H200
captures with and without the profiler, docs/latency.md) gives, per profiler setting, the share of
each kind of host piece that remains without the profiler: an op's own time, a wrapper's, the time
between ops, a launch call, another runtime call, a graph launch. Measured on one host whose speed
drifts by up to 2x within seconds, the profiler's cost follows the host's speed (it is host work
too): a share of the host time fits every capture better than a fixed cost per event (docs/latency.md
gives both fits). An activity that waited for its launch call starts as much earlier as its call got
shorter. Waiting (a sync's wait, a thread's wait on another) is never scaled: the replay recomputes it.

**Which process**: torch.profiler leaves CUPTI attached to the process after its window (unless
``TEARDOWN_CUPTI=1``), so the run without the profiler is a process it never attached to, whose runtime
calls keep less of their time than the shares fitted on attached processes (:mod:`.overhead_model`);
``attached=True`` answers for the loop after its window instead, and :func:`attached_ratio` relates the two.

**Calibration**: when the unchanged run's step time without the profiler is known (the collectors'
``nongemm_unprofiled`` metadata, or ``--unprofiled-step-us``), the model's removed time is scaled by
the one factor ``k`` that makes the replayed step match it (the replay is monotone in ``k``), and the
answer is ``measured``; otherwise ``k`` = 1 and it is ``estimated`` from the trace alone.

**Anchoring**: a measured step is a fact, so the unchanged answer equals it. Where the host's
cost alone cannot reach it, the device durations are scaled by the one factor ``device_scale`` that
matches it where the device paces the loop (clock and contention differ between runs; the replay is
monotone in it too), and the host's time by ``host_scale`` where the step is longer than the
profiled one and the device does not explain it (the host was slower than in the trace's window: a
host's speed drifts more than a GPU's clocks do); what the bisections leave
(at most the search range's end) is an exact ``anchor`` factor on every step figure of the run
without the profiler, the what-if's prediction included. A change that only speeds work up then
never predicts a step slower than the measured one (:func:`.whatif.predict`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ...core.frames import number
from ...errors import OptionError
from ...models.latency import bound_of, bounds_per_step
from ...vocabulary import STEADY_STEP, steady_step
from .anchoring import HOST_SCALE_RANGE, anchor_on, bisect, device_bound, device_reaches
from .graph import Graph, graph_launch_ids, graph_replayed
from .overhead_model import (
    KIND_CODES,
    METADATA_KEY,
    PIECE_KINDS,
    OverheadModel,
    model_for,
    process_of,
    profiler_settings,
)
from .path import bound_times
from .pieces import KIND
from .replay import Timeline, measured_piece_lengths, replay

if TYPE_CHECKING:  # pragma: no cover
    from ...pipeline.context import Context

#: a measured step or issue time past this (us: about 11.6 days) is no measurement of a step
_MAX_STEP_US = 1e12
#: the calibration factor's search range
K_MAX = 4.0


def on_side_threads(g: Graph, cut: np.ndarray, model: OverheadModel) -> np.ndarray:
    """The profiler's time per piece (``cut``, changed in place) with the model's factor for the threads that
    do not run the steps (autograd's backward thread in training): their ops are the engine's per-node
    wrappers and the backward kernels' launches, whose recorded time holds a larger share of the profiler's
    own than the main thread's ops do (the fit in docs/latency.md)."""
    if model.side_thread == 1.0 or g.steps.height == 0:
        return cut
    main = g.steps["thr"].mode()[0]
    cut[g.pieces["thr"].to_numpy() != main] *= model.side_thread  # in place: ``cut`` has a slot per piece
    return cut


def piece_kinds(g: Graph, graph_ids: pl.Series) -> np.ndarray:
    """Each piece's kind for the model, as its index in :data:`KIND_CODES` (int8): the graph's kinds, a
    ``cudaGraphLaunch``'s pieces ``graph_launch``. Codes, not text: a numpy text array of a million
    pieces holds 48 bytes a piece (and its making a Python string each), and it lives through every
    replay of the calibration."""
    p = g.pieces.select("kind", "launch_id")
    graph = p["launch_id"].is_in(graph_ids.implode()).fill_null(False) & (p["kind"] == "launch")
    # the kinds are an enum (:data:`.pieces.KIND`): each of its values' code, gathered by the pieces' codes
    of_value = np.array([KIND_CODES.index(k) if k in KIND_CODES else KIND_CODES.index("unknown")
                         for k in KIND.categories], np.int8)
    code = of_value[p["kind"].cast(KIND).to_physical().to_numpy()]
    return np.where(graph.to_numpy(), np.int8(KIND_CODES.index("graph_launch")), code)


def removable(g: Graph, kinds: np.ndarray, lengths: np.ndarray, model: OverheadModel) -> np.ndarray:
    """The profiler's time in each piece (float ns): ``(1 - remains[kind]) x length``; 0 for syncs and waits.
    ``kinds``: :func:`piece_kinds`'s codes; ``lengths`` (float) is overwritten with the result (a slot per
    piece: no second array)."""
    share = np.zeros(len(KIND_CODES), np.float64)
    for kind, r in model.remains.items():
        if kind in KIND_CODES:
            share[KIND_CODES.index(kind)] = 1.0 - r
    lengths *= share[kinds]
    return lengths


@dataclass
class Unprofiled:
    """The run without the profiler, replayed: its timeline, where its answer comes from, and the
    factor ``k`` applied to the model's costs."""

    timeline: Timeline
    piece_len: np.ndarray       # the host pieces without the profiler's cost (int64 ns)
    act_dur: np.ndarray         # the activities' durations without the profiler (int64 ns)
    lat: np.ndarray             # the launch latencies without the profiler (ns)
    gap: np.ndarray             # the queue gaps without the profiler (int64 ns)
    source: str                 # "measured" (calibrated on a measured step) or "estimated" (the model alone)
    k: float
    model: OverheadModel
    settings: dict[str, bool]
    measured_step_us: float | None
    note: str | None = None     # why a measurement could not be matched, when it could not
    calibrated_on: str | None = None  # "host_issue" or "step": the measurement matched
    device_scale: float = 1.0   # the factor on the device durations that matched the measured step
    anchor: float = 1.0         # the exact residual factor on every step figure (measured / replayed)
    host_scale: float = 1.0     # the factor on the host's time without the profiler that matched the measured step

    def anchored(self, column: str) -> pl.Expr:
        """A step figure of a replay of this run (ns) as reported: the anchor applied. The replay's own
        timeline keeps its times (its critical path tiles them); only the figures are anchored."""
        return pl.col(column) if self.anchor == 1.0 else (pl.col(column) * self.anchor).round().cast(pl.Int64)


def unprofiled_summary(un: Unprofiled) -> dict[str, Any]:
    """What a report says of where its unprofiled figures come from."""
    return {"step_time": STEADY_STEP, "source": un.source, "process": un.model.process, "setting": un.model.setting,
            "calibration_k": round(un.k, 4),
            "device_scale": round(un.device_scale, 6), "host_scale": round(un.host_scale, 6),
            "anchor": round(un.anchor, 6),
            "measured_step_us": un.measured_step_us, "calibrated_on": un.calibrated_on, "note": un.note,
            "model": f"profiler_overhead.toml [{un.model.setting}], torch {un.model.torch}: {un.model.fit}"}


def _steady_us(tl: Timeline, steps: pl.Series) -> float:
    """The steady step (us) of replay ``tl`` over ``steps``: the figure the reports give."""
    return (steady_step(tl.steps.filter(pl.col("step").is_in(steps.implode()))["wall"]) or 0.0) / 1000.0


def attached_estimate(ctx: Context, g: Graph, kept_steps: pl.DataFrame) -> float | None:
    """The steady step (us) of the process the profiler stayed attached to, from the trace alone, for
    :func:`attached_ratio`; None where the collector measured it (``after_step_us``). Made before the run
    without the profiler is replayed, so that one replay's tables are alive at a time, not two."""
    if measured_side(ctx.trace().metadata, "attached") is not None:
        return None
    return _steady_us(without_profiler(ctx, g, kept_steps, calibrate=False, attached=True).timeline,
                      kept_steps["step"])


def attached_ratio(ctx: Context, g: Graph, kept_steps: pl.DataFrame, un: Unprofiled,
                   estimate_us: float | None = None) -> float | None:
    """How much longer the steady step is in a process the profiler stayed attached to after its window
    than in one it never attached to (the runtime calls keep CUPTI's callbacks: ``[never_profiled]`` in the
    model's data): the two processes' estimates from the trace alone, divided (``estimate_us``: the
    attached one's, :func:`attached_estimate`, else made here); where the collector timed the rounds after
    the window in the attached process (``after_step_us``), that measurement over the step reported for the
    never-profiled one. None where ``un`` is not of the never-profiled process (a model given by hand) or
    has no step."""
    if un.model.process != "never_profiled":
        return None
    steps = kept_steps["step"]
    after = measured_side(ctx.trace().metadata, "attached")
    if after is not None:
        reported = _steady_us(un.timeline, steps) * un.anchor
        return after / reported if reported > 0 else None
    never = (_steady_us(un.timeline, steps) if un.source == "estimated" and un.anchor == 1.0 else
             _steady_us(without_profiler(ctx, g, kept_steps, calibrate=False).timeline, steps))
    attached = estimate_us if estimate_us is not None else attached_estimate(ctx, g, kept_steps)
    return attached / never if attached is not None and never > 0 else None


def latency_unprofiled(un: Unprofiled, steps: pl.DataFrame, profiled_att: pl.DataFrame,
                       queue_gap_ns: int, attached: float | None = None) -> dict[str, Any]:
    """The latency report's ``unprofiled``: per kept step and in steady state (``step_us``, the median:
    :func:`~nongemm_trace.vocabulary.steady_step`), the step without the profiler, the profiler's share
    of the step (the profiled mean step minus that) and which side bounds it; ``attached_step_us``, the
    steady step of the same loop after its window in a process the profiler stayed attached to
    (``attached``: :func:`attached_ratio`)."""
    kept = steps["step"].implode()
    un.timeline.steps = un.timeline.steps.filter(pl.col("step").is_in(kept))
    att = bound_times(un.timeline, queue_gap_ns)  # only its bounds are read
    walls = steps.select("step", "wall").join(
        un.timeline.steps.select("step", un.anchored("wall").alias("un")), on="step")
    per_step = bounds_per_step(att)
    rows = [{"step": r["step"], "step_us": round(r["un"] / 1000, 3),
             "profiler_overhead_us": round((r["wall"] - r["un"]) / 1000, 3),
             "bound": per_step.get(r["step"])} for r in walls.iter_rows(named=True)]
    steady = steady_step(walls["un"]) or 0.0
    return unprofiled_summary(un) | {
        "step_us": round(steady / 1000, 3),
        "attached_step_us": None if attached is None else round(steady * attached / 1000, 3),
        "profiler_overhead_us": round((float(number(walls["wall"].mean()) or 0.0) - steady) / 1000, 3),
        "bound": bound_of(att), "profiled_bound": bound_of(profiled_att), "steps": rows}


def _us(v: Any) -> float | None:
    """A measured time in us, or None where it is no measurement of a step."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if np.isfinite(f) and 0 < f < _MAX_STEP_US else None


def measured_side(metadata: dict[str, Any], process: str) -> float | None:
    """The step of ``process``'s side of the window in the trace's ``nongemm_unprofiled``, where the
    document keeps the sides apart: ``before_step_us`` (before the window, the profiler not yet attached)
    for the never-profiled process, ``after_step_us`` (after it: attached, unless ``cupti_teardown``) for
    the attached one."""
    doc = metadata.get(METADATA_KEY)
    if not isinstance(doc, dict):
        return None
    if process == "attached":
        return None if doc.get("cupti_teardown") else _us(doc.get("after_step_us"))
    return _us(doc.get("before_step_us"))


def measured_unprofiled(metadata: dict[str, Any], process: str = "never_profiled") -> tuple[float | None, float | None]:
    """(step time, host issue time) in us from the trace's ``nongemm_unprofiled``, when present: the step of
    ``process``'s side of the window where the document keeps the sides apart (:func:`measured_side`; the
    issue time is of both sides, so none), else the pooled ``step_us`` and ``host_issue_us``."""
    doc = metadata.get(METADATA_KEY)
    if not isinstance(doc, dict):
        return None, None
    side = measured_side(metadata, process)
    if side is not None:
        return side, None
    return _us(doc.get("step_us")), _us(doc.get("host_issue_us"))


def without_profiler(ctx: Context, g: Graph, kept_steps: pl.DataFrame, *, step_us: float | None = None,
                     path: Any = None, model: OverheadModel | None = None, calibrate: bool = True,
                     attached: bool = False) -> Unprofiled:
    """The unchanged run replayed without the profiler's cost. ``step_us``: the run's measured step
    time without the profiler (mean per step), which wins over the trace's metadata; ``model``: another
    overhead model than the fitted one of the trace's settings (``attached``: of the process the profiler
    stayed attached to after its window, else of one it never attached to);
    ``calibrate=False``: the model's estimate alone, whatever was measured."""
    if step_us is not None and (not isinstance(step_us, (int, float)) or not np.isfinite(step_us) or step_us <= 0):
        raise OptionError(path, f"unprofiled_step_us must be a finite number > 0, not {step_us!r}",
                          "unprofiled_step_us")
    trace = ctx.trace()
    ops = ctx.linked().ops
    shapes = "input_dims" in ops.columns and bool(ops["input_dims"].is_not_null().any())
    settings = profiler_settings(trace.metadata, shapes)
    model = model or model_for(settings, process_of(attached))
    launches = trace.launches
    kinds = piece_kinds(g, graph_launch_ids(launches))
    cut = removable(g, kinds, measured_piece_lengths(g).astype(np.float64), model)
    host_work = kinds < len(PIECE_KINDS)  # the pieces a slower host lengthens: not syncs' returns, not waits
    del kinds
    cut = on_side_threads(g, cut, model)
    meta_step, meta_issue = measured_unprofiled(trace.metadata, model.process) if calibrate else (None, None)
    target = float(step_us) if step_us is not None and calibrate else meta_step
    issue = meta_issue if step_us is None else None  # a step time given by hand wins over the metadata
    dur = g.acts["dur"].to_numpy()
    replayed, replay_first = graph_replayed(g, launches)
    # the activity tracing's own device time, never more than half an activity (less for a graph's kernels)
    tracing = np.where(replayed, model.activity_ns if model.graph_activity_ns is None else model.graph_activity_ns,
                       model.activity_ns)
    d = np.rint(dur - np.minimum(tracing, dur / 2)).astype(np.int64)
    # the device time the profiler adds before each graph replay, where the replay was queued
    base_gap = g.acts["gap"].to_numpy()
    gap = np.where(replay_first, np.maximum(base_gap - int(model.graph_replay_gap_ns), 0), base_gap).astype(np.int64)
    lat = g.acts["lat"].to_numpy(allow_copy=True).astype(np.float64)
    lp = g.acts["lp"].fill_null(0).to_numpy()
    waited = g.acts["launch_bound"].fill_null(False).to_numpy() & g.acts["lp"].is_not_null().to_numpy()
    steps = kept_steps["step"]

    def terms(k: float) -> tuple[np.ndarray, np.ndarray]:
        # in place: a slot per host piece, and the calibration runs this many times; the measured lengths
        # made anew each time (a subtraction), not kept alive through every replay
        lengths = measured_piece_lengths(g)
        taken = np.multiply(cut, k)
        np.minimum(taken, lengths, out=taken)
        # an activity that waited for its launch call starts as much earlier as the call got shorter
        new_lat = np.where(waited, np.maximum(lat - taken[lp], 0.0), lat)
        np.subtract(lengths, taken, out=taken)
        np.copyto(lengths, np.rint(taken, out=taken), casting="unsafe")  # into the lengths' slots: no third array
        return lengths, new_lat

    def run(k: float, scale: float = 1.0, host: float = 1.0) -> tuple[Timeline, np.ndarray]:
        new, new_lat = host_terms(k, host)
        return replay(g, scaled(scale), new, new_lat, gap), new

    def host_terms(k: float, host: float) -> tuple[np.ndarray, np.ndarray]:
        new, new_lat = terms(k)
        if host != 1.0:
            new = np.where(host_work, np.rint(new * host), new).astype(np.int64)
        return new, new_lat

    def scaled(scale: float) -> np.ndarray:
        return d if scale == 1.0 else np.rint(d * scale).astype(np.int64)

    def steady_wall(tl: Timeline) -> float:  # the steady step the reports give, which a measurement is matched to
        return _steady_us(tl, steps)

    def result(k: float, source: str, measured: float | None, note: str | None = None,
               on: str | None = None, lever: str = "device") -> Unprofiled:
        scale, host, anchor, why = 1.0, 1.0, 1.0, None
        if measured is not None and lever == "host":
            host, anchor, why = anchor_on(lambda h: steady_wall(run(k, 1.0, h)[0]), measured, HOST_SCALE_RANGE,
                                        "host's time")
        elif measured is not None:
            def wall_of(s: float) -> float:
                return steady_wall(run(k, s)[0])
            if device_bound(ctx, g, run(k)[0], steps) or device_reaches(wall_of, measured):
                scale, anchor, why = anchor_on(wall_of, measured)
            else:
                # a host-paced step the device's clocks cannot explain: scaling the device to reach it would
                # take the durations far past any clock difference (a quarter of them to shave 1 % off a
                # host-bound ResNet-18 step), and every what-if would inherit that device; the anchor closes it
                wall = wall_of(1.0)
                anchor = measured / wall if wall > 0 else 1.0
        new, new_lat = host_terms(k, host)
        un = Unprofiled(replay(g, scaled(scale), new, new_lat, gap), new, scaled(scale), new_lat, gap, source, k,
                        model, settings, measured, "; ".join(n for n in (note, why) if n) or None, on, scale, anchor,
                        host)
        return un

    if target is None and issue is None:
        return result(1.0, "estimated", None)
    if issue is not None:
        # the host issue time isolates the host: the host-only replay (no device time) matched to it
        zero_d, zero_gap = np.zeros_like(d), np.zeros(len(d), np.int64)

        def wall_at(k: float) -> float:
            new, _ = terms(k)
            return steady_wall(replay(g, zero_d, new, np.zeros(len(d)), zero_gap))
        what = f"host issue time {issue:,.1f} us"
        goal = issue
    else:
        def wall_at(k: float) -> float:
            return steady_wall(run(k)[0])
        assert target is not None  # one of the two, checked above
        what = f"step {target:,.1f} us"
        goal = target
    lo, hi = wall_at(K_MAX), wall_at(0.0)
    note, lever = None, "device"
    if issue is None and device_bound(ctx, g, run(1.0)[0], steps) and device_reaches(
            lambda scale: steady_wall(run(1.0, scale)[0]), goal):
        # the model's run is paced by the device: a measured step that differs says the device differs
        # (clocks, contention), not a host several times slower or faster than the model (a step 2 % longer
        # once took 98 % of the profiler's time back in, and autocast's what-if then added casts to that host)
        k = 1.0
        note = (f"the model's estimate is device-bound: the measured {what} calibrates the device, not the host's "
                f"cost (the model's estimate is kept)")
    elif issue is None and hi - lo < 0.02 * hi:
        k = 1.0
        note = (f"the measured {what} cannot calibrate the host's cost: the step is device-bound whatever the host "
                f"costs (the model's estimate is kept)")
    elif goal >= hi and issue is None:
        # a step no shorter than the profiled one, where the host's cost moves the step and the device's
        # clocks cannot explain it (above): the host ran slower when the step was measured than when the trace
        # was captured (a host's speed drifts 2x within a minute, a GPU's clocks by a fourth at most); the
        # model's estimate is kept, and the host's time without the profiler, not the device's, takes the
        # difference
        k, lever = 1.0, "host"
        note = (f"the measured {what} is no shorter than the profiled run's: the host ran slower than in the "
                f"trace (the model's estimate of the profiler's cost is kept)")
    elif goal >= hi:
        k = 0.0
        note = f"the measured {what} is no shorter than the profiled run's: no profiler time is taken out"
    elif goal <= lo:
        k = K_MAX
        note = (f"the measured {what} is shorter than the replay reaches with {K_MAX:g}x the model's profiler time "
                f"taken out ({lo:,.1f} us): the rest is not host time the trace shows")
    else:
        k = bisect(lambda x: wall_at(x) <= goal, 0.0, K_MAX)  # less removed, a longer step
    return result(k, "measured", target if issue is None else meta_step, note,
                  "step" if issue is None else "host_issue", lever)
