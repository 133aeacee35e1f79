"""The analyses floor: every analysis of a trace, each declared once in the registry
(:mod:`.registry`; the specs of the shipped ones in :mod:`.catalogue`, filled when this package is
imported) and reached by name: :func:`specs`, :func:`spec`, :func:`run`. Their implementations are
functions of a :class:`~nongemm_trace.pipeline.selection.Selection` and a
:class:`~nongemm_trace.pipeline.context.Context` (``launch``, ``check``, ``shapes`` here; ``flops/`` and
``latency/`` in folders of their own), and the functions over several traces or a name (``compare``,
``explain``, ``weak``) sit beside them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import catalogue  # noqa: F401  (fills the registry)
from .registry import AnalysisSpec, lookup, registered, run_spec

if TYPE_CHECKING:  # pragma: no cover
    from ..pipeline.analysis import Analysis
    from ..pipeline.options import AnalysisOptions

__all__ = ["run", "spec", "specs"]


def specs() -> tuple[AnalysisSpec, ...]:
    """Every registered analysis, in the order registered."""
    return registered()


def spec(name: str) -> AnalysisSpec:
    """The analysis named ``name``."""
    found = lookup(name)
    if found is None:
        raise ValueError(f"no analysis named {name!r} (analyses: {', '.join(s.name for s in registered())})")
    return found


def run(name: str, source: str | Path | Analysis, params: Any = None,
        options: AnalysisOptions | dict[str, Any] | None = None) -> Any:
    """The model of analysis ``name`` on ``source`` (a path or an open
    :class:`~nongemm_trace.pipeline.analysis.Analysis`): ``params`` its ``Params`` (or a dict of them),
    ``options`` the :class:`~nongemm_trace.pipeline.options.AnalysisOptions` (or a dict of its fields)."""
    return run_spec(spec(name), source, params, options)
