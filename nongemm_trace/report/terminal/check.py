"""``check``'s verdict as text: each broken limit, or that every limit holds."""

from __future__ import annotations

from ...models.report import Report
from ..escape import printable


def check_text(trace: str, violations: list, rep: Report) -> str:
    """The broken limits first (``FAIL``), then the ones that hold (``ok``), each with its measured value
    and limit; when all hold, a first line says so."""
    gates = getattr(violations, "gates", None)
    held = [g for g in gates if g.ok] if gates is not None else []
    lines = [f"FAIL {printable(v.limit)}: {printable(v.message)}\n" for v in violations]
    if not violations:
        of = {"gpu": "GPU time", "cpu": "CPU time", "paper": "CPU + GPU time"}.get(rep.metric, rep.metric)
        lines.append(f"ok: {printable(trace)} is within every limit "
                     f"(non-GEMM {100 * rep.share('non-GEMM'):.1f} % of {of})\n")
    lines += [f"ok   {printable(g.limit)}: {printable(g.message)}\n" for g in held]
    return "".join(lines)
