"""Nsight Systems' demangled kernel names write a function parameter whose type is a template
parameter as ``T1``, ``T2``…: ``vectorized_elementwise_kernel<4, CUDAFunctor_add<float>,
std::array<char *, 3>>(int, T2, T3)``. A reader (and a kernel-name rule) wants the type itself, as
Kineto writes it: ``Tn`` inside a parameter list is the n-th template argument of the template whose
``<…>`` closes right before that list. Lists from left to right: a function template nested in
another's template arguments comes first, so its own ``Tn`` are filled before the outer list
copies it."""

from __future__ import annotations

import re

_PLACEHOLDER = re.compile(r"(?<![\w:])T(\d+)(?![\w])")


def _matching(name: str, start: int, open_: str, close: str, step: int) -> int:
    """The index of the bracket matching the one at ``start`` (scanning by ``step``), or -1."""
    depth, i = 0, start
    while 0 <= i < len(name):
        ch = name[i]
        if ch == open_:
            depth += 1
        elif ch == close:
            depth -= 1
            if depth == 0:
                return i
        i += step
    return -1


def _top_level_args(text: str) -> list[str]:
    """``a, b<c, d>, e`` -> ``[a, b<c, d>, e]`` (commas at depth 0 only)."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur).strip())
    return out


def fill_template_params(name: str) -> str:
    """``name`` with each ``Tn`` of a parameter list replaced by the template argument it stands for
    (left as it is when the template has fewer arguments, or the brackets do not balance)."""
    if "T" not in name or ">(" not in name:
        return name
    at = name.find(">(")
    while at >= 0:
        paren = at + 1
        end = _matching(name, paren, "(", ")", 1)
        opening = _matching(name, paren - 1, ">", "<", -1)
        if end < 0 or opening < 0:
            at = name.find(">(", paren)
            continue
        args = _top_level_args(name[opening + 1:paren - 1])

        def arg(m: re.Match[str], args: list[str] = args) -> str:
            n = int(m.group(1))
            return args[n - 1] if 1 <= n <= len(args) else m.group(0)

        filled = _PLACEHOLDER.sub(arg, name[paren:end + 1])
        name = name[:paren] + filled + name[end + 1:]
        at = name.find(">(", paren + 1)
    return name
