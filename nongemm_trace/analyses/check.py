"""Regression gates: limits on shares and on GPU-time regressions against a baseline.

``check`` returns the list of broken limits (empty when all hold); the CLI turns
a non-empty list into exit code 1, and :mod:`nongemm_trace.testing` into an
``AssertionError``. Shares are of GPU time; regressions compare GPU time per step
(each trace divided by its own step count; whole traces when there are no steps).

A baseline gate fails closed: a trace that lost its GPU work (a capture that missed the
device, a profile cut short, a file read as something it is not) would otherwise pass every
regression limit, its time having fallen. So a trace with no GPU activity, or with fewer GPU
activities per step than :data:`MIN_ACTIVITIES` of its baseline's, breaks the gate's
``min-activities`` limit whatever else holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from ..errors import OptionError, TraceError
from ..models.report import Report
from ..models.stored import is_stored_report, read_stored_report
from ..models.verdicts import CheckResult
from ..pipeline.analysis import Analysis, open_analysis
from ..pipeline.options import AnalysisOptions, keywords_of
from ..vocabulary import CLASSES

if TYPE_CHECKING:  # pragma: no cover
    from ..classify.taxonomy import Taxonomy
    from ..pipeline.context import Context
    from ..pipeline.selection import Selection


#: the default floor of a baseline gate: a trace with fewer GPU activities per step than this share of
#: its baseline's fails it (a fused or quantized build launches fewer kernels, rarely a quarter as many)
MIN_ACTIVITIES = 0.25


@dataclass(frozen=True)
class Violation:
    """A broken limit: its name, the measured value, the limit and the sentence that says so."""

    limit: str
    value: float
    allowed: float
    message: str


@dataclass(frozen=True)
class Gate:
    """One limit checked, broken or not: what was measured against what was allowed. ``check``'s
    text and JSON and the callbacks' ``.check.json`` list every gate, so a green gate shows its
    margin as well."""

    limit: str
    value: float
    allowed: float
    ok: bool
    message: str


class Violations(list[Violation]):
    """The broken limits (a list, empty when every limit holds), with ``gates``: every limit checked,
    each with its measured value and limit."""

    def __init__(self, gates: list[Gate]):
        super().__init__(Violation(g.limit, g.value, g.allowed, g.message) for g in gates if not g.ok)
        self.gates = gates


def parse_fraction(text: str | float, where: str = "limit") -> float:
    """``0.45``, ``45%`` or ``45 %`` -> 0.45."""
    t = str(text).strip().replace(" ", "")
    try:
        return float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise TraceError(None, f"{where}: {text!r} is not a fraction (0.45) or a percentage (45%)") from None


def parse_named(items: list[str] | None, where: str) -> dict[str, float]:
    out = {}
    for it in items or []:
        if "=" not in it:
            raise TraceError(None, f"{where} wants NAME=VALUE, not {it!r}")
        k, v = it.split("=", 1)
        out[k.strip()] = parse_fraction(v, where)
    return out


def _validate(limits: dict[str, float] | None, known: tuple[str, ...], what: str, share: bool) -> None:
    for name, value in (limits or {}).items():
        if name not in known:
            raise OptionError(None, f"{what}: unknown name {name!r} (known: {', '.join(known)})", what)
        if share and not 0.0 <= value <= 1.0:
            raise OptionError(None, f"{what}: the limit for {name} is {value:g}, not a share between 0 and 1", what)


def _percent(limit: float) -> str:
    """A limit in percent, one decimal unless it is smaller (a limit of 0.01 % is not "0.0 %")."""
    pct = 100 * limit
    return f"{pct:.1f}" if pct == 0 or abs(pct) >= 0.1 else f"{pct:.2g}"


def validate_limits(taxonomy: Taxonomy, *, max_share: dict[str, float] | None = None,
                    max_category_share: dict[str, float] | None = None, max_regression: float | None = None,
                    max_category_regression: dict[str, float] | None = None, baseline: Any = None,
                    path: str | Path | None = None, min_activities: float = MIN_ACTIVITIES,
                    max_exposed_communication: float | None = None, max_skew_us: float | None = None,
                    ranks: list[str | Path] | None = None) -> None:
    """Refuse limits that could never fire: a name the taxonomy does not declare, a share outside
    0..1, no limit at all, a regression limit without a baseline, a skew limit without the other
    ranks (:func:`~.comm_gates.validate_comm_limits`). :func:`check` calls it; the integrations call
    it before training starts, so a typo fails at once, not after the run."""
    from .comm_gates import validate_comm_limits

    validate_comm_limits(max_exposed_communication, max_skew_us, ranks, path)
    declared = taxonomy.categories
    _validate(max_share, CLASSES + tuple(c for c in declared if c not in CLASSES), "max_share", share=True)
    _validate(max_category_share, declared, "max_category_share", share=True)
    _validate(max_category_regression, declared, "max_category_regression", share=False)
    import math
    for name, value in [("max_regression", max_regression), *(max_category_regression or {}).items()]:
        if value is not None and not math.isfinite(value):  # NaN never compares above: the gate would be off
            raise OptionError(path, f"the regression limit {name} is {value}, not a finite fraction",
                              "max_regression", "max_category_regression")
    if isinstance(min_activities, bool) or not isinstance(min_activities, (int, float)) \
            or not 0.0 <= min_activities <= 1.0:  # (NaN too) a floor above the baseline, or none, is no floor
        raise OptionError(path, f"min_activities is {min_activities!r}, not a share between 0 and 1 of the "
                                "baseline's GPU activities per step", "min_activities")
    if not (max_share or max_category_share or max_regression is not None or max_category_regression
            or max_exposed_communication is not None or max_skew_us is not None):
        raise OptionError(path, "no limit to check (give max_share, max_category_share, max_regression, "
                                "max_category_regression, max_exposed_communication or max_skew_us)",
                          "max_share", "max_category_share", "max_regression", "max_category_regression",
                          "max_exposed_communication", "max_skew_us")
    if (max_regression is not None or max_category_regression) and baseline is None:
        raise OptionError(path, "max_regression needs baseline BASE", "max_regression", "baseline")


@dataclass(frozen=True)
class Baseline:
    """What a regression gate reads of a trace: GPU time, GPU activities, step count and GPU time per category.
    Made from a selection (a trace measured here) or from a report, live or stored (read back from
    ``analyze --format json`` by :func:`~nongemm_trace.models.stored.read_stored_report`): both
    give the same numbers, from the report's category table, never its per-activity tables."""

    gpu_time_ns: int
    steps: int
    category_ns: dict[str, int]
    activities: int

    @classmethod
    def of_selection(cls, sel: Selection) -> Baseline:
        acts = sel.activities
        got = acts.group_by("category").agg(pl.col("dur_ns").sum()) if acts.height else None
        return cls(int(acts["dur_ns"].sum() or 0), sel.kept_steps.height,
                   {c: int(t) for c, t in got.iter_rows()} if got is not None else {}, acts.height)

    @classmethod
    def of_report(cls, rep: Report) -> Baseline:
        """The report's GPU time per category (:meth:`Report.gpu_categories`). A report whose categories do
        not add up to its GPU time (a cpu-metric report leaves out the categories with no CPU time)
        does not hold them: refused."""
        got = {c: int(t or 0) for c, t in rep.gpu_categories().select("category", "gpu_time_ns").iter_rows()}
        if abs(sum(got.values()) - rep.gpu_time_ns) > len(got):
            raise TraceError(rep.trace, f"the {rep.metric}-metric report does not hold the GPU time of every "
                                        "category: measure the baseline with metric gpu")
        count = rep.gpu_activities
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise TraceError(rep.trace, f"the report's gpu_activities is {count!r}, not a count")
        return cls(int(rep.gpu_time_ns), rep.steps.height, got, count)

    def per_step(self, ns: float) -> float:
        return ns / self.steps if self.steps else ns


