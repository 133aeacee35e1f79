"""Where a command's model goes: the renderer the renderer table (:mod:`nongemm_trace.report.registry`)
holds for the model and ``--format``, written to ``-o`` or standard output. Every command and the
batch render through :func:`render`; their ``--format`` choices are their model's formats in that
table, and ``--table`` the tables the model declares (``vocabulary.MODEL_TABLES``, ``Model.TABLES``).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import TraceError
from ..report import renderer
from ..report.registry import TERMINAL, View, model_name
from .progress import wrote

__all__ = ["TERMINAL", "dataset_folder", "render"]


def dataset_folder(model: str, args: argparse.Namespace, first: str) -> str | None:
    """The folder a pipeline writes its dataset into while it runs (``-o``), when the format asks
    for one (None otherwise); a dataset format without ``-o`` is refused before any work."""
    row = renderer(model, args.format)
    if not row.dataset:
        return None
    if not args.output:
        raise TraceError(first, f"--format {row.format} with several traces needs -o/--output DIR (a Parquet dataset)")
    return args.output


def render(model: Any, args: argparse.Namespace) -> int:
    """``model`` in the format ``args`` asks for, written to ``-o`` (when the command has one) or
    standard output. Every command's output goes through here."""
    from ..report.output import draw, emit, emit_streamed
    from .progress import stop_display

    stop_display()  # the bar goes before the report is written
    row = renderer(model_name(model), args.format)
    args.format = row.format
    dest = getattr(args, "output", None)
    if row.dataset:
        wrote(f"wrote the Parquet dataset {dest} (table=categories|ops|kernels, one part per trace)")
        return 0
    got = row.render(model, View(row.format, getattr(args, "top", 15), getattr(args, "max_ops", None),
                                 getattr(args, "table", None), dest))
    if isinstance(got, str):
        emit(got, dest)
    elif hasattr(got, "to_file"):  # a document written in batches (report.json_out.Streamed)
        emit_streamed(got, dest)
    elif got is not None:
        draw(dest, got)
    return 0
