"""``explain``: which rule classified an op or kernel (or, with ``--weak``, the kernels that rest
on weak evidence and the rules that would classify them)."""

from __future__ import annotations

import argparse
from typing import Any

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
    from ..core.remote import local_path, named_as

    with local_path(args.trace) as local:  # a URL: fetched, bounded, removed after the analysis
        model: Any
        if args.weak:
            from ..analyses.weak import weak_kernels
            model = weak_kernels(local, taxonomy=args.taxonomy, top=args.top)
        else:
            from ..analyses.explain import explain
            model = explain(local, args.name, taxonomy=args.taxonomy)
    named_as(model, local, args.trace)
    return render(model, args)
