"""``nongemm-trace report TRACE… -o report.html``: one HTML page to share.

Each trace is opened once (:class:`~nongemm_trace.pipeline.analysis.Analysis`); its report, its
launch analysis and, for several traces, the comparison all read that one load. The
page itself is drawn by :mod:`nongemm_trace.report.html` (self-contained: no network).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .analyses import run
from .analyses.compare import compare
from .core.safe_write import refuse_input, write_file
from .errors import OptionError, TraceError
from .pipeline.analysis import Analysis, split_options
from .report.html import render_html
from .report.html_collectives import collectives_section
from .report.html_phases import phases_section
from .runs.batch import rank_entry, rank_of, ranks
from .vocabulary import TIME_BASES


def build_page(traces: list[str | Path | Analysis], *, top: int = 15, short_us: float = 10.0, per_step: bool = False,
               title: str | None = None, **options: Any) -> str:
    """The HTML page of ``traces`` (paths or analyses); ``options`` as for :func:`nongemm_trace.analyze`
    (``metric`` applies to the breakdown; the launch view and the comparison are of GPU time)."""
    if not traces:
        raise TraceError(None, "report needs at least one TRACE")
    if top < 0:
        raise OptionError(None, f"top must be >= 0, not {top}", "top")
    opened, report_opts = split_options(dict(options))
    analyses = [Analysis.of(t, **opened) for t in traces]
    launch_opts = {k: v for k, v in report_opts.items() if k != "metric"}
    reports = [a.report(**report_opts) for a in analyses]
    # a deployment stack's profile holds per-layer averages laid end to end: no timeline to judge
    launches = [None if r.metric in TIME_BASES else run("launch", a, {"short_us": short_us}, launch_opts)
                for a, r in zip(analyses, reports)]
    comparison = compare(analyses, per_step=per_step, **launch_opts) if len(analyses) > 1 else None
    # distributed ranks: the rank table and the straggler, as ``analyze RANK0 RANK1 …`` prints them
    entries = [rank_entry(r, lr.summary) for r, lr in zip(reports, launches)
               if lr is not None and rank_of(r) is not None]
    if title is None:
        title = f"nongemm-trace: {Path(str(reports[0].trace)).name}" if len(reports) == 1 else \
            f"nongemm-trace: {len(reports)} traces"
    view = ranks(entries)
    calls = _collectives(analyses, reports, launch_opts, view)
    return render_html(reports, launches, comparison, top=top, title=title, ranks=view,
                       after_ranks=collectives_section(calls, (view or {}).get("ranks") or []),
                       after_report=[phases_section(r.phases, r.phase_engine) for r in reports])


def _collectives(analyses: list[Analysis], reports: list, options: dict[str, Any],
                 view: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The collectives matched across the ranks on the page (as ``analyze RANK0 RANK1 --format json``
    lists them), each rank's row of the rank table given its per-rank figures; none without ranks."""
    if view is None:
        return []
    from .analyses.collectives import collective_calls
    from .devices.links import link_of
    from .runs.collectives import CALLS_KEY, collectives_view, worker_calls

    got = [{"rank": rank_of(r), CALLS_KEY: worker_calls(collective_calls(a, **options),
                                                        link_of(r.metadata.get("device")))}
           for a, r in zip(analyses, reports) if rank_of(r) is not None]
    calls, per_rank = collectives_view(got)
    for row in view["ranks"]:
        row["collectives"] = per_rank.get(row["rank"])
    return calls


def write_page(traces: list[str | Path | Analysis], output: str | Path, **kwargs: Any) -> Path:
    """:func:`build_page` written to ``output`` (UTF-8; never over one of ``traces``); returns the path."""
    inputs = [t.path if isinstance(t, Analysis) else t for t in traces]
    refuse_input(output, inputs)
    html = build_page(traces, **kwargs)
    write_file(output, html, inputs=inputs)
    return Path(output)
