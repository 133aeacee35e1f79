"""``explain``: which rule classified an op or kernel (or, with ``--weak``, the kernels that rest
on weak evidence and the rules that would classify them)."""

from __future__ import annotations

import argparse

from ..errors import TraceError

HELP = "which rule classified an op or kernel, in which taxonomy, at which level"


def arguments(e: argparse.ArgumentParser) -> None:
    e.add_argument("trace", help="the trace whose classification to explain")
    e.add_argument("name", nargs="?", help="an op or kernel name (exact, else every name containing it)")
    e.add_argument("--weak", action="store_true", help="instead of a name: the kernels with the most GPU time on "
                                                       "weak evidence, each with a TOML rule that would classify it")
    e.add_argument("--top", type=int, default=20, help="with --weak: how many kernels (default 20)")
    e.add_argument("--taxonomy", default="default", help="built-in taxonomy name or a .toml file")
    e.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or json")


def run(args: argparse.Namespace) -> int:
    from ..report.output import emit
    from ..report.terminal.explain import render_explain, render_weak

    if args.weak == (args.name is not None):
        raise TraceError(args.trace, "explain takes a NAME or --weak (one of them)")
    if args.weak:
        from ..weak import weak_kernels
        d, text = weak_kernels(args.trace, taxonomy=args.taxonomy, top=args.top), render_weak
    else:
        from ..classify.ladder import RULE_TEXT
        from ..explain import explain
        d = explain(args.trace, args.name, taxonomy=args.taxonomy)
        text = lambda doc: render_explain(doc, RULE_TEXT)  # noqa: E731
    if args.format == "json":
        from ..report.json_out import render_document
        emit(render_document(d), None)
    else:
        emit(text(d), None)
    return 0
