"""The outputs, as a table: one row per (model, format) with the renderer that writes it.

Every command and the batch render through :func:`render`; their ``--format`` choices are the
formats this table lists for their model (:func:`formats`), and ``--table`` the tables the model
declares (``vocabulary.MODEL_TABLES``, ``Model.TABLES``). The terminal view is called
:data:`TERMINAL` everywhere; ``text``, its other name in earlier versions, is accepted as an
alias. A renderer returns text (written to ``-o`` or standard output), a function of a rich
console (drawn at the terminal's width, or as plain text off a terminal), or None when it wrote
its output itself (Parquet). Renderers are imported when they run: the parser stays free of polars.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import TraceError
from .progress import wrote

#: the one word for the rendering meant for a person at a terminal
TERMINAL = "table"

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
class Output:
    """``render(model, args)``: the model in this format. ``dataset``: the pipeline writes this
    format itself, into the folder ``-o`` names, while it runs (a batch's Parquet dataset)."""

    model: str
    format: str
    render: Callable[[Any, argparse.Namespace], Any]
    dataset: bool = False


def _renderer(module: str, name: str) -> Callable[..., Any]:
    """A renderer of :mod:`nongemm_trace.report`, imported when it runs."""
    import importlib

    return getattr(importlib.import_module(f"nongemm_trace.report.{module}"), name)


def _text(module: str, name: str, *positional: str, **keywords: str) -> Callable[[Any, argparse.Namespace], Any]:
    """``name(model, *args.positional, **{k: args.v})``: a renderer whose result is text (or None)."""
    def render(model: Any, args: argparse.Namespace) -> Any:
        return _renderer(module, name)(model, *(getattr(args, a) for a in positional),
                                       **{k: getattr(args, v) for k, v in keywords.items()})
    return render


def _drawn(module: str, name: str, **keywords: str) -> Callable[[Any, argparse.Namespace], Any]:
    """``name(model, console, **{k: args.v})``: a terminal view drawn on a rich console."""
    def render(model: Any, args: argparse.Namespace) -> Callable[[Any], None]:
        f = _renderer(module, name)
        kw = {k: getattr(args, v) for k, v in keywords.items()}
        return lambda console: f(model, console, **kw)
    return render


def _batch_dataset(result: Any, args: argparse.Namespace) -> None:
    wrote(f"wrote the Parquet dataset {args.output} (table=categories|ops|kernels, one part per trace)")


def _check_text(verdict: Any, args: argparse.Namespace) -> str:
    from ..report.terminal.check import check_text
    return check_text(*verdict)


def _check_json(verdict: Any, args: argparse.Namespace) -> str:
    from ..report.json_out import check_json
    return check_json(verdict[0], verdict[1])


def _explain_text(d: Any, args: argparse.Namespace) -> str:
    from ..classify.ladder import RULE_TEXT
    from ..report.terminal.explain import render_explain
    return render_explain(d, RULE_TEXT)


#: every output: (model, format) -> renderer; a model's formats in the order ``--help`` lists them.
#: ``check`` renders (trace, violations, report); ``explain`` and ``weak`` their documents (dicts)
_JSON = _text("json_out", "render_json")
_DOCUMENT = _text("json_out", "render_document")
_TABLE_FILE = _text("files", "write_table", "table", "format", "output")

#: every output: (model, format) -> renderer; a model's formats in the order ``--help`` lists them.
#: ``check`` renders (trace, violations, report); ``explain`` and ``weak`` their documents (dicts)
OUTPUTS = (
    Output("report", TERMINAL, _drawn("terminal.report", "render_report", top="top")),
    Output("report", "json", _text("json_out", "render_json_batches", max_ops="max_ops")),
    Output("report", "csv", _TABLE_FILE), Output("report", "parquet", _TABLE_FILE),
    Output("report", "markdown", _text("markdown", "analyze_markdown", top="top")),
    Output("batch", TERMINAL, _drawn("terminal.batch", "render_batch")), Output("batch", "json", _JSON),
    Output("batch", "csv", _text("files", "batch_csv")),
    Output("batch", "parquet", _batch_dataset, dataset=True),
    Output("batch", "markdown", _text("markdown", "batch_markdown")),
    Output("comparison", TERMINAL, _drawn("terminal.compare", "render_compare")), Output("comparison", "json", _JSON),
    Output("comparison", "markdown", _text("markdown", "compare_markdown")),
    Output("launch", TERMINAL, _drawn("terminal.launch", "render_launch")), Output("launch", "json", _JSON),
    Output("launch", "csv", _text("files", "launch_csv", "table")),
    Output("flops", TERMINAL, _drawn("terminal.flops", "render_flops", top="top")), Output("flops", "json", _JSON),
    Output("flops", "csv", _text("files", "flops_csv", "table")),
    Output("latency", TERMINAL, _drawn("terminal.latency", "render_latency")), Output("latency", "json", _JSON),
    Output("latency", "csv", _text("files", "latency_csv")),
    Output("whatif", TERMINAL, _drawn("terminal.latency", "render_whatif")), Output("whatif", "json", _JSON),
    Output("whatif", "csv", _text("files", "whatif_csv")),
    Output("check", TERMINAL, _check_text), Output("check", "json", _check_json),
    Output("explain", TERMINAL, _explain_text), Output("explain", "json", _DOCUMENT),
    Output("weak", TERMINAL, _text("terminal.explain", "render_weak")), Output("weak", "json", _DOCUMENT),
)
_BY_KEY = {(o.model, o.format): o for o in OUTPUTS}


def formats(*models: str) -> tuple[str, ...]:
    """The formats of ``models`` (every one of them has each), in table order."""
    first = [o.format for o in OUTPUTS if o.model == models[0]]
    return tuple(f for f in first if all((m, f) in _BY_KEY for m in models))


def output(model: str, fmt: str) -> Output:
    """The row for ``model`` in ``fmt`` (an alias read as its format)."""
    return _BY_KEY[(model, ALIASES.get(fmt, fmt))]


def dataset_folder(model_name: str, args: argparse.Namespace, first: str) -> str | None:
    """The folder a pipeline writes its dataset into while it runs (``-o``), when the format asks
    for one (None otherwise); a dataset format without ``-o`` is refused before any work."""
    row = output(model_name, args.format)
    if not row.dataset:
        return None
    if not args.output:
        raise TraceError(first, f"--format {row.format} with several traces needs -o/--output DIR (a Parquet dataset)")
    return args.output


def render(model_name: str, model: Any, args: argparse.Namespace) -> int:
    """``model`` in the format ``args`` asks for, written to ``-o`` (when the command has one) or
    standard output. Every command's output goes through here."""
    from ..report.output import draw, emit, emit_streamed
    from .progress import stop_display

    stop_display()  # the bar goes before the report is written
    row = output(model_name, args.format)
    args.format = row.format
    dest = getattr(args, "output", None)
    got = row.render(model, args)
    if isinstance(got, str):
        emit(got, dest)
    elif hasattr(got, "to_file"):  # a document written in batches (report.json_out.Streamed)
        emit_streamed(got, dest)
    elif got is not None:
        draw(dest, got)
    return 0
