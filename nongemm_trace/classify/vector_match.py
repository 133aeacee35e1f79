"""Whether a taxonomy's name patterns match each of many names, over the whole column at once.

A trace can hold a million distinct op names (``ProfilerStep#N``, one per step): Python's ``re``
searching one joined alternation of 43 op patterns costs 3-9 us a name, 17 s for two such
searches over a million. polars' regular expressions (Rust's ``regex`` crate) search a column in
parallel, in well under a second, but their language is not Python's everywhere. They are used
only where both give the same answer, by construction:

* the names are printable ASCII (``\\x20``-``\\x7e``): there ``\\w``, ``\\d``, ``\\s`` and ``\\b`` mean
  the same in both (the Unicode tables and ``\\s``' ``\\x1c``-``\\x1f`` differ beyond), and no name
  ends in a line break (Python's ``$`` also matches before one);
* the patterns are printable ASCII with default flags, use no escape but punctuation (not
  ``\\<``, ``\\>``: word boundaries in Rust, literals in Python) and ``\\d \\D \\w \\W \\s \\S \\b \\B \\A
  \\n \\t \\r \\f \\v``, no group syntax but ``(?:`` and ``(?P<``, no ``[[``, ``&&``, ``--``, ``~~``
  (Rust's class set operations and POSIX classes, literals in Python) and no ``{,`` (a repeat in
  Python, an error in Rust), and compile in Rust (lookarounds and backreferences do not).

Every other name, or every name under other patterns, is searched by Python's ``re`` as before
(``tests/test_vector_match.py`` compares both ways on the shared traces' names and random ones).
"""

from __future__ import annotations

import re

import polars as pl

from .matcher import AnyPattern

#: escapes that mean the same in Python's ``re`` and Rust's ``regex`` on printable ASCII text
_SAME_ESCAPES = frozenset("dDwWsSbBAntrfv") | frozenset(r"""\.^$*+?()[]{}|-/#&~ :;,'"!@%=_`""")
_RUST_ONLY = re.compile(r"\[\[|&&|--|~~|\{,|\\b\{|\(\?(?!:|P<)")
_PRINTABLE = r"^[\x20-\x7e]*$"


def rust_source(patterns: AnyPattern) -> str | None:
    """One alternation of ``patterns`` in Rust's syntax with Python's meaning on printable ASCII
    names, or None where a pattern may mean something else there (see the module)."""
    if not patterns.patterns:
        return None
    default = re.compile("").flags
    for p in patterns.patterns:
        src = p.pattern
        if p.flags != default or not isinstance(src, str) or re.fullmatch(_PRINTABLE, src) is None:
            return None
        if _RUST_ONLY.search(src) or any(src[i + 1:i + 2] not in _SAME_ESCAPES
                                         for i in _escapes(src)):
            return None
    joined = "|".join(f"(?:{p.pattern})" for p in patterns.patterns)
    try:
        pl.Series([""]).str.contains(joined)
    except pl.exceptions.PolarsError:  # lookarounds, backreferences, a repeat Rust refuses
        return None
    return joined


def _escapes(src: str) -> list[int]:
    """The positions of the backslashes that begin an escape (``\\\\`` is one escape)."""
    out, i = [], 0
    while i < len(src):
        if src[i] == "\\":
            out.append(i)
            i += 2
        else:
            i += 1
    return out


def any_match(patterns: AnyPattern, names: pl.Series) -> pl.Series:
    """Whether any of ``patterns`` matches each of ``names`` (text): :meth:`.AnyPattern.any` of
    each, by polars where that gives the same answer, else by Python's ``re`` (its loop in C)."""
    names = names.cast(pl.String).fill_null("")
    if not patterns.patterns:
        return pl.Series(names.name, [False] * len(names), dtype=pl.Boolean)
    source = rust_source(patterns)
    frame = pl.DataFrame({"name": names})
    if source is None:
        plain = pl.Series("plain", [False] * len(names), dtype=pl.Boolean)
        fast = pl.Series("fast", [False] * len(names), dtype=pl.Boolean)
    else:
        got = frame.select(pl.col("name").str.contains(_PRINTABLE).alias("plain"),
                           pl.col("name").str.contains(source).alias("fast"))
        plain, fast = got["plain"], got["fast"]
    rest = names.filter(~plain).to_list()
    if patterns.joined is not None:
        slow = list(map(bool, map(patterns.joined.search, rest)))
    else:
        slow = [patterns.any(n) for n in rest]
    # the slow answers scattered into the fast ones by polars: a numpy round trip here was what
    # imported numpy into every ``analyze`` (its import time and memory, for one assignment)
    if rest:
        fast = fast.scatter((~plain).arg_true(), pl.Series(slow, dtype=pl.Boolean))
    return fast.alias(names.name)
