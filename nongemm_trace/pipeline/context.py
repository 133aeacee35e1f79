"""What an analysis reads of its trace besides the :class:`~.selection.Selection`: the loaded tables,
the linked op tree, the activities classified at a level, the taxonomy, the options it was asked
for, and a memo for what it keeps between calls (latency's dependency graph, built once per trace
and level for every what-if). An analysis is handed this narrow view, never the
:class:`~.analysis.Analysis` itself, so it cannot reach the stages' caches or call back up into them.

It offers no stage calls: an analysis cannot ask for another selection or a breakdown under options
of its own choosing. One that reads the breakdown says so in its spec (``AnalysisSpec.breakdown``)
and is handed that report, measured once for the trace as ``analyze`` measures it (``breakdown``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable

    import polars as pl

    from ..classify.taxonomy import Taxonomy
    from ..core.trace import Trace
    from ..link import Linked
    from ..models.report import Report


@dataclass(frozen=True)
class Context:
    """One trace's tables for an analysis: ``trace()`` (the loaded tables), ``linked()`` (the op tree,
    classified), ``activities(level)`` (every GPU activity with its category at ``level``),
    ``taxonomy``, ``path``, the selection ``options`` the analysis was asked for, ``memo``: a dict kept
    with the trace for the analysis's own caches, and ``breakdown``: the breakdown report of the
    selection (GPU time) for an analysis whose spec reads it, else None."""

    path: str | Path
    taxonomy: Taxonomy
    options: dict[str, Any]
    trace: Callable[[], Trace] = field(repr=False)
    linked: Callable[[], Linked] = field(repr=False)
    activities: Callable[[str], pl.DataFrame] = field(repr=False)
    memo: dict[str, Any] = field(repr=False, default_factory=dict)
    breakdown: Report | None = field(repr=False, default=None)
