"""pytest plugin: performance expectations on traces as tests (entry point ``pytest11``, so
installing nongemm-trace is enough; ``-p no:nongemm_trace`` turns it off).

The ``nongemm`` fixture::

    def test_bert_stays_gemm_bound(nongemm):
        nongemm.assert_share_at_most("traces/bert.json.gz", "non-GEMM", "45%")
        nongemm.assert_no_regression("traces/bert.json.gz", baseline="baselines/bert.nongemm.json",
                                     max_regression=0.10, categories={"memory": 0.25})

The ``nongemm`` marker (checked after the test body passed; the body may write the trace)::

    @pytest.mark.nongemm("traces/bert.json.gz", max_share={"non-GEMM": 0.45}, max_category_share={"memory": 0.1})
    def test_bert(): ...

Paths are relative to the test file. Every check is :func:`nongemm_trace.analyses.check.check` (the
command line's ``check``; names validated against the taxonomy: a typo is an error, never a
pass); each trace is analysed once per session however many tests read it.
``pytest --nongemm-update-baselines`` writes the current report to each baseline instead of
comparing (a stored report JSON, as ``analyze --format json`` writes; review and commit it).
This module imports nothing heavy until a test uses it: every pytest run loads it.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from .pipeline.options import AnalysisOptions

_CACHE = pytest.StashKey[dict]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nongemm-trace", "performance expectations on profiler traces")
    group.addoption("--nongemm-update-baselines", action="store_true", default=False,
                    help="write the current report as each regression baseline instead of comparing")
    group.addoption("--nongemm-taxonomy", default=None, metavar="NAME|FILE.toml",
                    help="taxonomy of the nongemm fixture and marker (default: default)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "nongemm(trace, **limits): after the test body, check TRACE (relative to the "
                                       "test file) against nongemm-trace check's limits (max_share, "
                                       "max_category_share, max_regression with baseline, max_category_regression)")
    config.stash[_CACHE] = {}


def pytest_report_header(config: pytest.Config) -> str:
    from ._version import __version__

    update = " (updating baselines)" if config.getoption("nongemm_update_baselines") else ""
    return f"nongemm-trace {__version__}{update}"


class NonGemm:
    """What the ``nongemm`` fixture gives a test: the :mod:`nongemm_trace.testing` assertions on
    traces analysed once per session, paths resolved against the test file's folder."""

    def __init__(self, config: pytest.Config, base: Path):
        self.config, self.base = config, base
        self.taxonomy = config.getoption("nongemm_taxonomy")
        self.update_baselines = bool(config.getoption("nongemm_update_baselines"))

    def path(self, trace: str | Path) -> Path:
        p = Path(trace)
        return p if p.is_absolute() else self.base / p

    def analysis(self, trace: str | Path):
        """The session's :class:`~nongemm_trace.pipeline.analysis.Analysis` of ``trace`` (read once)."""
        from .pipeline.analysis import Analysis

        p = self.path(trace)
        if not p.exists():
            raise FileNotFoundError(f"nongemm: no trace at {p}")
        key = (str(p.resolve()), p.stat().st_mtime_ns, self.taxonomy)
        cache = self.config.stash[_CACHE]
        if key not in cache:
            cache[key] = Analysis(p, taxonomy=self.taxonomy)
        return cache[key]

    def report(self, trace: str | Path, options: AnalysisOptions | None = None, **old: Any):
        """The trace's report under ``options``, an :class:`~nongemm_trace.pipeline.options.AnalysisOptions`
        (``old``: its fields as keywords, as it took them before: deprecated)."""
        from .pipeline.analysis import report_of
        from .pipeline.options import keywords_of

        return report_of(self.analysis(trace), keywords_of(options, old, "nongemm.report"), metric=None)

    def run(self, name: str, trace: str | Path, params: Any = None,
            options: AnalysisOptions | dict[str, Any] | None = None, **old: Any):
        """Any registered analysis (``nongemm_trace.analyses.registry``: ``launch``, ``flops``, ``latency``,
        ``whatif``, ``check``, ``shapes``, …) of ``trace``: its model; ``params`` its ``Params`` (or a dict
        of them), ``options`` an :class:`~nongemm_trace.pipeline.options.AnalysisOptions` (or a dict of its
        fields; ``old``: its fields as keywords, as it took them before: deprecated)."""
        from .analyses import run
        from .pipeline.options import AnalysisOptions, keywords_of

        typed = None if options is None else AnalysisOptions.of(options)
        return run(name, self.analysis(trace), params, keywords_of(typed, old, "nongemm.run"))

    # each assertion takes ``options=``, an AnalysisOptions; its fields given as keywords, as they were
    # before, still work until the release core.deprecation.REMOVAL names, with a DeprecationWarning
    def assert_share_at_most(self, trace: str | Path, name: str, limit: float | str, *,
                             options: AnalysisOptions | None = None, **old: Any):
        options, rest = _options(options, old, "nongemm.assert_share_at_most")
        return self.assert_checks(trace, max_share={name: limit}, options=options, **rest)

    def assert_category_share_at_most(self, trace: str | Path, category: str, limit: float | str, *,
                                      options: AnalysisOptions | None = None, **old: Any):
        options, rest = _options(options, old, "nongemm.assert_category_share_at_most")
        return self.assert_checks(trace, max_category_share={category: limit}, options=options, **rest)

    def assert_share_at_least(self, trace: str | Path, name: str, limit: float | str, *,
                              options: AnalysisOptions | None = None, **old: Any):
        from .analyses.check import parse_fraction
        from .pipeline.options import keywords_of, typed_at
        from .testing import assert_share_at_least

        with _refusals_fail():
            typed = typed_at(self.path(trace), keywords_of(options, old, "nongemm.assert_share_at_least"))
            return assert_share_at_least(self.analysis(trace), name, parse_fraction(limit, name), options=typed)

    def assert_unclassified_at_most(self, trace: str | Path, limit: float | str = 0.01, *,
                                    options: AnalysisOptions | None = None, **old: Any):
        options, rest = _options(options, old, "nongemm.assert_unclassified_at_most")
        return self.assert_category_share_at_most(trace, "unclassified", limit, options=options, **rest)

    def assert_no_regression(self, trace: str | Path, *, baseline: str | Path,
                             max_regression: float | str | None = 0.10,
                             categories: dict[str, float | str] | None = None, options: AnalysisOptions | None = None,
                             **limits: Any):
        """GPU time per step (and each category in ``categories``) grew at most so much against
        ``baseline`` (a trace, or a stored report JSON: ``--nongemm-update-baselines`` writes it
        from this trace first); ``limits``: any other limits of :meth:`assert_checks`."""
        options, limits = _options(options, limits, "nongemm.assert_no_regression")
        base = self.path(baseline)
        if self.update_baselines:
            from .core.safe_write import write_file
            from .pipeline.analysis import report_of
            from .report.json_out import render_json

            write_file(base, render_json(report_of(self.analysis(trace), {})), inputs=[self.path(trace)])
        elif not base.exists():
            raise AssertionError(f"nongemm: no baseline at {base} (record it: pytest --nongemm-update-baselines)")
        return self.assert_checks(trace, baseline=base, max_regression=max_regression,
                                  max_category_regression=categories, options=options, **limits)

    def assert_checks(self, trace: str | Path, *, options: AnalysisOptions | None = None, **limits: Any):
        """Any of :func:`nongemm_trace.analyses.check.check`'s limits (fractions or ``"45%"``) in one call,
        under ``options`` (an AnalysisOptions)."""
        from .analyses.check import parse_fraction
        from .testing import assert_checks

        options, limits = _options(options, limits, "nongemm.assert_checks")
        with _refusals_fail():
            for key in ("max_share", "max_category_share", "max_category_regression"):
                if limits.get(key):
                    limits[key] = {k: parse_fraction(v, k) for k, v in limits[key].items()}
            for key in ("max_regression", "min_activities"):
                if isinstance(limits.get(key), str):
                    limits[key] = parse_fraction(limits[key], key)
            if limits.get("baseline") is not None and not isinstance(limits["baseline"], Path):
                limits["baseline"] = self.path(limits["baseline"])
            return assert_checks(self.analysis(trace), options=options, **limits)


