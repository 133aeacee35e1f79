"""The analyses, each declared once: an :class:`AnalysisSpec` (its name, help, typed ``Params``, the
model it returns and ``run(selection, context, params)``) registered here. The command line's
subcommands (:mod:`nongemm_trace.commands.derived`), the HTML page, the batch, the pytest plugin, the
tests and ``nongemm_trace.run`` (the library's one entry to any of them) all read this table, through
the package (:mod:`nongemm_trace.analyses`: ``specs``, ``spec``, ``run``); registering a name twice is
refused, as torch's ``register_flop_formula`` refuses a second formula for an op.

The page and the batch do not name the analyses they show: they ask :func:`listed` which analyses a
spec puts there (its ``page`` place, its ``batch`` flag) and run each that ``applies`` to the trace
(:func:`run_listed`), so an analysis registered here shows on the page and in each trace's batch
object with no edit to either.

A ``Params`` class is a frozen dataclass whose fields are made by
:func:`~nongemm_trace.core.fields.option`: the field is the parameter (typed, with its default) and
carries its flag's help, from which the parser is built. The table is filled when the package is
imported (:mod:`.catalogue`, which imports no polars: each ``run`` imports its implementation when
called), so the command line builds its parser from it before polars loads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..pipeline.options import SELECTING, AnalysisOptions

if TYPE_CHECKING:  # pragma: no cover
    from ..classify.taxonomy import Taxonomy
    from ..pipeline.analysis import Analysis
    from ..pipeline.context import Context
    from ..pipeline.selection import Selection


@dataclass(frozen=True)
class NoParams:
    """The parameters of an analysis that reads nothing but its selection."""


@dataclass(frozen=True)
class AnalysisSpec:
    """One analysis. ``selecting``: which of :class:`AnalysisOptions`' selection options it takes
    (the taxonomy always); ``refuse(params, taxonomy, path)``: refuses parameters that could never
    hold before the trace is read; ``status(model)``: the exit status of a result (a broken gate is
    1); ``example``: the arguments after the trace that make it answer on a real trace (the tests
    and the golden outputs run it so).

    Where it is listed without being named: ``page``, its place among the sections under each trace's
    breakdown on the HTML page (lower first; None: not on the page), drawn by its model's ``html``
    renderer (``report/registry.py``) or, without one, its terminal view as text; ``batch``, whether each
    trace's object of the batch JSON holds its document (under ``analyses``, by name). Both run it with
    its default ``Params`` (the page's own settings aside) and the selection options it takes;
    ``applies(selection)`` says whether it has anything to say of a trace (None: every trace), so a
    profile it cannot read gets no section rather than an error.

    ``breakdown``: it reads the breakdown report of its selection (GPU time), which the registry
    measures (once per trace and options, as ``analyze`` does) and hands it in the context
    (``Context.breakdown``): the context offers no stage call to measure one itself.

    ``top``: where its terminal view cuts a table to its largest rows, the help of the ``--top N`` flag
    that says how many (None: no such flag), so the subcommand needs no entry on the command floor."""

    name: str
    help: str
    params: type
    model: str
    run: Callable[[Selection, Context, Any], Any]
    selecting: tuple[str, ...] = SELECTING
    trace_help: str = "the trace to analyse"
    refuse: Callable[[Any, Taxonomy, Any], None] | None = None
    status: Callable[[Any], int] | None = None
    example: tuple[str, ...] = ()
    page: int | None = None
    batch: bool = False
    applies: Callable[[Selection], bool] | None = None
    breakdown: bool = False
    top: str | None = None


#: the views that list the analyses (:attr:`AnalysisSpec.page`, :attr:`AnalysisSpec.batch`)
LISTS = ("page", "batch")

_SPECS: dict[str, AnalysisSpec] = {}


def register(spec: AnalysisSpec) -> AnalysisSpec:
    """Add ``spec`` to the table; a name registered already is refused, as is a ``Params`` that is not
    a frozen dataclass."""
    if spec.name in _SPECS:
        raise ValueError(f"an analysis named {spec.name!r} is registered already")
    params = getattr(spec.params, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"{spec.name}: Params must be a frozen dataclass, not {spec.params!r}")
    unknown = set(spec.selecting) - set(SELECTING)
    if unknown:
        raise ValueError(f"{spec.name}: no selection option {', '.join(sorted(unknown))}")
    _SPECS[spec.name] = spec
    return spec


def unregister(name: str) -> AnalysisSpec:
    """Take the analysis named ``name`` out of the table (a test, or a plugin that adds one for a while)."""
    return _SPECS.pop(name)


def registered() -> tuple[AnalysisSpec, ...]:
    """The analyses registered so far, in the order registered."""
    return tuple(_SPECS.values())


def lookup(name: str) -> AnalysisSpec | None:
    """The analysis named ``name`` among those registered so far."""
    return _SPECS.get(name)


def params_of(which: AnalysisSpec, values: Any = None) -> Any:
    """``values`` (a ``Params``, a dict of its fields, or None for the defaults) as ``which``'s ``Params``;
    a name it does not take is refused with the names it does."""
    if isinstance(values, which.params):
        return values
    known = {f.name for f in fields(which.params)}
    unknown = sorted(set(values or {}) - known)
    if unknown:
        raise TypeError(f"{which.name} takes no parameter {', '.join(unknown)} (its parameters: "
                        f"{', '.join(sorted(known)) or 'none'})")
    return which.params(**(values or {}))


def listed(where: str) -> tuple[AnalysisSpec, ...]:
    """The analyses ``where`` (``"page"``: in their page order; ``"batch"``: in the order registered) lists."""
    if where == "page":
        return tuple(sorted((s for s in _SPECS.values() if s.page is not None), key=lambda s: s.page or 0))
    if where == "batch":
        return tuple(s for s in _SPECS.values() if s.batch)
    raise ValueError(f"no list named {where!r} ({', '.join(LISTS)})")


def run_listed(analysis: Analysis, specs: tuple[AnalysisSpec, ...], options: dict[str, Any],
               params: dict[str, Any] | None = None) -> list[tuple[AnalysisSpec, Any]]:
    """Each of ``specs`` (:func:`listed`) that applies to the trace of ``analysis``, with its model, or the
    :class:`~nongemm_trace.errors.TraceError` that refused the trace (one analysis that cannot read a trace
    never costs the others their place). ``options``: the selection options of the view, each analysis
    given those it takes; ``params``: by analysis name, the parameters the view sets (else the defaults)."""
    from ..errors import TraceError

    out: list[tuple[AnalysisSpec, Any]] = []
    for which in specs:
        asked = {k: v for k, v in options.items() if k in which.selecting}
        try:
            if which.applies is not None and not which.applies(analysis.selection(AnalysisOptions(**asked))):
                continue
            out.append((which, _run_on(which, analysis, params_of(which, (params or {}).get(which.name)), asked)))
        except TraceError as exc:
            out.append((which, exc))
    return out


def _run_on(which: AnalysisSpec, analysis: Analysis, params: Any, asked: dict[str, Any]) -> Any:
    """Analysis ``which`` of an open analysis under the selection options ``asked``."""
    if which.refuse is not None:
        which.refuse(params, analysis.taxonomy, analysis.path)
    typed = AnalysisOptions(**asked)
    report = analysis.report(replace(typed, metric="gpu")) if which.breakdown else None
    return which.run(analysis.selection(typed), analysis.context(report, typed), params)


def run_spec(which: AnalysisSpec, source: str | Path | Analysis, params: Any = None,
             options: AnalysisOptions | dict[str, Any] | None = None) -> Any:
    """The model of analysis ``which`` on ``source`` (a path or an open
    :class:`~nongemm_trace.pipeline.analysis.Analysis`): ``params`` its ``Params`` (or a dict of them),
    ``options`` the :class:`AnalysisOptions` (a selection option it does not take is refused)."""
    from ..pipeline.analysis import Analysis, needs_python

    params = params_of(which, params)
    opts = AnalysisOptions.of(options)
    selecting, defaults = opts.selecting(), AnalysisOptions().selecting()
    ignored = [k for k, v in selecting.items() if k not in which.selecting and v != defaults[k]]
    if ignored:
        raise TypeError(f"{which.name} does not take {', '.join(ignored)}")
    analysis = Analysis.of(source, replace(opts, keep_python=opts.keep_python or needs_python(opts.level)))
    return _run_on(which, analysis, params, {k: v for k, v in selecting.items() if k in which.selecting})
