"""``explain``: which rule classified an op or kernel (or, with ``--weak``, the kernels that rest
on weak evidence and the rules that would classify them)."""

from __future__ import annotations

import argparse

from ..errors import TraceError
from . import options
from .outputs import render

HELP = "which rule classified an op or kernel, in which taxonomy, at which level"


def arguments(e: argparse.ArgumentParser) -> None:
    e.add_argument("trace", help="the trace whose classification to explain")
    e.add_argument("name", nargs="?", help="an op or kernel name (exact, else every name containing it)")
    e.add_argument("--weak", action="store_true", help="instead of a name: the kernels with the most GPU time on "
                                                       "weak evidence, each with a TOML rule that would classify it")
    e.add_argument("--top", type=int, default=20, help="with --weak: how many kernels (default 20)")
    options.add(e, "taxonomy")
    options.add_format(e, "explain", "weak")


def run(args: argparse.Namespace) -> int:
    if args.weak == (args.name is not None):
        raise TraceError(args.trace, "explain takes a NAME or --weak (one of them)")
    if args.weak:
        from ..analyses.weak import weak_kernels
        return render(weak_kernels(args.trace, taxonomy=args.taxonomy, top=args.top), args)
    from ..analyses.explain import explain
    return render(explain(args.trace, args.name, taxonomy=args.taxonomy), args)
