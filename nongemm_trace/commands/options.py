"""The options several subcommands share, declared once: the analysis options (taxonomy, level,
unlinked activities, steps), ``-o``, and ``--format`` / ``--table``, whose choices come from the
output table (:mod:`.outputs`) and the models' tables (``vocabulary.MODEL_TABLES``)."""

from __future__ import annotations

import argparse
from typing import Any

from ..vocabulary import LEVELS, MODEL_TABLES
from .outputs import ALIASES, FORMAT_HELP, TERMINAL, formats

#: every shared option: its flags and argparse settings, by the name ``argparse`` stores it under
OPTIONS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "taxonomy": (("--taxonomy",), dict(default="default",
                                       help="built-in taxonomy name or a .toml file (default: default)")),
    "level": (("--level",), dict(choices=tuple(LEVELS), default=None,
                                 help=f"{'; '.join(f'{k}: {v}' for k, v in LEVELS.items())} (with_stack "
                                      "traces). Default: the taxonomy's")),
    "drop_unlinked": (("--drop-unlinked",), dict(action="store_true",
                                                 help="leave out GPU activities with no launch call in the file "
                                                      "(launched before profiling)")),
    "step_marker": (("--step-marker",), dict(metavar="NAME", help="name of the ranges that mark steps (default: "
                                             "ProfilerStep#N, else the most repeated top-level annotation)")),
    "skip_steps": (("--skip-steps",), dict(type=int, default=0, metavar="N", help="drop the first N steps (warm-up)")),
    "output": (("-o", "--output"), dict(help="write the result to PATH instead of stdout")),
}

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
    """``--format``: the formats the output table has for ``models`` (each of them), the terminal view
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
