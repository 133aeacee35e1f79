"""JSON rendering: deterministic (sorted tables, fixed rounding), so the same input
always gives byte-identical output."""

from __future__ import annotations

import json

from ..models.report import Report


def render_json(report: Report, max_ops: int | None = None) -> str:
    return json.dumps(report.to_dict(max_ops=max_ops), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
