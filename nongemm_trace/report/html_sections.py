"""The sections the HTML page lists under each trace's breakdown, one per analysis the registry puts
on the page (``AnalysisSpec.page``): a model's own section where its renderer table has one
(:data:`~.registry.PAGE`), else a generic one, so that a new analysis shows on the page before anyone
writes HTML for it: its terminal view as preformatted text (its JSON document where it has none).
An analysis that refused the trace shows its one-line reason instead."""

from __future__ import annotations

from html import escape
from typing import Any

from .registry import PAGE, TERMINAL, View, lookup, model_name


def listed_section(model: Any, name: str, help: str) -> str:
    """``model``'s section on the page; ``name`` and ``help``: the analysis's, the generic section's title."""
    row = lookup(model_name(model), PAGE)
    if row is not None:
        return str(row.render(model, View(format=PAGE)))
    if lookup(model_name(model), TERMINAL) is not None:
        from . import render
        text = render(model, TERMINAL)
    else:
        from .json_out import render_document
        text = render_document(model.to_dict())
    return f'{_title(name, help)}<pre class="{escape(name)}">{escape(text)}</pre>'


def refused_section(name: str, help: str, line: str) -> str:
    """The section of an analysis that could not read the trace: why, in its one line."""
    return f'{_title(name, help)}<p class="warn">{escape(line)}</p>'


def _title(name: str, help: str) -> str:
    return f'<h3>{escape(name)}</h3><p class="meta">{escape(help)}</p>'
