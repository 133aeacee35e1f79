"""JSON rendering: a result model's ``to_dict`` written out. Deterministic (sorted tables, fixed
rounding), so the same input always gives byte-identical output."""

from __future__ import annotations

import json
from typing import Any


def render_json(model: Any, **to_dict: Any) -> str:
    """A result model (``Report``, ``LaunchReport``, ``FlopsReport``, ``Comparison``, ``BatchResult``)
    as its JSON document; ``to_dict`` goes to its ``to_dict`` (``max_ops`` for a report)."""
    return json.dumps(model.to_dict(**to_dict), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def render_document(document: dict[str, Any], *, ascii_only: bool = False) -> str:
    """A document that is not a model (``explain``'s, ``check``'s) as indented JSON."""
    return json.dumps(document, indent=2, ensure_ascii=ascii_only) + "\n"


def check_json(trace: str, violations: list) -> str:
    """``check``'s verdict: the trace, ok, each broken limit, and every limit checked (``gates``: the
    measured value, the limit and whether it held)."""
    doc = {"trace": trace, "ok": not violations, "violations": [v.__dict__ for v in violations]}
    gates = getattr(violations, "gates", None)
    if gates is not None:
        doc["gates"] = [g.__dict__ for g in gates]
    return render_document(doc, ascii_only=True)
