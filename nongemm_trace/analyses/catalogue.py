"""The analyses of one trace that the command line, the page, the plugin and :func:`.registry.run`
reach by name, each declared once: its ``Params`` (every field a flag, with its help) and its
:class:`~.registry.AnalysisSpec`. Each ``run`` imports its implementation when it is called, so this
table loads no polars. A new analysis declares its spec in its own module and is imported at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.fields import option
from ..vocabulary import TIME_BASES
from .changes import ATTACHED as _ATTACHED
from .changes import UNPROFILED as _UNPROFILED
from .changes import WhatIfParams
from .registry import AnalysisSpec, register

#: the selection options of the analyses that replay the steps (every activity takes part in the timeline)
_STEPPED = ("level", "step_marker", "skip_steps")


# -- launch -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LaunchParams:
    short_us: float = option(10.0, "activities shorter than this are short (default 10)")
    unprofiled_step_us: float | None = option(None, _UNPROFILED, metavar="X")
    attached: bool = option(False, _ATTACHED)


def _launch(sel: Any, ctx: Any, p: LaunchParams) -> Any:
    from .launch import launch_of
    return launch_of(sel, ctx, p.short_us, p.unprofiled_step_us, p.attached)


def _timed(sel: Any) -> bool:
    """Whether the trace is a timeline: a deployment stack's profile holds per-layer averages laid end to
    end, no timeline to judge idle time or launches by."""
    return sel.measured_as("gpu")[0] not in TIME_BASES


#: on the page under each trace's breakdown, after the phases (the page's order since it first had both)
register(AnalysisSpec("launch", "launch overhead, GPU idle gaps and communication overlap of one trace",
                      LaunchParams, "launch", _launch, page=20, applies=_timed))


# -- flops --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FlopsParams:
    device_spec: str | None = option(None, "peak specs to use instead of the detected device", metavar="NAME|FILE.toml")


def _flops(sel: Any, ctx: Any, p: FlopsParams) -> Any:
    from .flops import flops_of
    return flops_of(sel, ctx, p.device_spec)


register(AnalysisSpec("flops", "FLOPs, bytes and the roofline per op; where FLOPs misjudge time", FlopsParams,
                      "flops", _flops, trace_help="a Kineto trace recorded with record_shapes=True",
                      top="rows of ops in the table view (default 15)"))


# -- latency and whatif -------------------------------------------------------------------------
@dataclass(frozen=True)
class LatencyParams:
    unprofiled_step_us: float | None = option(None, _UNPROFILED, metavar="X")
    attached: bool = option(False, _ATTACHED)


def _latency(sel: Any, ctx: Any, p: LatencyParams) -> Any:
    from .latency import latency_of
    return latency_of(sel, ctx, p.unprofiled_step_us, p.attached)


_STEPS_HELP = "a trace with steps (ProfilerStep#N, or --step-marker NAME)"
register(AnalysisSpec("latency", "each step's wall time along its critical path, by category and bound (gpu, "
                                 "communication, launch, cpu, sync, other)", LatencyParams, "latency", _latency,
                      selecting=_STEPPED, trace_help=_STEPS_HELP))


# its Params, WhatIfParams, is its own module's (analyses/changes.py): predict takes the same object
def _whatif(sel: Any, ctx: Any, p: WhatIfParams) -> Any:
    from .latency import whatif_of
    return whatif_of(sel, ctx, p)


def _whatif_refuse(p: WhatIfParams, taxonomy: Any, path: Any) -> None:
    from .latency.whatif import parse_scales
    parse_scales(p.scale, taxonomy.categories, path)  # before the trace is read


register(AnalysisSpec("whatif", "replay the steps with changed durations: predicted latency, shares and critical "
                                "path", WhatIfParams, "whatif", _whatif, selecting=_STEPPED,
                      trace_help=_STEPS_HELP, refuse=_whatif_refuse, example=("--scale", "GEMM=0.5")))


# -- check --------------------------------------------------------------------------------------
def _named(flag: str) -> Callable[[Any], dict[str, float]]:
    def parse(items: Any) -> dict[str, float]:
        from .check import parse_named
        return parse_named(items, flag)
    return parse


def _fraction(flag: str) -> Callable[[Any], float | None]:
    def parse(text: Any) -> float | None:
        from .check import parse_fraction
        return parse_fraction(text, flag) if text else None
    return parse


def _time(flag: str) -> Callable[[Any], float | None]:
    def parse(text: Any) -> float | None:
        from .comm_gates import parse_us
        return None if text is None else parse_us(text, flag)
    return parse


def _paths(items: Any) -> tuple[str, ...] | None:
    return None if items is None else tuple(items)


@dataclass(frozen=True)
class CheckParams:
    baseline: Any = option(None, "the trace to compare with, or its stored report (analyze --format json)",
                           metavar="BASE")
    max_share: dict[str, float] | None = option(None, "e.g. non-GEMM=0.45 or non-GEMM=45% (repeatable; a category "
                                                      "name works too)", metavar="CLASS=FRACTION", repeat=True,
                                                parse=_named("--max-share"))
    max_category_share: dict[str, float] | None = option(None, "e.g. memory=0.2 (repeatable; a taxonomy category)",
                                                         metavar="CATEGORY=FRACTION", repeat=True,
                                                         parse=_named("--max-category-share"))
    max_regression: float | None = option(None, "GPU time per step against --baseline, e.g. 10%", metavar="PCT",
                                          parse=_fraction("--max-regression"))
    max_category_regression: dict[str, float] | None = option(
        None, "a category's GPU time per step against --baseline, e.g. memory=5% (repeatable)",
        metavar="CATEGORY=PCT", repeat=True, parse=_named("--max-category-regression"))
    min_activities: float | None = option(None, "with --baseline: fail a trace with fewer GPU activities per step than "
                                                "this share of the baseline's (default 25%); a trace with no GPU "
                                                "activity always fails", metavar="PCT",
                                          parse=_fraction("--min-activities"))
    max_exposed_communication: float | None = option(
        None, "communication no computation hid, as a share of the busy GPU time, e.g. 10%", metavar="FRACTION",
        parse=_fraction("--max-exposed-communication"))
    max_skew_us: float | None = option(None, "with --ranks: the largest arrival skew of a collective matched across "
                                             "the ranks, in us (500) or with a unit (2ms)", metavar="TIME",
                                       parse=_time("--max-skew-us"))
    ranks: tuple[str, ...] | None = option(None, "the other ranks' traces of the run (--max-skew-us)", metavar="TRACE",
                                           many=True, parse=_paths)

    def limits(self) -> dict[str, Any]:
        """The limits as :func:`.check.check` takes them (the default floor where none was given)."""
        from .check import MIN_ACTIVITIES
        return dict(baseline=self.baseline, max_share=self.max_share, max_category_share=self.max_category_share,
                    max_regression=self.max_regression, max_category_regression=self.max_category_regression,
                    min_activities=MIN_ACTIVITIES if self.min_activities is None else self.min_activities,
                    max_exposed_communication=self.max_exposed_communication, max_skew_us=self.max_skew_us,
                    ranks=None if self.ranks is None else list(self.ranks))


def _check(sel: Any, ctx: Any, p: CheckParams) -> Any:
    from .check import check_of
    return check_of(sel, ctx, **p.limits())


def _check_refuse(p: CheckParams, taxonomy: Any, path: Any) -> None:
    from .check import validate_limits
    validate_limits(taxonomy, path=path, **p.limits())


register(AnalysisSpec("check", "regression gates: exit 1 when a limit is broken", CheckParams, "check", _check,
                      trace_help="the trace to gate", refuse=_check_refuse, status=lambda m: 0 if m.ok else 1,
                      example=("--max-share", "non-GEMM=0.99"), breakdown=True))


# the analyses added since, each module registering its own spec
from . import phases, shapes  # noqa: E402,F401
