"""One trace, loaded, linked and classified once; every analysis reads it.

:class:`Analysis` is the object the CLI, the Python API and the integrations share:
the file is read once, linked and classified once per taxonomy, the per-level activity
tables are kept, and so is each option set's :class:`~nongemm_trace.pipeline.selection.Selection`
(the activities, steps and CPU window every analysis reads), so a report, the launch view,
the FLOP view, ``explain`` and ``annotate`` of the same trace cost one load. Those analyses are functions that
take an analysis (or a path): ``launch_analysis(a)``, ``flops_analysis(a)``,
``explain(a, name)``, ``weak_kernels(a)``, ``annotate(a, out)``, ``compare([a, b])``,
``check(a, …)``; they build on this module, never the other way round. :class:`~.options.Options` holds every
option of the measure stage (the key each selection and report is kept by); :func:`needs_python` is the
rule for what the loader must keep.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .options import SELECTING, AnalysisOptions, Options, keywords_of, typed_at

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from ..classify.taxonomy import Taxonomy
    from ..core.trace import Trace
    from ..link import Linked
    from ..models.report import Report
    from .context import Context
    from .selection import Selection


def needs_python(level: str | None) -> bool:
    """Whether the loader must keep ``python_function`` events: the module level reads them."""
    return level == "module"


def split_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(analysis options, report options)`` of a keyword set such as :func:`nongemm_trace.analyze` takes;
    ``options=`` an :class:`~.options.AnalysisOptions` gives its fields that are set (a keyword given
    beside it wins)."""
    typed = options.pop("options", None)
    if typed is not None:
        if not isinstance(typed, AnalysisOptions):
            raise TypeError(f"options must be an AnalysisOptions, not {type(typed).__name__}")
        options = {**typed.given(), **options}
    opened: dict[str, Any] = {k: options.pop(k) for k in ("taxonomy", "keep_python", "progress", "layer_info")
                              if k in options}
    unknown = [k for k in options if k not in Options.names()]
    if unknown:
        raise TypeError(f"unknown option(s): {', '.join(unknown)} (known: {', '.join(Options.names())}, "
                        f"taxonomy, keep_python, progress, layer_info)")
    return opened, options


