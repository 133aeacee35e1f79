"""Performance gates for a training run: the limits of ``nongemm-trace check``, checked on the
trace a callback writes, failing the run or warning.

The limits are validated against the taxonomy when the gate is made (before training
starts): a misspelt class or category, a share outside 0..1 or a gate with no limit fails
at once rather than after an hour of training. The check itself is
:func:`nongemm_trace.analyses.check.check`, the same code as the command line's.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analyses.check import MIN_ACTIVITIES, Violation, check, parse_fraction, validate_limits
from ..core.fields import option
from ..errors import OptionError
from ..pipeline.analysis import Analysis
from ..pipeline.options import AnalysisOptions, keywords_of

ON_VIOLATION = ("raise", "warn")


class PerformanceGateError(AssertionError):
    """A gate's limit was broken (``on_violation="raise"``): the training run fails with it."""

    def __init__(self, trace: str | Path, violations: list[Violation]):
        self.trace = str(trace)
        self.violations = violations
        super().__init__("; ".join(v.message for v in violations) + f" (in {Path(str(trace)).name})")


class PerformanceGateWarning(UserWarning):
    """A gate's limit was broken (``on_violation="warn"``): the run goes on, the warning says what broke."""


def _fractions(limits: dict[str, Any] | None) -> dict[str, float] | None:
    """``{"non-GEMM": "45%"}`` or ``{"non-GEMM": 0.45}`` -> fractions."""
    return {k: parse_fraction(v, k) for k, v in limits.items()} if limits else None


@dataclass(frozen=True)
class Gates:
    """Limits on the profiled steps (as ``nongemm-trace check``): shares of the run's time per class
    or category, and GPU time per step against a ``baseline`` (a trace, or a stored report JSON);
    with a baseline, ``min_activities`` is the floor of GPU activities per step (a share of the
    baseline's, default 25 %: :func:`~nongemm_trace.analyses.check.activity_floor`). Each limit is a
    fraction or a text such as ``"45%"``, read when the gates are made (a bad one fails then)."""

    max_share: dict[str, float | str] | None = option(None, "the largest share of a class or category, e.g. "
                                                            "{'non-GEMM': '45%'}")
    max_category_share: dict[str, float | str] | None = option(None, "the largest share of a taxonomy category, e.g. "
                                                                     "{'memory': 0.2}")
    max_regression: float | str | None = option(None, "GPU time per step against the baseline, e.g. '10%'")
    max_category_regression: dict[str, float | str] | None = option(
        None, "a category's GPU time per step against the baseline, e.g. {'memory': '5%'}")
    baseline: str | Path | None = option(None, "the trace to compare with, or its stored report (analyze --format "
                                               "json)")
    on_violation: str = option("raise", "raise: a broken limit fails the run (PerformanceGateError); warn: a "
                                        "PerformanceGateWarning, and training goes on", choices=ON_VIOLATION)
    min_activities: float | str | None = option(None, "with a baseline: the floor of GPU activities per step, a share "
                                                      "of the baseline's (default 25%)")
    #: a distributed rank's gates (analyses/comm_gates.py): exposed communication's share of the busy
    #: GPU time, and the largest collective arrival skew (us) against the other ranks' traces ``ranks``
    max_exposed_communication: float | str | None = option(None, "communication no computation hid, as a share of "
                                                                 "the busy GPU time, e.g. '10%'")
    max_skew_us: float | None = option(None, "with ranks: the largest arrival skew of a collective across the "
                                             "ranks, in us")
    ranks: list[str | Path] | None = option(None, "the other ranks' traces of the run (max_skew_us)")

    def __post_init__(self) -> None:
        if self.on_violation not in ON_VIOLATION:
            raise OptionError(None, f"on_violation must be one of {', '.join(ON_VIOLATION)}, not {self.on_violation!r}",
                              "on_violation")
        self.limits, self.floor  # noqa: B018 - every limit read now: a bad one fails when the gates are made

    @property
    def limits(self) -> dict[str, Any]:
        """The limits as fractions, as :func:`~nongemm_trace.analyses.check.check` takes them."""
        return {
            "max_share": _fractions(self.max_share),
            "max_category_share": _fractions(self.max_category_share),
            "max_regression": None if self.max_regression is None else parse_fraction(self.max_regression,
                                                                                       "max_regression"),
            "max_category_regression": _fractions(self.max_category_regression),
            "max_exposed_communication": None if self.max_exposed_communication is None
            else parse_fraction(self.max_exposed_communication, "max_exposed_communication"),
            "max_skew_us": self.max_skew_us,
        }

    @property
    def floor(self) -> float:
        """The floor of GPU activities per step, as a fraction of the baseline's."""
        return MIN_ACTIVITIES if self.min_activities is None else parse_fraction(self.min_activities, "min_activities")

    @property
    def any(self) -> bool:
        """Whether any limit is given (the floor of activities is part of a baseline gate, not a limit)."""
        return any(v is not None and v != {} for v in self.limits.values())

    def validate(self, taxonomy: Any) -> None:
        """Check the names against ``taxonomy`` (a :class:`Taxonomy`) and that the baseline exists."""
        validate_limits(taxonomy, baseline=self.baseline, min_activities=self.floor, ranks=self.ranks, **self.limits)
        if self.baseline is not None and not Path(self.baseline).exists():
            raise OptionError(self.baseline, "the baseline does not exist", "baseline")

    def apply(self, analysis: Analysis, options: AnalysisOptions | None = None, **old: Any) -> list[Violation]:
        """Check the analysed trace under ``options`` (``old``: its fields as keywords, deprecated); raise
        :class:`PerformanceGateError` or warn as asked, and write ``NAME.check.json`` next to the trace
        (what ``check --format json`` prints)."""
        from dataclasses import replace

        from ..core.safe_write import write_file
        from ..report import render

        typed = AnalysisOptions(**keywords_of(options, old, "Gates.apply"))
        result = check(analysis, baseline=self.baseline, min_activities=self.floor, ranks=self.ranks,
                       **self.limits, options=typed)
        violations = result.violations
        out = Path(str(analysis.path))
        write_file(out.with_name(out.name.split(".json")[0] + ".check.json"),
                   render(replace(result, trace=str(out)), "json"), inputs=[out, self.baseline])
        if violations and self.on_violation == "warn":
            warnings.warn(PerformanceGateWarning("; ".join(v.message for v in violations) + f" (in {out.name})"),
                          stacklevel=2)
        return violations