def activity_floor(base: Baseline, mine: Baseline, fraction: float) -> Gate:
    """The ``min-activities`` gate of a baseline check: broken by a trace with no GPU activity, or with
    fewer GPU activities per step than ``fraction`` of the baseline's (GPU time that fell because the
    work is gone is no improvement)."""
    b, n = base.per_step(base.activities), mine.per_step(mine.activities)
    if mine.activities == 0:
        has = f"its baseline has {b:,.1f} per step" if base.activities else "nor does its baseline"
        return Gate("min-activities", 0.0, fraction, False, f"the trace holds no GPU activity ({has}): a gate on "
                                                             "GPU time cannot pass a trace that lost its GPU work")
    share = n / b if b else 1.0
    if share < fraction:
        return Gate("min-activities", share, fraction, False,
                    f"GPU activities per step fell to {n:,.1f} from the baseline's {b:,.1f} "
                    f"({_percent(share)} %), below the floor of {_percent(fraction)} % of the baseline's: "
                    "the trace lost most of its GPU work")
    return Gate("min-activities", share, fraction, True,
                f"GPU activities per step {n:,.1f} against the baseline's {b:,.1f} ({_percent(share)} %), "
                f"above the floor of {_percent(fraction)} %")


def _baseline(source: str | Path | Analysis | Report, options: dict[str, Any]) -> Baseline:
    if isinstance(source, Report):
        return Baseline.of_report(source)
    if not isinstance(source, Analysis) and is_stored_report(source):
        return Baseline.of_report(read_stored_report(source, "baseline"))
    analysis, opts = open_analysis(source, options)
    return Baseline.of_selection(analysis.selection(opts))


