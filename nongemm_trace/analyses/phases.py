"""``phases``: a serving run's iterations by phase, the part of the breakdown that answers the
paper's question per phase (prefill, decode, mixed): per phase its iterations, step time, batch
and tokens, and the GEMM / non-GEMM shares of its GPU time (:mod:`nongemm_trace.metrics.phases`,
which the breakdown measures; this analysis reads it from the same report, so the two agree)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .registry import AnalysisSpec, register

if TYPE_CHECKING:  # pragma: no cover
    from ..models.phases import PhasesReport
    from ..pipeline.context import Context
    from ..pipeline.selection import Selection


@dataclass(frozen=True)
class PhasesParams:
    """The phases take nothing but the selection."""


def phases(sel: Selection, ctx: Context, params: PhasesParams) -> PhasesReport:
    """The breakdown's phase rows (GPU time) as their own model: the registry hands it the report it
    measures for ``analyze`` too (the spec's ``breakdown``), so the two agree and it is measured once."""
    from ..models.phases import PhasesReport

    rep = ctx.breakdown
    assert rep is not None, "the phases spec reads the breakdown (breakdown=True)"
    return PhasesReport(sel.trace, rep.phase_engine, list(rep.phases))


SPEC = register(AnalysisSpec(
    "phases", "a serving or generate() run's iterations by phase (prefill, decode, mixed): step time, batch, "
              "tokens and the GEMM / non-GEMM shares of each", PhasesParams, "phases", phases,
    trace_help="a vLLM, SGLang or Hugging Face generate() trace", page=10, breakdown=True))
