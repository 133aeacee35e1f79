"""A taxonomy's name rules compiled once, so that one distinct name costs microseconds, not a
millisecond: a trace of other people's runs can hold 200,000 distinct kernel or node names.

Testing every rule against every name (432 token runs, 43 op patterns, 15 wrapper patterns)
costs about 1 ms per name. Compiled, the same decisions cost:

* :class:`RunIndex`: the token runs of all rules indexed by their first token (a run whose first
  token ends in ``*`` by that token's prefix), so a name looks up each of its tokens once and
  checks only the runs that begin there; the answer is the first run in rule order that occurs,
  as testing the rules one by one would give;
* :class:`AnyPattern`: a list of regular expressions joined into one alternation, which says in
  one search whether any of them matches (the usual answer is "none"); only then are they tried
  one by one, in order, for the first that matches.

The results are the same as the rule-by-rule loops (``tests/test_matcher.py`` compares them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

#: distinct tokens whose candidate runs :class:`RunIndex` remembers at most
TOKEN_MEMORY = 1 << 16
#: a backreference to a group by number or name: such a pattern cannot be joined to others
_BACKREF = re.compile(r"\\[1-9]|\(\?P=")


#: a run's key: comparable (an int, or a tuple of ints), the smallest first
_Key = Any


class RunIndex:
    """The first of ordered token runs that occurs in a name's tokens. ``runs`` are ``(key, run)``
    pairs with comparable keys (the rule's place, the run's place in the rule): :meth:`first`
    returns the smallest key whose run occurs as consecutive tokens, a token of a run ending in
    ``*`` matching every token it begins (the meaning of :func:`.tokens.has_run`)."""

    def __init__(self, runs: Iterable[tuple[_Key, tuple[str, ...]]]) -> None:
        self.exact: dict[str, list[tuple[_Key, tuple[str, ...]]]] = {}
        self.prefix: dict[int, dict[str, list[tuple[_Key, tuple[str, ...]]]]] = {}
        for key, run in runs:
            if not run:
                continue
            head = run[0]
            if head.endswith("*"):
                self.prefix.setdefault(len(head) - 1, {}).setdefault(head[:-1], []).append((key, run))
            else:
                self.exact.setdefault(head, []).append((key, run))
        self.lengths = sorted(self.prefix)
        #: the first characters of the runs' first tokens: a token beginning otherwise (the numbers
        #: that make most names distinct) begins no run, known without a lookup or a place in memory
        self.initials = frozenset(head[0] for head in self.exact) | frozenset(
            head[0] for heads in self.prefix.values() for head in heads if head)
        self._memory: dict[str, list[tuple[_Key, tuple[str, ...], bool]]] = {}
        self._barren: set[str] = set()  # tokens that begin no run

    def _starting(self, tok: str) -> list[tuple[_Key, tuple[str, ...], bool]]:
        """The runs whose first token matches ``tok`` as ``(key, rest of the run, rest has a
        wildcard)``, by key; remembered per distinct token (the same tokens, ``float``, ``128``,
        ``cutlass``, recur across names) and forgotten when :data:`TOKEN_MEMORY` are held."""
        found = [(key, run[1:], any(t.endswith("*") for t in run[1:])) for key, run in self.exact.get(tok, ())]
        for length in self.lengths:
            if length > len(tok):
                break
            found += [(key, run[1:], any(t.endswith("*") for t in run[1:]))
                      for key, run in self.prefix[length].get(tok[:length], ())]
        found.sort(key=lambda c: c[0])
        if len(self._memory) + len(self._barren) >= TOKEN_MEMORY:
            self._memory.clear()
            self._barren.clear()
        if found:
            self._memory[tok] = found
        else:
            self._barren.add(tok)
        return found

    def first(self, toks: Sequence[str]):
        """The smallest key whose run occurs in ``toks``, or None. Each distinct token is looked up
        once; a longer run is first tested by its first two tokens against the name's pairs of
        adjacent tokens (one set, built once per name), which settles a two-token run and rules out
        most others; positions are found only for the runs whose first pair occurs."""
        memory, best, at, pairs = self._memory, None, None, None
        initials = self.initials
        for tok in set(toks).difference(self._barren):  # in C: most tokens begin no run
            if tok[0] not in initials:
                continue
            found = memory.get(tok)
            if found is None:
                found = self._starting(tok)
            for key, rest, wild in found:  # by key: the first that occurs is this token's best
                if best is not None and key >= best:
                    break
                if not rest:
                    best = key
                    break
                second = rest[0]
                if second[-1] != "*":
                    if pairs is None:
                        pairs = set(zip(toks, toks[1:]))
                    if (tok, second) not in pairs:
                        continue
                    if len(rest) == 1:
                        best = key
                        break
                if at is None:
                    at = _Positions(toks)
                if any(_follows(toks, i + 1, rest, wild) for i in at.of(tok)):
                    best = key
                    break
        return best


class _Positions:
    """Where each token occurs in a name: found by scanning for the few tokens asked about
    (``tuple.index``, in C), and for every token in one pass once more than
    :data:`SCANS` were asked about, so that a name costs its length a bounded number of times."""

    SCANS = 8

    def __init__(self, toks: Sequence[str]) -> None:
        self.toks, self.scans = tuple(toks), 0
        self.all: dict[str, list[int]] | None = None

    def of(self, tok: str) -> list[int]:
        if self.all is None and self.scans < self.SCANS:
            self.scans += 1
            out, i = [], -1
            try:
                while True:
                    i = self.toks.index(tok, i + 1)
                    out.append(i)
            except ValueError:
                return out
        if self.all is None:
            self.all = {}
            for i, t in enumerate(self.toks):
                self.all.setdefault(t, []).append(i)
        return self.all.get(tok, [])


def _follows(toks: Sequence[str], i: int, rest: tuple[str, ...], wild: bool) -> bool:
    """``rest`` (tokens of a run, ``*`` ones matching by prefix) occurs at ``toks[i]``."""
    k = len(rest)
    if not wild:
        return tuple(toks[i:i + k]) == rest
    return i + k <= len(toks) and all(_tok_eq(toks[i + j], rest[j]) for j in range(k))


def _tok_eq(tok: str, want: str) -> bool:
    return tok.startswith(want[:-1]) if want.endswith("*") else tok == want


class AnyPattern:
    """Whether any of ``patterns`` matches, in one search where they can be joined (no
    backreferences, no flags of their own, no global inline flags); else one by one."""

    def __init__(self, patterns: Sequence[re.Pattern]) -> None:
        self.patterns = list(patterns)
        self.joined: re.Pattern | None = None
        default = re.compile("").flags
        if self.patterns and all(p.flags == default and not _BACKREF.search(p.pattern) for p in self.patterns):
            try:
                self.joined = re.compile("|".join(f"(?:{p.pattern})" for p in self.patterns))
            except re.error:  # a global inline flag ((?i) mid-expression) or named groups used twice
                self.joined = None

    def any(self, name: str) -> bool:
        if self.joined is not None:
            return self.joined.search(name) is not None
        return any(p.search(name) for p in self.patterns)

    def first(self, name: str) -> int | None:
        """The place of the first pattern that matches ``name``, or None."""
        if self.joined is not None and self.joined.search(name) is None:
            return None
        return next((i for i, p in enumerate(self.patterns) if p.search(name)), None)


def run_reason(run: tuple[str, ...]) -> str:
    """How a matched token run is named in a rule's reason (``tokens 'layer norm'``)."""
    return f"token{'s' if len(run) > 1 else ''} '{' '.join(run)}'"


