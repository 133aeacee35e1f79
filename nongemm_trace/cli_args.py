"""The command line's arguments: one parser, every subcommand and its options.

Kept apart from :mod:`.cli` (which runs the commands) and free of polars, so the
allocator setting in :mod:`.cli` still precedes polars' import.
"""

from __future__ import annotations

import argparse

from ._version import __version__
from .vocabulary import LEVELS, METRICS


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nongemm-trace",
        description="Where GPU time goes in a profiler trace: GEMM vs non-GEMM operators.",
    )
    p.add_argument("--version", action="version", version=f"nongemm-trace {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("analyze", help="GEMM / non-GEMM breakdown of traces (Kineto .json[.gz], nsys .sqlite[.gz])")
    a.add_argument("traces", nargs="*", metavar="TRACE",
                   help="trace file(s), folders (every trace inside) or globs; several are analysed in parallel")
    a.add_argument("--example", action="store_true",
                   help="analyze the example trace shipped with the package (BERT-base on an H200)")
    a.add_argument("--engine", choices=("process", "ray"), default="process",
                   help="several traces: worker processes on this machine (default) or Ray tasks")
    a.add_argument("--workers", type=int, default=None, help="parallel workers (default: the CPU count)")
    a.add_argument("-q", "--quiet", action="store_true", help="no progress display on stderr")
    a.add_argument("--metric", choices=tuple(METRICS), default=None,
                   help="gpu: summed GPU activity time (default); cpu: operator CPU time; paper: cpu + gpu "
                        "(the NonGEMM artifact's metric). Default: the taxonomy's")
    a.add_argument("--level", choices=tuple(LEVELS), default=None,
                   help="launch: the op that launched each activity (default); top: the outermost real operator; "
                        "module: the innermost named nn.Module (with_stack traces). Default: the taxonomy's")
    a.add_argument("--taxonomy", default="default", help="built-in taxonomy name or a .toml file (default: default)")
    a.add_argument("--format", choices=("table", "json", "csv", "parquet", "markdown"), default="table")
    a.add_argument("--table", choices=("categories", "ops", "kernels"), default="categories",
                   help="which table csv/parquet write (default: categories)")
    a.add_argument("-o", "--output", help="write the report to PATH instead of stdout")
    a.add_argument("--drop-unlinked", action="store_true",
                   help="leave out GPU activities with no launch call in the file (launched before profiling)")
    a.add_argument("--step-marker", metavar="NAME", help="name of the ranges that mark steps (default: ProfilerStep#N, "
                   "else the most repeated top-level annotation)")
    a.add_argument("--skip-steps", type=int, default=0, metavar="N", help="drop the first N steps (warm-up)")
    a.add_argument("--keep-python", action="store_true", help="keep python_function events (with_stack traces)")
    a.add_argument("--layer-info", metavar="FILE", help="a TensorRT profile's layer information (trtexec "
                   "--exportLayerInfo; default: the file next to the profile by name)")
    a.add_argument("--top", type=int, default=15, metavar="N", help="rows of ops and kernels in the table view")
    a.add_argument("--max-ops", type=int, default=None, metavar="N", help="limit the ops list in JSON to N rows")

    def common(p_):
        p_.add_argument("--taxonomy", default="default", help="built-in taxonomy name or a .toml file")
        p_.add_argument("--level", choices=tuple(LEVELS), default=None,
                        help="which op an activity is charged to (default: the taxonomy's)")
        p_.add_argument("--drop-unlinked", action="store_true",
                        help="leave out GPU activities with no launch call in the file")
        p_.add_argument("--step-marker", metavar="NAME", help="name of the ranges that mark steps")
        p_.add_argument("--skip-steps", type=int, default=0, metavar="N", help="drop the first N steps (warm-up)")

    cp = sub.add_parser("compare", help="what changed between traces: per category, fusion and quantization views")
    cp.add_argument("traces", nargs="+", metavar="TRACE", help="BASE first, then one or more traces to compare with it")
    cp.add_argument("--per-step", action="store_true", help="divide times and counts by each trace's step count")
    cp.add_argument("--format", choices=("table", "json", "markdown"), default="table")
    cp.add_argument("-o", "--output")
    common(cp)

    pp = sub.add_parser("plot", help="stacked bars of GPU time per category, one bar per trace")
    pp.add_argument("traces", nargs="+", metavar="TRACE")
    pp.add_argument("-o", "--output", required=True, help="figure file (.png or .svg)")
    pp.add_argument("--absolute", action="store_true", help="bars in microseconds instead of shares")
    pp.add_argument("--per-step", action="store_true")
    pp.add_argument("--title")
    common(pp)

    ck = sub.add_parser("check", help="regression gates: exit 1 when a limit is broken")
    ck.add_argument("trace")
    ck.add_argument("--baseline", metavar="BASE", help="the trace to compare with, or its stored report (analyze --format json)")
    ck.add_argument("--max-share", action="append", metavar="CLASS=FRACTION",
                    help="e.g. non-GEMM=0.45 or non-GEMM=45%% (repeatable; a category name works too)")
    ck.add_argument("--max-category-share", action="append", metavar="CATEGORY=FRACTION")
    ck.add_argument("--max-regression", metavar="PCT", help="GPU time per step against --baseline, e.g. 10%%")
    ck.add_argument("--max-category-regression", action="append", metavar="CATEGORY=PCT")
    ck.add_argument("--format", choices=("text", "json"), default="text")
    common(ck)

    fp = sub.add_parser("flops", help="FLOPs, bytes and the roofline per op; where FLOPs misjudge time")
    fp.add_argument("trace")
    fp.add_argument("--format", choices=("table", "json", "csv"), default="table")
    fp.add_argument("--table", choices=("ops", "categories", "calls"), default="ops", help="which table csv writes")
    fp.add_argument("-o", "--output")
    fp.add_argument("--device-spec", metavar="NAME|FILE.toml", help="peak specs to use instead of the detected device")
    fp.add_argument("--roofline", metavar="FILE", help="draw the roofline scatter to FILE (.png/.svg)")
    fp.add_argument("--shares-plot", metavar="FILE", help="draw FLOP share vs time share per class to FILE")
    fp.add_argument("--top", type=int, default=15)
    common(fp)

    la = sub.add_parser("launch", help="launch overhead, GPU idle gaps and communication overlap of one trace")
    la.add_argument("trace")
    la.add_argument("--format", choices=("table", "json", "csv"), default="table")
    la.add_argument("--table", choices=("streams", "steps", "devices", "categories", "activities"), default="streams",
                    help="which table csv writes (default: streams)")
    la.add_argument("-o", "--output", help="write the report to PATH instead of stdout")
    la.add_argument("--short-us", type=float, default=10.0, help="activities shorter than this are short (default 10)")
    la.add_argument("--plot", metavar="FILE", help="draw the timeline to FILE (.png or .svg)")
    la.add_argument("--window", metavar="START:END", help="plot only this window, in us from the first activity")
    common(la)

    cv = sub.add_parser("convert", help="an Nsight Systems SQLite export (.sqlite[.gz], or .nsys-rep with nsys on "
                                        "PATH) to a Kineto-compatible trace (.json or .json.gz)")
    cv.add_argument("report")
    cv.add_argument("-o", "--output", required=True)

    e = sub.add_parser("explain", help="which rule classified an op or kernel, in which taxonomy, at which level")
    e.add_argument("trace")
    e.add_argument("name", nargs="?", help="an op or kernel name (exact, else every name containing it)")
    e.add_argument("--weak", action="store_true", help="instead of a name: the kernels with the most GPU time on "
                                                       "weak evidence, each with a TOML rule that would classify it")
    e.add_argument("--top", type=int, default=20, help="with --weak: how many kernels (default 20)")
    e.add_argument("--taxonomy", default="default")
    e.add_argument("--format", choices=("text", "json"), default="text")

    n = sub.add_parser("annotate", help="write the trace with args.nongemm_category / nongemm_class on every op and "
                                        "GPU activity (for Perfetto / chrome://tracing)")
    n.add_argument("trace")
    n.add_argument("-o", "--output", required=True, help="output trace (.json or .json.gz)")
    n.add_argument("--taxonomy", default="default")
    n.add_argument("--level", choices=tuple(LEVELS), default=None)
    return p


#: set once a single-trace analysis has written its report: it started nothing (worker processes,
#: Ray) that must be shut down at exit, so :func:`entry` may skip the interpreter's teardown
