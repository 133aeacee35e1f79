"""``check``'s verdict as text: each broken limit, or that every limit holds."""

from __future__ import annotations

from ...models.report import Report
from ..escape import printable


def check_text(trace: str, violations: list, rep: Report) -> str:
    if violations:
        return "".join(f"FAIL {printable(v.limit)}: {printable(v.message)}\n" for v in violations)
    of = {"gpu": "GPU time", "cpu": "CPU time", "paper": "CPU + GPU time"}.get(rep.metric, rep.metric)
    return f"ok: {printable(trace)} is within every limit (non-GEMM {100 * rep.share('non-GEMM'):.1f} % of {of})\n"
