"""What an analysis reads of its trace besides the :class:`~.selection.Selection`: the loaded tables,
the linked op tree, the activities classified at a level, the taxonomy, the options it was asked
for, and a memo for what it keeps between calls (latency's dependency graph, built once per trace
and level for every what-if). An analysis is handed this narrow view, never the
:class:`~.analysis.Analysis` itself, so it cannot reach the stages' caches or call back up into them.
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
    from .selection import Selection


@dataclass(frozen=True)
class Context:
    """One trace's tables for an analysis: ``trace()`` (the loaded tables), ``linked()`` (the op tree,
    classified), ``activities(level)`` (every GPU activity with its category at ``level``),
    ``selection(**options)`` (the selection under other options: latency's ignores ``drop_unlinked``),
    ``report(**options)`` (the breakdown of a selection, measured once), ``taxonomy``, ``path``, the
    selection ``options`` the analysis was asked for, and ``memo``: a dict kept with the trace for the
    analysis's own caches."""

    path: str | Path
    taxonomy: Taxonomy
    options: dict[str, Any]
    trace: Callable[[], Trace] = field(repr=False)
    linked: Callable[[], Linked] = field(repr=False)
    activities: Callable[[str], pl.DataFrame] = field(repr=False)
    selection: Callable[..., Selection] = field(repr=False)
    report: Callable[..., Report] = field(repr=False)
    memo: dict[str, Any] = field(repr=False, default_factory=dict)
