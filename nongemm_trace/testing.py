"""pytest-friendly assertions on traces: unit-test performance expectations in CI.

    from nongemm_trace.testing import assert_share_at_most, assert_no_regression

    def test_model_stays_gemm_bound():
        assert_share_at_most("traces/model.json.gz", "non-GEMM", 0.45)

    def test_no_slowdown():
        assert_no_regression("traces/new.json.gz", baseline="traces/base.json.gz", max_regression=0.10)

Each helper analyses the trace under ``options=``, an :class:`~nongemm_trace.AnalysisOptions`
(its fields given as keywords, as before, still work until the release
:data:`~nongemm_trace.core.deprecation.REMOVAL` names, with a ``DeprecationWarning``),
raises ``AssertionError`` with a message that says what broke and by how much,
and returns the :class:`~nongemm_trace.Report` when the expectation holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .analyses.check import check
from .models.report import Report
from .pipeline.analysis import Analysis
from .pipeline.api import analyze
from .pipeline.options import AnalysisOptions, keywords_of, options_and_rest, typed_at

__all__ = ["assert_share_at_most", "assert_share_at_least", "assert_category_share_at_most",
           "assert_no_regression", "assert_unclassified_at_most", "assert_checks"]


def _fail(trace: str | Path | Analysis, msgs: list[str]) -> None:
    """The verdict first, the trace's file name last: pytest's one-line summary cuts a long line,
    and an absolute path first left no room for what broke."""
    raise AssertionError("; ".join(msgs) + f" (in {Path(str(getattr(trace, 'path', trace))).name})")


def _checked(trace: str | Path | Analysis, options: AnalysisOptions | None, **limits: Any) -> tuple[list, Report]:
    """The broken limits and the report of :func:`~nongemm_trace.analyses.check.check`."""
    result = check(trace, options=options, **limits)
    return result.violations, result.report


def assert_share_at_most(trace: str | Path, name: str, limit: float, *, options: AnalysisOptions | None = None,
                         **old: Any) -> Report:
    """The share of GPU time of a class (``non-GEMM``) or category (``memory``) is at most ``limit``."""
    options, rest = options_and_rest(options, old, "assert_share_at_most")
    violations, rep = _checked(trace, options, max_share={name: limit}, **rest)
    if violations:
        _fail(trace, [v.message for v in violations])
    return rep


def assert_share_at_least(trace: str | Path, name: str, limit: float, *, options: AnalysisOptions | None = None,
                          **old: Any) -> Report:
    """The share of GPU time of a class or category is at least ``limit``."""
    given = keywords_of(options, old, "assert_share_at_least")
    progress = given.pop("progress", None)
    rep = analyze(trace, progress=progress, options=typed_at(getattr(trace, "path", trace), {"metric": "gpu", **given}))
    value = rep.share(name)
    if value < limit:
        _fail(trace, [f"{name} is {100 * value:.1f} % of GPU time, below the expected {100 * limit:.1f} %"])
    return rep


def assert_category_share_at_most(trace: str | Path, category: str, limit: float, *,
                                  options: AnalysisOptions | None = None, **old: Any) -> Report:
    """The share of GPU time of ``category`` is at most ``limit``."""
    options, rest = options_and_rest(options, old, "assert_category_share_at_most")
    violations, rep = _checked(trace, options, max_category_share={category: limit}, **rest)
    if violations:
        _fail(trace, [v.message for v in violations])
    return rep


def assert_unclassified_at_most(trace: str | Path, limit: float = 0.01, *, options: AnalysisOptions | None = None,
                                **old: Any) -> Report:
    """Guard a custom taxonomy: at most ``limit`` of GPU time is unclassified."""
    options, rest = options_and_rest(options, old, "assert_unclassified_at_most")
    return assert_category_share_at_most(trace, "unclassified", limit, options=options, **rest)


def assert_no_regression(trace: str | Path, *, baseline: str | Path, max_regression: float = 0.10,
                         categories: dict[str, float] | None = None, options: AnalysisOptions | None = None,
                         **old: Any) -> Report:
    """GPU time per step grew by at most ``max_regression`` against ``baseline`` (and each
    category in ``categories`` by at most its own limit)."""
    options, rest = options_and_rest(options, old, "assert_no_regression")
    violations, rep = _checked(trace, options, baseline=baseline, max_regression=max_regression,
                               max_category_regression=categories, **rest)
    if violations:
        _fail(trace, [v.message for v in violations])
    return rep


def assert_checks(trace: str | Path, *, options: AnalysisOptions | None = None, **limits: Any) -> Report:
    """Any combination of :func:`nongemm_trace.analyses.check.check`'s limits in one call (``options``: the
    :class:`~nongemm_trace.pipeline.options.AnalysisOptions`; given among the limits, as before: deprecated)."""
    options, limits = options_and_rest(options, limits, "assert_checks")
    violations, rep = _checked(trace, options, **limits)
    if violations:
        _fail(trace, [v.message for v in violations])
    return rep
