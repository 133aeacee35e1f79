"""The renderers, registered by the model they draw and the format they write: one table, filled by
the renderer modules themselves (:func:`renders`), read by the command line, the batch and the library
(:func:`render`) alike.

A renderer is ``render(model, view)``: it returns text, a function that draws on a rich console (at
the terminal's width, or :data:`~.output.LOG_WIDTH` off a terminal), a document written in batches
(:class:`~.json_out.Streamed`), or None when it wrote its output itself (Parquet to ``view.output``).
Registering a (model, format) twice is refused: two renderers of one output would leave which one
runs to import order. The table is filled when the package is imported (:mod:`.catalogue`, which
imports no polars: each entry imports its module when it runs), so the command line builds its
``--format`` choices from it before polars is loaded (``cli`` sets the allocator first); the package
(:mod:`nongemm_trace.report`) answers which renderers there are and renders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: the one word for the rendering meant for a person at a terminal
TERMINAL = "table"

#: the format of a section of the HTML page (``report_page.py`` lists the analyses there): a part of one
#: page, so no format of the command line; the library renders it too (``render(model, "html")``)
PAGE = "html"

#: other names a format is accepted by (existing command lines keep working)
ALIASES = {"text": TERMINAL}

#: what each format is, for ``--help``
FORMAT_HELP = {
    TERMINAL: "the terminal view",
    "json": "the documented JSON contract",
    "csv": "one --table as CSV",
    "parquet": "one --table as Parquet",
    "markdown": "a report for a pull request",
}


@dataclass(frozen=True)
class View:
    """What a rendering is asked for besides its model: ``top`` rows of the terminal's op and kernel
    tables, ``max_ops`` rows of a report's ops in JSON, the ``table`` a file format writes, and where
    a renderer that writes its own file puts it (``output``)."""

    format: str = TERMINAL
    top: int = 15
    max_ops: int | None = None
    table: str | None = None
    output: str | None = None


@dataclass(frozen=True)
class Renderer:
    """One output: ``model`` (the model's ``NAME``) in ``format``. ``dataset``: the pipeline writes it
    itself, into the folder ``-o`` names, while it runs (a batch's Parquet dataset). ``section``: a part
    of a page (:data:`PAGE`), not a whole output: no command offers it as a ``--format``."""

    model: str
    format: str
    render: Callable[[Any, View], Any]
    dataset: bool = False
    section: bool = False


_RENDERERS: dict[tuple[str, str], Renderer] = {}


def renders(model: str, fmt: str, *, dataset: bool = False) -> Callable[[Callable[[Any, View], Any]],
                                                                         Callable[[Any, View], Any]]:
    """Register the decorated function as the renderer of ``model`` in ``fmt``; a second one is refused.
    A renderer in :data:`PAGE` is a section of the HTML page (``Renderer.section``)."""
    def register(fn: Callable[[Any, View], Any]) -> Callable[[Any, View], Any]:
        if (model, fmt) in _RENDERERS:
            raise ValueError(f"a renderer of {model!r} in {fmt!r} is registered already "
                             f"({_RENDERERS[(model, fmt)].render.__qualname__})")
        _RENDERERS[(model, fmt)] = Renderer(model, fmt, fn, dataset, section=fmt == PAGE)
        return fn
    return register


def unregister(model: str, fmt: str) -> Renderer:
    """Take the renderer of ``model`` in ``fmt`` out of the table (a test, or a plugin that adds one for a while)."""
    return _RENDERERS.pop((model, fmt))


def as_json(model: Any, view: View) -> str:
    """The JSON renderer of any model whose document is its ``to_dict()`` (register it for the model)."""
    from .json_out import render_json
    return render_json(model)


def lookup(model: str, fmt: str) -> Renderer | None:
    """The renderer of ``model`` in ``fmt`` (an alias read as its format) among those registered so far."""
    return _RENDERERS.get((model, ALIASES.get(fmt, fmt)))


def table() -> tuple[Renderer, ...]:
    """The renderers registered so far, in the order registered."""
    return tuple(_RENDERERS.values())


def model_name(model: Any) -> str:
    """The name a model is registered under (its class's ``NAME``)."""
    name = getattr(type(model), "NAME", None)
    if not isinstance(name, str):
        raise TypeError(f"{type(model).__name__} is not a result model (no NAME)")
    return name
