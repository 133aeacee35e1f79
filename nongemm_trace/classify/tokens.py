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

_MANGLED_ID = re.compile(r"(\d+)([A-Za-z_][A-Za-z0-9_]*)")
_SPLIT = re.compile(r"[^A-Za-z0-9]+")
#: an upper-case run before an upper+lower pair, a lower/digit before an upper, letters around digits
_CASE = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])|(?<=[a-z])(?=[A-Z])|(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])")
_NOISE = frozenset({"void", "const", "unsigned", "signed", "struct", "class", "typename", "anonymous", "namespace",
                    "unnamed"})


def _demangle_ids(name: str) -> str:
    """The identifiers of an Itanium-mangled symbol, space-separated (no types or nesting)."""
    out = []
    i, n = 2, len(name)
    while i < n:
        m = _MANGLED_ID.match(name, i)
        if m is None:
            i += 1
            continue
        length = int(m.group(1))
        start = m.start(2)
        ident = name[start:start + length]
        if 0 < length <= len(m.group(2)) and ident:
            out.append(ident)
            i = start + length
        else:
            i = m.end(1)
    return " ".join(out)


def tokens(name: str) -> tuple[str, ...]:
    """The lower-cased identifier tokens of a kernel or op name (see the module's docstring)."""
    if name.startswith("_Z"):
        name = _demangle_ids(name) or name
    out: list[str] = []
    for word in _SPLIT.split(name):
        if not word:
            continue
        for part in _CASE.split(word):
            low = part.lower()
            if low and low not in _NOISE:
                out.append(low)
    return tuple(out)


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
