"""The :class:`BatchResult`: many traces analysed at once (built by
:func:`nongemm_trace.runs.batch.run_batch`): each trace's report document, the files that
failed with their one-line errors, the combined categories and the distributed ranks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from .._version import __version__
from ..vocabulary import SCHEMA_VERSION
from .short_repr import short_repr


@dataclass(repr=False)
class BatchResult:
    __repr__ = short_repr  # one line, tables as sizes (models/short_repr.py)
    #: the model's name: its renderers' key (nongemm_trace.report) and its analysis's
    NAME: ClassVar[str] = "batch"

    #: one report document per trace (``Report.to_dict``, plus ``rank``, ``timeline``, ``step_times_us``:
    #: each step's period)
    reports: list[dict[str, Any]]
    failed: list[dict[str, str]] = field(default_factory=list)
    #: GPU time and activities per category and class over all traces
    combined: dict[str, Any] = field(default_factory=dict)
    #: per distributed rank, with the straggler; None with fewer than two ranks
    ranks: dict[str, Any] | None = None
    #: every collective call matched across ranks (runs/collectives.py): ``{name, ranks, bytes, skew_us,
    #: last_rank, wait_us (per rank), busbw_gbps, …}``; empty without two ranks that record collectives
    collectives: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = {"schema_version": SCHEMA_VERSION, "tool_version": __version__, "traces": self.reports,
               "combined": self.combined, "failed": self.failed}
        if self.ranks:
            out["ranks"] = self.ranks
        if self.collectives:
            out["collectives"] = self.collectives
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BatchResult:
        """A batch result from its JSON document (``analyze`` of several traces, ``--format json``)."""
        return cls(d["traces"], d["failed"], d["combined"], d.get("ranks"), d.get("collectives") or [])
