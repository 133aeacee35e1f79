"""``nongemm-trace report TRACE… -o report.html``: one HTML page to share.

Each trace is opened once (:class:`~nongemm_trace.pipeline.analysis.Analysis`); its report, the
analyses the registry lists on the page and, for several traces, the comparison all read that one
load. The page names none of those analyses: it draws, under each trace's breakdown, a section for
every registered analysis whose spec gives it a place on the page (``AnalysisSpec.page``: launch and
the serving phases today) and that applies to the trace, by the model's page renderer or a generic
one (:mod:`nongemm_trace.report.html_sections`). The page itself is drawn by
:mod:`nongemm_trace.report.html` (self-contained: no network).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .analyses.compare import compare
from .analyses.registry import listed, run_listed
from .core.safe_write import refuse_input, write_file
from .errors import OptionError, TraceError
from .pipeline.analysis import Analysis, split_options
from .pipeline.options import AnalysisOptions, keywords_of, typed_at
from .report.html import render_html
from .report.html_collectives import collectives_section
from .report.html_sections import listed_section, refused_section
from .runs.batch import rank_entry, rank_of, ranks


def build_page(traces: list[str | Path | Analysis], *, top: int = 15, short_us: float = 10.0, per_step: bool = False,
               title: str | None = None, params: dict[str, Any] | None = None, options: AnalysisOptions | None = None,
               **old: Any) -> str:
    """The HTML page of ``traces`` (paths or analyses) under ``options``, the
    :class:`~nongemm_trace.pipeline.options.AnalysisOptions` (its ``metric`` applies to the breakdown; the
    listed analyses and the comparison are of GPU time; ``old``: its fields as keywords, deprecated).
    ``params``: by analysis name, the parameters of a listed analysis (``short_us``: launch's)."""
    if not traces:
        raise TraceError(None, "report needs at least one TRACE")
    if top < 0:
        raise OptionError(None, f"top must be >= 0, not {top}", "top")
    opened, report_opts = split_options(keywords_of(options, old, "build_page"))
    progress = opened.pop("progress", None)
    first = traces[0].path if isinstance(traces[0], Analysis) else traces[0]
    typed = typed_at(first, {**opened, **report_opts})
    analyses = [Analysis.of(t, typed, progress=progress) for t in traces]
    selecting = {k: v for k, v in report_opts.items() if k != "metric"}
    reports = [a.report(typed) for a in analyses]
    on_page = listed("page")
    sections = [run_listed(a, on_page, selecting, {"launch": {"short_us": short_us}, **(params or {})})
                for a in analyses]
    # the ranks' time lines are their launch analyses' (none for a profile with no timeline)
    launches = [next((m for s, m in got if s.name == "launch" and not isinstance(m, TraceError)), None)
                for got in sections]
    comparison = compare(analyses, per_step=per_step, options=AnalysisOptions(**selecting)) \
        if len(analyses) > 1 else None
    # distributed ranks: the rank table and the straggler, as ``analyze RANK0 RANK1 …`` prints them
    entries = [rank_entry(r, lr.summary) for r, lr in zip(reports, launches)
               if lr is not None and rank_of(r) is not None]
    if title is None:
        title = f"nongemm-trace: {Path(str(reports[0].trace)).name}" if len(reports) == 1 else \
            f"nongemm-trace: {len(reports)} traces"
    view = ranks(entries)
    calls = _collectives(analyses, reports, selecting, view)
    return render_html(reports, None, comparison, top=top, title=title, ranks=view,
                       after_ranks=collectives_section(calls, (view or {}).get("ranks") or []),
                       after_report=["".join(refused_section(s.name, s.help, m.one_line()) if isinstance(m, TraceError)
                                             else listed_section(m, s.name, s.help) for s, m in got)
                                     for got in sections])


def _collectives(analyses: list[Analysis], reports: list, options: dict[str, Any],
                 view: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The collectives matched across the ranks on the page (as ``analyze RANK0 RANK1 --format json``
    lists them), each rank's row of the rank table given its per-rank figures; none without ranks."""
    if view is None:
        return []
    from .analyses.collectives import collective_calls
    from .devices.links import link_of
    from .runs.collectives import CALLS_KEY, collectives_view, worker_calls

    got = [{"rank": rank_of(r), CALLS_KEY: worker_calls(collective_calls(a, AnalysisOptions(**options)),
                                                        link_of(r.metadata.get("device")))}
           for a, r in zip(analyses, reports) if rank_of(r) is not None]
    calls, per_rank = collectives_view(got)
    for row in view["ranks"]:
        row["collectives"] = per_rank.get(row["rank"])
    return calls


def write_page(traces: list[str | Path | Analysis], output: str | Path, *, top: int = 15, short_us: float = 10.0,
               per_step: bool = False, title: str | None = None, params: dict[str, Any] | None = None,
               options: AnalysisOptions | None = None, **old: Any) -> Path:
    """:func:`build_page` written to ``output`` (UTF-8; never over one of ``traces``); returns the path.
    ``old``: the analysis options as keywords, as it took them before (deprecated)."""
    inputs = [t.path if isinstance(t, Analysis) else t for t in traces]
    refuse_input(output, inputs)
    options = AnalysisOptions(**keywords_of(options, old, "write_page")) if old else options
    html = build_page(traces, top=top, short_us=short_us, per_step=per_step, title=title, params=params,
                      options=options)
    write_file(output, html, inputs=inputs)
    return Path(output)
