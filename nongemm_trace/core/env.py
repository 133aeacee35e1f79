"""Every ``NONGEMM_*`` environment switch, named, typed and documented once (HTA keeps its environment
options in one module the same way). A module reads a switch through :func:`text` or :func:`is_off`,
which refuse a name not declared here, so a switch cannot be read under a misspelled name and
``tests/test_architecture.py`` checks that no other module reads ``os.environ`` for one. What a value
means (its parsing and the line a bad one gets) stays with the module that uses it; ``docs`` is what
the switch is for."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Switch:
    """One switch: its ``name``, the ``kind`` of value it takes (``off`` for an on/off switch, ``bytes``,
    ``seconds``), its default as text, and what it is for."""

    name: str
    kind: str
    default: str
    docs: str


#: the switches, by name
SWITCHES = {s.name: s for s in (
    Switch("NONGEMM_NATIVE", "off", "on", "off: every C extension path off (the pure-Python reference paths only)"),
    Switch("NONGEMM_FAST_SCAN", "off", "on", "off: the C scanner off (the msgspec path reads Kineto JSON)"),
    Switch("NONGEMM_FAST_SWEEP", "off", "on", "off: the C op-tree sweep off (the polars path nests the ops)"),
    Switch("NONGEMM_READ_AHEAD", "off", "on", "off: no scanning of the first chunks while the command line imports"),
    Switch("NONGEMM_ROW_INDEX", "off", "on", "off: every gather-by-row-number fast path takes its general path "
                                            "(joins), to compare the two"),
    Switch("NONGEMM_SCAN_THREADS", "off", "auto", "off: chunks are scanned by one thread (a batch worker sets it: "
                                                 "the batch already runs a trace per core)"),
    Switch("NONGEMM_CHUNK_BYTES", "bytes", "6291456", "the size of a chunk of a streamed Kineto trace (at least "
                                                     "256), so chunk boundaries can be made to fall inside small "
                                                     "files"),
    Switch("NONGEMM_MAX_MEMORY", "bytes", "3/4 of the memory available", "the memory budget of one analysis: a "
                                                                         "load past it is refused in one line"),
    Switch("NONGEMM_MAX_TRACE_BYTES", "bytes", "1/3 of the memory available", "the most JSON held whole, and the "
                                                                             "most of a stream read"),
    Switch("NONGEMM_PROGRESS_S", "seconds", "5", "seconds between two progress lines off a terminal (inf: none)"),
)}

#: the values that turn an on/off switch off
OFF = ("0", "off", "false", "no")


def _declared(name: str) -> Switch:
    if name not in SWITCHES:
        raise KeyError(f"{name} is not a switch declared in nongemm_trace/core/env.py")
    return SWITCHES[name]


def text(name: str) -> str:
    """The switch's value as set (stripped; empty when unset)."""
    _declared(name)
    return os.environ.get(name, "").strip()


def is_off(name: str) -> bool:
    """An on/off switch set to ``off`` (``0``, ``false``, ``no``)."""
    if _declared(name).kind != "off":
        raise KeyError(f"{name} is not an on/off switch")
    return text(name).lower() in OFF


def assign(name: str, value: str) -> None:
    """Set the switch for this process and the workers it starts."""
    _declared(name)
    os.environ[name] = value
