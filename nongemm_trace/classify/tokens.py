"""Kernel and op names as identifier tokens, so that rules match words, not substrings.

A short category word inside a longer identifier is not that category: ``mul`` in
``matmul``, ``gemm`` in ``fbgemm``, ``add`` in ``addmm``. Rules that say ``tokens`` match
whole tokens (or runs of tokens) of the normalized name:

* an Itanium-mangled name (``_ZN7ck_tile6kentry…``) is read as its length-prefixed
  identifiers (``ck_tile``, ``kentry``, …);
* the name is split on everything that is not a letter or digit (``::``, ``<``, ``(``,
  ``,``, ``_``, spaces), then at lower-to-upper case changes (``SoftMaxForward`` ->
  ``soft max forward``; ``CUDAFunctor`` -> ``cuda functor``) and around digit runs
  (``s16816gemm`` -> ``s 16816 gemm``);
* tokens are lower-cased; ``void``, ``const`` and such C++ words carry nothing and are dropped.

Template arguments and parameter lists stay in: the element-wise functor's name
(``CUDAFunctorOnSelf_add``) and the GEMM inside ``cutlass::Kernel2<…gemm…>`` live there.
"""

from __future__ import annotations

import re
from itertools import filterfalse

#: a token: an upper-case run not followed by a lower-case letter (``CUDA`` in ``CUDAFunctor``), an
#: optional capital and lower-case letters (``Functor``), or digits; everything else separates tokens.
#: One scan of the name: splitting it on separators and then at each case change with look-arounds
#: cost twice as much on long templated names
_TOKEN = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_DIGITS = re.compile(r"[0-9]+")
_WORD = re.compile(r"[A-Za-z0-9_]+")
_IDENT_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
#: a length prefix longer than this many digits names no identifier (and ``int`` of thousands of
#: digits is refused by CPython)
_MAX_LENGTH_DIGITS = 9
_NOISE = frozenset({"void", "const", "unsigned", "signed", "struct", "class", "typename", "anonymous", "namespace",
                    "unnamed"})


def _demangle_ids(name: str) -> str:
    """The identifiers of an Itanium-mangled symbol, space-separated (no types or nesting): each run
    of digits followed by an identifier that is at least that long names its first that many
    characters. Linear in the name: the identifier run around a length prefix is known from one
    scan of the name's word runs, never rescanned from each prefix (a hostile name of
    ``9a9a9a…`` would otherwise cost its length squared)."""
    out = []
    words = _WORD.finditer(name, 2)
    word_end = 0
    i, n = 2, len(name)
    while True:
        m = _DIGITS.search(name, i)
        if m is None:
            break
        at, start = m.span()
        while word_end <= at:  # the word run holding these digits (and the identifier after them)
            word_end = next(words).end()
        i = start
        if start >= n or name[start] not in _IDENT_START or len(m.group()) > _MAX_LENGTH_DIGITS:
            continue
        length = int(m.group())
        if 0 < length <= word_end - start:
            out.append(name[start:start + length])
            i = start + length
    return " ".join(out)


def tokens(name: str) -> tuple[str, ...]:
    """The lower-cased identifier tokens of a kernel or op name (see the module's docstring)."""
    if name.startswith("_Z"):
        name = _demangle_ids(name) or name
    low = " ".join(_TOKEN.findall(name)).lower().split()  # tokens hold no spaces: lower-cased in one call
    if _NOISE.isdisjoint(low):
        return tuple(low)
    return tuple(filterfalse(_NOISE.__contains__, low))


class TokenIndex:
    """A name's tokens with the positions of each, so that hundreds of rules test a long
    (templated, mangled) name without scanning it once per rule."""

    __slots__ = ("toks", "pos")

    def __init__(self, toks: tuple[str, ...]):
        self.toks = toks
        pos: dict[str, list[int]] = {}
        for i, t in enumerate(toks):
            pos.setdefault(t, []).append(i)
        self.pos = pos

    def starts(self, want: str) -> list[int]:
        """Positions of the tokens ``want`` matches (``gemm*``: every token beginning with gemm)."""
        if not want.endswith("*"):
            return self.pos.get(want, [])
        head = want[:-1]
        return sorted(i for t, at in self.pos.items() if t.startswith(head) for i in at)

    def has(self, run: tuple[str, ...]) -> bool:
        """``run`` occurs as consecutive tokens (see :func:`has_run`)."""
        k = len(run)
        if k == 0 or k > len(self.toks):
            return False
        toks = self.toks
        for i in self.starts(run[0]):
            if i + k <= len(toks) and all(_tok_eq(toks[i + j], run[j]) for j in range(1, k)):
                return True
        return False


def has_run(toks: tuple[str, ...], run: tuple[str, ...]) -> bool:
    """``run`` occurs in ``toks`` as consecutive tokens; a token ending in ``*`` matches any token
    it begins (``gemm*`` matches ``gemmk``)."""
    return TokenIndex(toks).has(run)


def _tok_eq(tok: str, want: str) -> bool:
    return tok.startswith(want[:-1]) if want.endswith("*") else tok == want


def parse_runs(spec: list[str]) -> tuple[tuple[str, ...], ...]:
    """Rule data (``["gemm", "layer norm", "cutlass kernel 2"]``) as token runs."""
    return tuple(tuple(s.lower().split()) for s in spec if s.strip())