def _options(options: AnalysisOptions | None, given: dict[str, Any],
             where: str) -> tuple[AnalysisOptions | None, dict[str, Any]]:
    """``options`` with the analysis options among ``given`` folded in (deprecated), and the limits."""
    from .pipeline.options import options_and_rest

    return options_and_rest(options, given, where)


@contextmanager
def _refusals_fail():
    """A refused input (a baseline with a negative time, a typo in a limit, a truncated trace) fails the
    test with its one line, as ``check`` exits 2 with it: never a pass, and no traceback into the library."""
    from .errors import TraceError

    try:
        yield
    except TraceError as exc:  # "from None": the report shows the one line, not the refusal chained to it
        raise pytest.fail.Exception(f"nongemm: {exc.one_line()}", pytrace=False) from None


@pytest.fixture
def nongemm(request: pytest.FixtureRequest) -> NonGemm:
    """Assertions on traces (paths relative to the test file): see :class:`NonGemm`."""
    return NonGemm(request.config, Path(request.path).parent)


#: the marker's keywords: what each must be (a mapping of names to limits, a path, a limit)
_MAPPINGS = ("max_share", "max_category_share", "max_category_regression")
_PATHS = ("baseline",)


def _check_marker(nodeid: str, trace: Any, kwargs: dict[str, Any]) -> None:
    """A marker's arguments of the wrong kind fail its test in one line (a number as the trace, a
    list where names map to limits), not with a traceback into the library; an unknown keyword is
    the library's one line (:func:`pytest_runtest_call`)."""
    def wrong(problem: str) -> None:
        raise pytest.fail.Exception(f"nongemm: {nodeid}: @pytest.mark.nongemm {problem}", pytrace=False)
    if not isinstance(trace, (str, os.PathLike)):
        wrong(f"TRACE must be a path, not {type(trace).__name__}")
    for key in _MAPPINGS:
        if kwargs.get(key) is not None and not isinstance(kwargs[key], dict):
            wrong(f"{key} must map names to limits ({{'non-GEMM': '10%'}}), not {type(kwargs[key]).__name__}")
    for key in _PATHS:
        if kwargs.get(key) is not None and not isinstance(kwargs[key], (str, os.PathLike)):
            wrong(f"{key} must be a path, not {type(kwargs[key]).__name__}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """After a passing test body, the limits of its ``nongemm`` markers."""
    result = yield
    marks = list(item.iter_markers("nongemm"))
    if marks:
        gate = NonGemm(item.config, Path(item.path).parent)
        for mark in marks:
            args, kwargs = list(mark.args), dict(mark.kwargs)
            trace = kwargs.pop("trace", None) or (args.pop(0) if args else None)
            if trace is None or args:
                raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.nongemm takes one TRACE and limits as keywords")
            _check_marker(item.nodeid, trace, kwargs)
            try:
                if "baseline" in kwargs:
                    gate.assert_no_regression(trace, baseline=kwargs.pop("baseline"),
                                              max_regression=kwargs.pop("max_regression", None),
                                              categories=kwargs.pop("max_category_regression", None), **kwargs)
                else:
                    gate.assert_checks(trace, **kwargs)
            except TypeError as exc:  # an unknown keyword: the library names it
                raise pytest.fail.Exception(f"nongemm: {item.nodeid}: @pytest.mark.nongemm: {exc}",
                                            pytrace=False) from None
    return result
