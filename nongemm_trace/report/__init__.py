"""Renderers, one module per format: ``terminal/`` (rich tables, one module per result model),
``json_out`` (any model's JSON document), ``markdown``, ``files`` (CSV and Parquet) and
``figures`` (matplotlib); ``palette`` holds their colours and ``output`` where a rendering goes.
They read the result models (:mod:`nongemm_trace.models`) and never compute. :mod:`.registry` is the
one table of (model, format) -> renderer, filled by :mod:`.catalogue` (and the renderer modules of
newer models it imports) when this package is imported; :func:`render` draws any model in any of its
formats as text, :func:`formats` and :func:`renderer` answer what the table holds.

``Report`` is importable from here as it always was (its home is :mod:`nongemm_trace.models`); it is
imported on first use, so the command line reads the renderer table before polars loads.
"""

from __future__ import annotations

from typing import Any

from ..vocabulary import SCHEMA_VERSION
from . import catalogue  # noqa: F401  (fills the renderer table)
from .registry import TERMINAL, Renderer, View, lookup, model_name, table

__all__ = ["Report", "SCHEMA_VERSION", "formats", "registered", "render", "renderer"]


def registered() -> tuple[Renderer, ...]:
    """Every renderer of a whole output, in the order registered (a model's formats in the order ``--help``
    lists them); the page's sections (``Renderer.section``) are not outputs of their own."""
    return tuple(r for r in table() if not r.section)


def formats(*models: str) -> tuple[str, ...]:
    """The formats every one of ``models`` has, in table order (the command line's ``--format`` choices:
    a page's section is none)."""
    first = [r.format for r in registered() if r.model == models[0]]
    return tuple(f for f in first if all(lookup(m, f) for m in models))


def renderer(model: str, fmt: str) -> Renderer:
    """The renderer of ``model`` in ``fmt`` (an alias read as its format)."""
    row = lookup(model, fmt)
    if row is None:
        raise ValueError(f"no renderer of {model!r} in {fmt!r} (formats: {', '.join(formats(model))})")
    return row


def render(model: Any, fmt: str = TERMINAL, **view: Any) -> str:
    """``model`` in ``fmt`` as text, for the library (``nongemm_trace.render(report, "markdown")``): the
    terminal view drawn :data:`~.output.LOG_WIDTH` wide; ``view``: :class:`~.registry.View`'s fields
    (``top``, ``max_ops``, ``table``; ``output`` for a format written to a file, whose text is then empty)."""
    import io

    from rich.console import Console

    from .output import LOG_WIDTH

    row = renderer(model_name(model), fmt)
    got = row.render(model, View(format=row.format, **view))
    if isinstance(got, str):
        return got
    if hasattr(got, "text"):  # a document written in batches
        return str(got.text())
    if got is None:
        return ""
    buf = io.StringIO()
    got(Console(file=buf, width=LOG_WIDTH, color_system=None))
    return "\n".join(line.rstrip() for line in buf.getvalue().split("\n"))


def __getattr__(name: str) -> Any:
    if name == "Report":
        from ..models.report import Report
        return Report
    raise AttributeError(f"module 'nongemm_trace.report' has no attribute '{name}'")
