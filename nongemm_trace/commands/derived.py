"""The subcommand of a registered analysis, built from its spec (:mod:`nongemm_trace.analyses.registry`):
the trace, ``-o``, ``--format`` (its model's formats in the renderer table), ``--table`` (the model's
tables), one flag per field of its ``Params`` (the field's type, default and help), the selection
options it takes (``commands/options.py``), ``--top`` where its spec says what it counts (``top``), and
any figure it can draw (:mod:`.figures`). Running it is
the same for every analysis: its spec's ``run`` on the trace, the model rendered, the spec's exit status.
No analysis has a module of its own here."""

from __future__ import annotations

import argparse
import typing
from collections.abc import Callable
from dataclasses import MISSING
from typing import Any

from ..analyses.registry import AnalysisSpec
from ..core.fields import documented
from ..vocabulary import MODEL_TABLES
from . import figures, options
from .common import finished
from .outputs import render


def _scalar(hint: Any) -> Any:
    """The type argparse converts a flag's text to: ``float`` of ``float | None``, ``str`` otherwise."""
    args = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
    return args[0] if args[0] in (int, float) else str


def add_params(p: argparse.ArgumentParser, params: type) -> None:
    """One flag per field of ``params`` (``--name-with-dashes``), as its :func:`~nongemm_trace.core.fields.option`
    declares it."""
    hints = typing.get_type_hints(params)
    for f, s in documented(params):
        flags = s["flags"] or ("--" + f.name.replace("_", "-"),)
        kw: dict[str, Any] = {"dest": f.name, "help": s["help"].replace("%", "%%")}
        if s["metavar"]:
            kw["metavar"] = s["metavar"]
        if hints[f.name] is bool:
            p.add_argument(*flags, action="store_true", **kw)
            continue
        if s["repeat"] or s["many"]:
            kw.update(default=None if s["parse"] else [])
            kw["action" if s["repeat"] else "nargs"] = "append" if s["repeat"] else "+"
        else:
            kw.update(default=None if s["parse"] else (None if f.default is MISSING else f.default))
            if not s["parse"]:
                kw["type"] = _scalar(hints[f.name])
        if s["choices"]:
            kw["choices"] = s["choices"]
        p.add_argument(*flags, **kw)


def params_from(params: type, args: argparse.Namespace) -> Any:
    """The ``Params`` of ``args``: each field's value as parsed (through the field's ``parse``; a repeated
    flag as a tuple)."""
    values = {}
    for f, s in documented(params):
        value = getattr(args, f.name)
        if s["parse"]:
            value = s["parse"](value)
        elif s["repeat"] or s["many"]:
            value = tuple(value)
        values[f.name] = value
    return params(**values)


def arguments_of(spec: AnalysisSpec) -> Callable[[argparse.ArgumentParser], None]:
    def arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("trace", help=spec.trace_help)
        options.add_format(p, spec.model)
        if spec.model in MODEL_TABLES:
            options.add_table(p, spec.model)
        options.add(p, "output")
        add_params(p, spec.params)
        figures.add(p, spec.name)
        if spec.top:
            p.add_argument("--top", type=int, default=15, metavar="N", help=spec.top)
        options.add(p, "taxonomy", *spec.selecting)
    return arguments


def run_of(spec: AnalysisSpec) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        """The analysis, with the trace's first chunks read and scanned on the other core while the
        library imports (the tables the analysis's level keeps); once its output is written, the
        process may exit without freeing the trace's tables one by one (``cli.entry``)."""
        from ..load import start_read_ahead, stop_read_ahead
        from ..pipeline.analysis import needs_python

        if start_read_ahead(args.trace, needs_python(getattr(args, "level", None))):
            try:
                code = _run(spec, args)
            finally:
                stop_read_ahead()  # not taken: the command stopped before loading
        else:
            code = _run(spec, args)
        finished["single_analysis"] = code == 0
        return code
    return run


def _run(spec: AnalysisSpec, args: argparse.Namespace) -> int:
    from ..analyses import run
    from ..core.remote import local_path, named_as

    figures.check(args, spec.name)
    opts = {"taxonomy": args.taxonomy, **{name: getattr(args, name) for name in spec.selecting}}
    with local_path(args.trace) as local:  # a URL: fetched, bounded, removed after the analysis
        model = run(spec.name, local, params_from(spec.params, args), opts)
    named_as(model, local, args.trace)
    figures.draw(args, spec.name, model)
    render(model, args)
    return spec.status(model) if spec.status else 0