def check(
    trace: str | Path | Analysis,
    *,
    baseline: str | Path | Analysis | Report | None = None,
    max_share: dict[str, float] | None = None,
    max_category_share: dict[str, float] | None = None,
    max_regression: float | None = None,
    max_category_regression: dict[str, float] | None = None,
    min_activities: float = MIN_ACTIVITIES,
    max_exposed_communication: float | None = None,
    max_skew_us: float | None = None,
    ranks: list[str | Path] | None = None,
    options: AnalysisOptions | None = None,
    **old: Any,
) -> CheckResult:
    """Check ``trace`` against the limits: a :class:`~nongemm_trace.models.verdicts.CheckResult`, whose
    ``violations`` are the broken ones (empty when all hold; ``.gates`` lists every limit with its measured
    value) and ``report`` the breakdown (unpacking it as ``violations, report`` is deprecated); ``options`` go to
    :func:`nongemm_trace.analyze`. ``baseline``: a trace (path or :class:`Analysis`), a report (live, or
    :meth:`Report.from_dict` of its document) or a stored report's JSON file; each gives the same numbers
    for the same trace. A limit that names no class or category, a share limit outside 0..1, or no limit
    at all is refused: a typo must never turn a gate off. With a baseline, ``min_activities`` is the floor
    of GPU activities per step, a share of the baseline's (:func:`activity_floor`). ``max_exposed_communication``
    and ``max_skew_us`` (with ``ranks``, the other ranks' traces) gate a distributed rank (:mod:`.comm_gates`).
    ``options``: the :class:`~nongemm_trace.pipeline.options.AnalysisOptions` of the trace (and of a baseline
    trace; GPU time unless it says); ``old``: its fields as keywords, as it took them before (deprecated)."""
    analysis, opts = open_analysis(trace, keywords_of(options, old, "check"), metric="gpu")
    limits: dict[str, Any] = dict(baseline=baseline, max_share=max_share, max_category_share=max_category_share,
                                  max_regression=max_regression, max_category_regression=max_category_regression,
                                  min_activities=min_activities, max_exposed_communication=max_exposed_communication,
                                  max_skew_us=max_skew_us, ranks=ranks)
    validate_limits(analysis.taxonomy, path=analysis.path, **limits)
    assert opts.metric is not None  # filled in
    report = analysis.report(opts)
    return check_of(analysis.selection(opts), analysis.context(report, opts), metric=opts.metric, **limits)


def check_of(sel: Selection, ctx: Context, *, baseline: str | Path | Analysis | Report | None = None,
             max_share: dict[str, float] | None = None, max_category_share: dict[str, float] | None = None,
             max_regression: float | None = None, max_category_regression: dict[str, float] | None = None,
             min_activities: float = MIN_ACTIVITIES, max_exposed_communication: float | None = None,
             max_skew_us: float | None = None, ranks: list[str | Path] | None = None,
             metric: str = "gpu") -> CheckResult:
    """:func:`check` of a selection whose limits were validated (the analysis's ``run``), under the
    breakdown the context hands it (its spec's ``breakdown``; measured under ``metric``)."""
    rep = ctx.breakdown
    if rep is None:
        raise ValueError("check reads the breakdown: give it in the context (Analysis.context(report, ...))")
    of = {"gpu": "GPU time", "cpu": "CPU time", "paper": "CPU + GPU time"}.get(rep.metric, rep.metric)
    out: list[Gate] = []

    def gate(limit: str, value: float, allowed: float, what: str) -> None:
        ok = not value > allowed
        word = "within" if ok else "above"
        out.append(Gate(limit, value, allowed, ok, f"{what}, {word} the limit of {_percent(allowed)} %"))

    for name, allowed in (max_share or {}).items():
        value = rep.share(name)
        gate(f"max-share {name}", value, allowed, f"{name} is {_percent(value)} % of {of}")
    for name, allowed in (max_category_share or {}).items():
        value = rep.share(name)
        gate(f"max-category-share {name}", value, allowed, f"category {name} is {_percent(value)} % of {of}")
    if max_exposed_communication is not None or max_skew_us is not None:
        from .comm_gates import comm_gates
        out += [Gate(*g) for g in comm_gates(sel, ctx, {"metric": metric, **ctx.options},
                                             max_exposed_communication=max_exposed_communication,
                                             max_skew_us=max_skew_us, ranks=ranks)]
    if baseline is not None:
        base = _baseline(baseline, {"taxonomy": ctx.taxonomy, "metric": metric, **ctx.options})
        mine = Baseline.of_selection(sel)
        out.append(activity_floor(base, mine, min_activities))
        if max_regression is not None:
            b, n = base.per_step(base.gpu_time_ns), mine.per_step(mine.gpu_time_ns)
            change = (n - b) / b if b else (float("inf") if n > 0 else 0.0)  # from none: a rise
            gate("max-regression", change, max_regression,
                 f"GPU time per step {_changed(b, change)} ({b / 1000:,.1f} -> {n / 1000:,.1f} us)")
        for cat, allowed in (max_category_regression or {}).items():
            b, n = base.per_step(base.category_ns.get(cat, 0)), mine.per_step(mine.category_ns.get(cat, 0))
            change = (n - b) / b if b else (float("inf") if n > 0 else 0.0)
            gate(f"max-category-regression {cat}", change, allowed,
                 f"{cat} GPU time per step {_changed(b, change)} ({b / 1000:,.1f} -> {n / 1000:,.1f} us)")
    return CheckResult(str(ctx.path), Violations(out), rep)


def _changed(before: float, change: float) -> str:
    if before == 0:
        return "appeared" if change > 0 else "stayed at none"
    return f"{'rose' if change > 0 else 'fell' if change < 0 else 'stayed'} {100 * abs(change):.1f} %" \
        if change else "did not change"
