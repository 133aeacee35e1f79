"""The options several subcommands share, declared once: the analysis options (taxonomy, level,
unlinked activities, steps) as :class:`~nongemm_trace.pipeline.options.AnalysisOptions` declares them
(type, default and help from its fields), ``-o``, and ``--format`` / ``--table``, whose choices come
from the renderer table (:mod:`nongemm_trace.report.registry`) and the models' tables
(``vocabulary.MODEL_TABLES``)."""

from __future__ import annotations

import argparse
import typing
from dataclasses import fields
from typing import Any

from ..core.fields import flag_settings
from ..pipeline.options import AnalysisOptions, typed_at
from ..report import formats
from ..report.registry import ALIASES, FORMAT_HELP, TERMINAL
from ..vocabulary import MODEL_TABLES


def _declared(name: str) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The flag of :class:`AnalysisOptions` field ``name``: its flags and argparse settings."""
    f = next(f for f in fields(AnalysisOptions) if f.name == name)
    s = flag_settings(f)
    hint = typing.get_type_hints(AnalysisOptions)[name]
    kw: dict[str, Any] = {"help": s["help"]}
    if hint is bool:
        kw["action"] = "store_true"
    else:
        kw["default"] = f.default
        if hint is int:
            kw["type"] = int
        for key in ("metavar", "choices"):
            if s[key]:
                kw[key] = s[key]
    return s["flags"] or ("--" + name.replace("_", "-"),), kw


#: every shared option: its flags and argparse settings, by the name ``argparse`` stores it under
#: (the taxonomy's default spelled out: the command line names the built-in it reads)
OPTIONS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    **{name: _declared(name) for name in ("taxonomy", "level", "drop_unlinked", "step_marker", "skip_steps")},
    "output": (("-o", "--output"), dict(help="write the result to PATH instead of stdout")),
}
OPTIONS["taxonomy"][1]["default"] = "default"

#: the options of every command that analyses a trace
ANALYSIS = ("taxonomy", "level", "drop_unlinked", "step_marker", "skip_steps")
#: which steps count
STEPS = ("step_marker", "skip_steps")


def add(p: argparse.ArgumentParser, *names: str) -> None:
    """The shared options ``names`` on ``p``, as :data:`OPTIONS` declares them."""
    for name in names:
        flags, settings = OPTIONS[name]
        p.add_argument(*flags, **settings)


def add_format(p: argparse.ArgumentParser, *models: str) -> None:
    """``--format``: the formats the renderer table has for ``models`` (each of them), the terminal view
    by default; an alias is accepted too."""
    choices = formats(*models)
    aliases = tuple(a for a, f in ALIASES.items() if f in choices)
    said = "; ".join(f"{f}: {FORMAT_HELP[f]}" for f in choices)
    also = "".join(f" ({a} is the same as {ALIASES[a]})" for a in aliases)
    p.add_argument("--format", choices=choices + aliases, default=TERMINAL, help=f"{said}. Default: {TERMINAL}{also}")


def add_table(p: argparse.ArgumentParser, model: str) -> None:
    """``--table``: which of ``model``'s tables a file format writes (the model's first by default)."""
    tables = MODEL_TABLES[model]
    p.add_argument("--table", choices=tables, default=tables[0],
                   help=f"which table csv/parquet write (default: {tables[0]})")


def analysis_options(args: argparse.Namespace) -> dict:
    """The values of the :data:`ANALYSIS` options, as the library's keyword arguments."""
    return {name: getattr(args, name) for name in ANALYSIS}


def typed_options(args: argparse.Namespace, path: Any = None, **more: Any) -> AnalysisOptions:
    """The :data:`ANALYSIS` options (and ``more``: ``metric``) as the library's typed object; a refused
    value names ``path``, the trace it was given for (as the stages named it)."""
    return typed_at(path, {**analysis_options(args), **more})
