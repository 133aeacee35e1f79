"""Regression gates: limits on shares and on GPU-time regressions against a baseline.

``check`` returns the list of broken limits (empty when all hold); the CLI turns
a non-empty list into exit code 1, and :mod:`nongemm_trace.testing` into an
``AssertionError``. Shares are of GPU time; regressions compare GPU time per step
(each trace divided by its own step count; whole traces when there are no steps).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from .api import analyze
from .classify.taxonomy import CATEGORIES, CLASSES
from .errors import TraceError
from .report.model import Report


@dataclass(frozen=True)
class Violation:
    limit: str
    value: float
    allowed: float
    message: str


def parse_fraction(text: str, where: str = "limit") -> float:
    """``0.45``, ``45%`` or ``45 %`` -> 0.45."""
    t = str(text).strip().replace(" ", "")
    try:
        return float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise TraceError(None, f"{where}: {text!r} is not a fraction (0.45) or a percentage (45%)") from None


def parse_named(items: list[str] | None, where: str) -> dict[str, float]:
    out = {}
    for it in items or []:
        if "=" not in it:
            raise TraceError(None, f"{where} wants NAME=VALUE, not {it!r}")
        k, v = it.split("=", 1)
        out[k.strip()] = parse_fraction(v, where)
    return out


def _validate(limits: dict[str, float] | None, known: tuple[str, ...], what: str, share: bool) -> None:
    for name, value in (limits or {}).items():
        if name not in known:
            raise TraceError(None, f"{what}: unknown name {name!r} (known: {', '.join(known)})")
        if share and not 0.0 <= value <= 1.0:
            raise TraceError(None, f"{what}: the limit for {name} is {value:g}, not a share between 0 and 1")


def _per_step(rep: Report, ns: float) -> float:
    return ns / rep.steps.height if rep.steps.height else ns


def _cat_ns(rep: Report, cat: str) -> int:
    return int(rep.kernels.filter(pl.col("category") == cat)["dur_ns"].sum())


def check(
    trace: str | Path,
    *,
    baseline: str | Path | None = None,
    max_share: dict[str, float] | None = None,
    max_category_share: dict[str, float] | None = None,
    max_regression: float | None = None,
    max_category_regression: dict[str, float] | None = None,
    **options: Any,
) -> tuple[list[Violation], Report]:
    """Check ``trace`` against the limits; ``options`` go to :func:`nongemm_trace.analyze`. A limit
    that names no class or category, a share limit outside 0..1, or no limit at all is refused:
    a typo must never turn a gate off."""
    _validate(max_share, CLASSES + CATEGORIES, "max_share", share=True)
    _validate(max_category_share, CATEGORIES, "max_category_share", share=True)
    _validate(max_category_regression, CATEGORIES, "max_category_regression", share=False)
    if not (max_share or max_category_share or max_regression is not None or max_category_regression):
        raise TraceError(trace, "no limit to check (give max_share, max_category_share, max_regression or "
                                "max_category_regression)")
    options.setdefault("metric", "gpu")
    rep = analyze(trace, **options)
    of = {"gpu": "GPU time", "cpu": "CPU time", "paper": "CPU + GPU time"}.get(rep.metric, rep.metric)
    out: list[Violation] = []
    for name, allowed in (max_share or {}).items():
        value = rep.share(name)
        if value > allowed:
            out.append(Violation(f"max-share {name}", value, allowed,
                                 f"{name} is {100 * value:.1f} % of {of}, above the limit of {100 * allowed:.1f} %"))
    for name, allowed in (max_category_share or {}).items():
        value = rep.share(name)
        if value > allowed:
            out.append(Violation(f"max-category-share {name}", value, allowed,
                                 f"category {name} is {100 * value:.1f} % of {of}, above the limit of "
                                 f"{100 * allowed:.1f} %"))
    if (max_regression is not None or max_category_regression) and baseline is None:
        raise TraceError(trace, "--max-regression needs --baseline BASE")
    if baseline is not None:
        base = analyze(baseline, **options)
        if max_regression is not None:
            b, n = _per_step(base, base.gpu_time_ns), _per_step(rep, rep.gpu_time_ns)
            change = (n - b) / b if b else 0.0
            if change > max_regression:
                out.append(Violation("max-regression", change, max_regression,
                                     f"GPU time per step rose {100 * change:.1f} % ({b / 1000:,.1f} -> {n / 1000:,.1f} us), "
                                     f"above the limit of {100 * max_regression:.1f} %"))
        for cat, allowed in (max_category_regression or {}).items():
            b, n = _per_step(base, _cat_ns(base, cat)), _per_step(rep, _cat_ns(rep, cat))
            if b == 0:
                change = float("inf") if n > 0 else 0.0
            else:
                change = (n - b) / b
            if change > allowed:
                grew = "appeared" if b == 0 else f"rose {100 * change:.1f} %"
                out.append(Violation(f"max-category-regression {cat}", change, allowed,
                                     f"{cat} GPU time per step {grew} ({b / 1000:,.1f} -> {n / 1000:,.1f} us), above the "
                                     f"limit of {100 * allowed:.1f} %"))
    return out, rep