class Analysis:
    """A trace and everything derived from it, computed on first use and kept.

    ``taxonomy``: a built-in name, a TOML path or a :class:`Taxonomy`; ``keep_python``: keep
    ``python_function`` events (needed by the module level and ``explain``; asked for later, the
    file is read again once); ``progress(bytes_read, file_size)`` is called while it is read;
    ``layer_info``: a TensorRT profile's layer-information file (else the one next to it by name).
    """

    def __init__(self, path: str | Path, *, taxonomy: str | Path | Taxonomy | None = None, keep_python: bool = False,
                 progress: Callable[[int, int], None] | None = None, layer_info: str | Path | None = None):
        from ..classify.taxonomy import Taxonomy, load_taxonomy

        self.path = path
        self.taxonomy = taxonomy if isinstance(taxonomy, Taxonomy) else load_taxonomy(taxonomy or "default")
        # the loader keeps python_function events when the taxonomy's default level reads them
        self._keep_python = keep_python or needs_python(self.taxonomy.default_level)
        self._progress = progress
        self._layer_info = layer_info
        self._trace: Trace | None = None
        self._linked: Linked | None = None
        self._levels: dict[str, pl.DataFrame] = {}
        self._selections: dict[Options, Selection] = {}
        self._reports: dict[Options, Report] = {}
        #: what analyses keep between calls on this trace (:attr:`Context.memo`)
        self.memo: dict[str, Any] = {}

    def __repr__(self) -> str:
        """One line: the trace, the taxonomy and how far the work has gone (its tables are large)."""
        done = "classified" if self._linked is not None else "read" if self._trace is not None else "not read yet"
        reports = f", reports={len(self._reports)}" if self._reports else ""
        return f"Analysis(path={str(self.path)!r}, taxonomy={self.taxonomy.name!r}, {done}{reports})"

    @classmethod
    def of(cls, source: str | Path | Analysis, options: AnalysisOptions | None = None, *,
           progress: Callable[[int, int], None] | None = None, **old: Any) -> Analysis:
        """``source`` itself when it is an analysis (its taxonomy must be the one ``options`` asks for), else a
        new one under ``options``' taxonomy, ``keep_python`` and ``layer_info`` (``old``: those as keywords,
        as it took them before: deprecated)."""
        given = keywords_of(options, old, "Analysis.of")
        if "progress" in given:  # the keyword form took it among the others
            progress = given.pop("progress")
        opened: dict[str, Any] = {k: given[k] for k in ("taxonomy", "keep_python", "layer_info") if k in given}
        if progress is not None:
            opened["progress"] = progress
        if isinstance(source, Analysis):
            tax = opened.get("taxonomy")
            if tax is not None and not _same_taxonomy(source.taxonomy, tax):
                return cls(source.path, **opened)
            if opened.get("keep_python"):
                source.trace(python=True)
            return source
        return cls(source, **opened)

    # -- the stages, each once ---------------------------------------------
    def trace(self, python: bool = False) -> Trace:
        """The loaded tables (read again with ``python_function`` events when those are asked for)."""
        if self._trace is None or (python and not self._keep_python):
            from ..core import progress
            from ..load import load_trace

            self._keep_python = self._keep_python or python
            progress.stage(f"reading {Path(self.path).name}")
            self._trace = load_trace(self.path, keep_python=self._keep_python,
                                     progress=self._progress or progress.bytes_read, layer_info=self._layer_info)
            self._linked, self._levels = None, {}
        return self._trace

    def linked(self) -> Linked:
        """The linked trace with its ops classified (categories, qdq dataflow, chains)."""
        if self._linked is None:
            from ..classify import link_and_classify
            from ..core import progress

            trace = self.trace()  # read first, when not done yet
            progress.stage(f"linking and classifying {Path(self.path).name}")
            self._linked = link_and_classify(trace, self.taxonomy)
        return self._linked

    def activities(self, level: str) -> pl.DataFrame:
        """Every GPU activity with its category at ``level``."""
        if needs_python(level):
            self.trace(python=True)
        if level not in self._levels:
            from ..classify import classify

            self._levels[level] = classify(self.linked(), self.taxonomy, level)
        return self._levels[level]

    def _options(self, options: AnalysisOptions | None, old: dict[str, Any], where: str) -> Options:
        """The report options of ``options`` (or of the keywords ``old``, the form the stages took before:
        deprecated), resolved against the taxonomy."""
        if old:
            unknown = sorted(set(old) - set(Options.names()))
            if unknown:
                raise TypeError(f"unknown option(s): {', '.join(unknown)} (known: {', '.join(Options.names())})")
            keywords_of(None, old, f"Analysis.{where}")
        base = Options.of(options)
        return Options(**{**{k: getattr(base, k) for k in Options.names()}, **old}).resolved(self.taxonomy, self.path)

    def selection(self, options: AnalysisOptions | None = None, **old: Any) -> Selection:
        """The activities, steps and CPU window every analysis reads under ``options`` (its selection
        options; the metric, the taxonomy and what the loader keeps are not read here), selected once per
        option set. ``old``: those options as keywords, the form it took before (deprecated)."""
        return self._selection(self._options(options, old, "selection").selecting())

    def _selection(self, key: Options) -> Selection:
        if key not in self._selections:
            from .selection import select

            assert key.level is not None  # resolved
            acts = self.activities(key.level)  # reads, links and classifies first, when not done yet
            self._selections[key] = select(self.path, self.taxonomy, self.trace(), self.linked(), acts, key)
        return self._selections[key]

    def context(self, breakdown: Report | None = None, options: AnalysisOptions | None = None,
                **old: Any) -> Context:
        """The narrow view an analysis reads besides its selection (:class:`~.context.Context`);
        ``options``: the options it was asked for (the context keeps their selection options that are set);
        ``breakdown``: the report it reads, if any. ``old``: the options as keywords (deprecated)."""
        from .context import Context

        if old:
            keywords_of(None, old, "Analysis.context")
        given = {k: v for k, v in (options.given() if options is not None else {}).items() if k in SELECTING}
        return Context(self.path, self.taxonomy, {**given, **old}, self.trace, self.linked, self.activities,
                       self.memo, breakdown)

    # -- analyses over it ----------------------------------------------------
    def report(self, options: AnalysisOptions | None = None, **old: Any) -> Report:
        """The GEMM / non-GEMM breakdown report under ``options`` (its metric and selection options).
        ``old``: those options as keywords, the form it took before (deprecated)."""
        opts = self._options(options, old, "report")
        if opts not in self._reports:
            from ..core import progress
            from .measure import measure

            selection = self._selection(opts.selecting())  # reads and links the trace first, when not done yet
            progress.stage(f"measuring {Path(self.path).name}")
            assert opts.metric is not None  # resolved
            self._reports[opts] = measure(selection, opts.metric)
        return self._reports[opts]


def _same_taxonomy(tax: Taxonomy, asked: Any) -> bool:
    from ..classify.taxonomy import Taxonomy

    if isinstance(asked, Taxonomy):
        return asked is tax
    return str(asked) in (tax.name, tax.source)


def open_analysis(source: str | Path | Analysis, options: dict[str, Any],
                  metric: str | None = None) -> tuple[Analysis, AnalysisOptions]:
    """The analysis behind a function that takes a path or an analysis plus its options (as the keyword set
    :func:`~.options.keywords_of` gives); returns it and the options, typed (``metric``: the function's
    default metric, filled in; ``keep_python`` set when the level reads Python events)."""
    opened, report_opts = split_options(dict(options))
    progress = opened.pop("progress", None)
    opened.setdefault("keep_python", needs_python(report_opts.get("level")))
    if metric:
        report_opts.setdefault("metric", metric)
    typed = typed_at(source.path if isinstance(source, Analysis) else source, {**opened, **report_opts})
    return Analysis.of(source, typed, progress=progress), typed


def report_of(source: str | Path | Analysis, options: dict[str, Any], metric: str | None = "gpu") -> Report:
    """The report of a path or an analysis under :func:`analyze`'s keywords (GPU time unless they say)."""
    analysis, typed = open_analysis(source, options, metric)
    return analysis.report(typed)
