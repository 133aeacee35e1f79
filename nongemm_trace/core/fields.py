"""Typed options that document themselves: a dataclass field made by :func:`option` carries the help
of its command-line flag, so one declaration is the library's parameter (typed, with its default),
the flag (``--name-with-dashes``) and its ``--help`` text. The command line builds its parser from
the fields (:mod:`nongemm_trace.commands.derived`); nothing here imports argparse."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

#: the metadata key a field's flag settings are kept under
FLAG = "nongemm_flag"


def option(default: Any, help: str, *, metavar: str | None = None, choices: tuple[str, ...] | None = None,
           repeat: bool = False, many: bool = False, parse: Callable[[Any], Any] | None = None,
           flags: tuple[str, ...] = ()) -> Any:
    """A field with its flag's ``help``: ``metavar`` and ``choices`` as argparse takes them; ``repeat``: the
    flag may be given several times, ``many``: it takes one or more values (either way the value is a
    tuple); ``parse``: turns what the command line gave into the field's value (``"45%"`` -> 0.45), where
    the library takes the value itself; ``flags``: the flags when not ``--name-with-dashes``."""
    meta = {FLAG: {"help": help, "metavar": metavar, "choices": choices, "repeat": repeat, "many": many,
                   "parse": parse, "flags": flags}}
    return dataclasses.field(default=default, metadata=meta)


def flag_settings(f: dataclasses.Field) -> dict[str, Any]:
    """The flag settings :func:`option` stored on field ``f`` (empty for a field made otherwise)."""
    return dict(f.metadata.get(FLAG, {}))


def documented(cls: type) -> list[tuple[dataclasses.Field, dict[str, Any]]]:
    """Each field of dataclass ``cls`` with its flag settings; a field without help is refused (every
    option says what it does)."""
    out = []
    for f in dataclasses.fields(cls):
        settings = flag_settings(f)
        if not settings.get("help"):
            raise TypeError(f"{cls.__name__}.{f.name} has no help: declare it with core.fields.option")
        out.append((f, settings))
    return out