class Compiled:
    """One taxonomy's name rules compiled (built once per taxonomy: ``Taxonomy.compiled``)."""

    def __init__(self, tax) -> None:
        self.kernel_rules = list(tax.kernel_rules)
        self.kernel_runs = RunIndex(((i, j), run) for i, r in enumerate(self.kernel_rules)
                                    for j, run in enumerate(r.runs))
        self.kernel_patterns = [i for i, r in enumerate(self.kernel_rules) if r.pattern is not None]
        self.op_patterns = AnyPattern([p for p, _ in tax.op_patterns])
        self.op_runs = RunIndex((j, run) for j, (run, _) in enumerate(tax.op_token_runs))
        self.wrappers = AnyPattern(tax.wrapper_patterns)
        self.composite = AnyPattern(tax.composite_patterns)
        self.modules = AnyPattern([p for p, _ in tax.module_patterns])
        #: the op names an Inductor kernel's name is split into, and their lengths, longest first
        self.vocabulary = frozenset(tax.vocabulary)
        self.vocabulary_lengths = sorted({len(w) for w in tax.vocabulary}, reverse=True)

    def kernel_rule(self, name: str, toks: Sequence[str]):
        """``(rule, what matched)`` of the first kernel rule (in the taxonomy's order) whose pattern
        or one of whose token runs matches ``name`` (tokens ``toks``), or None: a rule's pattern is
        named before its runs, and its first run that occurs before its later ones."""
        best = self.kernel_runs.first(toks)
        for i in self.kernel_patterns:
            if best is not None and i > best[0]:
                break
            rule = self.kernel_rules[i]
            if rule.pattern.search(name):
                return rule, f"/{rule.pattern.pattern}/"
        if best is None:
            return None
        rule = self.kernel_rules[best[0]]
        return rule, run_reason(rule.runs[best[1]])
