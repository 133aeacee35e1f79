"""``analyze``: the GEMM / non-GEMM breakdown of one trace, or of many (files, folders, globs)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import TraceError
from ..vocabulary import METRICS
from . import options
from .common import EXIT_BAD_INPUT, finished, time_limit
from .outputs import dataset_folder, render

HELP = "GEMM / non-GEMM breakdown of traces (Kineto .json[.gz], nsys .sqlite[.gz])"


def arguments(a: argparse.ArgumentParser) -> None:
    a.add_argument("traces", nargs="*", metavar="TRACE",
                   help="trace file(s), folders (every trace inside) or globs; several are analysed in parallel")
    a.add_argument("--example", action="store_true",
                   help="analyze the example trace shipped with the package (BERT-base on an H200)")
    a.add_argument("--engine", choices=("process", "ray"), default="process",
                   help="several traces: worker processes on this machine (default) or Ray tasks")
    a.add_argument("--address", default=None, metavar="ADDR",
                   help="with --engine ray: the Ray cluster to run on (host:port or ray://host:port; default: "
                        "RAY_ADDRESS, else a Ray started on this machine)")
    a.add_argument("--workers", type=int, default=None,
                   help="parallel workers, 1 to twice the CPU count (default: the CPU count; never more than the "
                        "traces); on a Ray cluster: the most tasks in flight")
    a.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="per trace: a trace not analysed within SECONDS is failed with one line (its worker "
                        "ended) while the others report; exit 2. Default: no limit")
    a.add_argument("--metric", choices=tuple(METRICS), default=None,
                   help=f"{'; '.join(f'{k}: {v}' for k, v in METRICS.items())} (the NonGEMM artifact's "
                        "metric). Default: the taxonomy's")
    options.add_format(a, "report", "batch")
    options.add_table(a, "report")
    options.add(a, "output", *options.ANALYSIS)
    a.add_argument("--keep-python", action="store_true", help="keep python_function events (with_stack traces)")
    a.add_argument("--layer-info", metavar="FILE", help="a TensorRT profile's layer information (trtexec "
                   "--exportLayerInfo; default: the file next to the profile by name)")
    a.add_argument("--top", type=int, default=15, metavar="N", help="rows of ops and kernels in the table view")
    a.add_argument("--max-ops", type=int, default=None, metavar="N", help="limit the ops list in JSON to N rows")


def run(args: argparse.Namespace) -> int:
    if args.example:
        from ..examples import example_trace
        args.traces = [*args.traces, str(example_trace())]
    if not args.traces:
        raise TraceError(None, "analyze needs a TRACE (or --example for the trace shipped with the package)")
    _cluster_options(args)
    from ..core.remote import is_prefix, is_url
    batch = len(args.traces) > 1 or any(is_prefix(t) if is_url(t) else Path(t).is_dir() or
                                        (any(ch in t for ch in "*?[") and not Path(t).exists()) for t in args.traces)
    if batch:
        from ..runs.batch import expand_inputs
        return _batch(args, expand_inputs(args.traces))
    args.trace = args.traces[0]
    if is_url(args.trace):
        return _analyze_one(args)
    # the first chunks are read and scanned on the other core while polars imports, for the
    # tables the load will keep (the analysis's rule; a taxonomy whose default level needs
    # Python events loads without the read-ahead's tables)
    from ..load import start_read_ahead, stop_read_ahead
    from ..pipeline.analysis import needs_python
    if start_read_ahead(args.trace, args.keep_python or needs_python(args.level)):
        try:
            return _analyze_one(args)
        finally:
            stop_read_ahead()  # not taken: the analysis stopped before loading
    return _analyze_one(args)


def _cluster_options(args: argparse.Namespace) -> None:
    """Refuse what contradicts itself, in one line: an address without the Ray engine; workers out of range
    (on a Ray cluster any number of tasks in flight, as its CPUs are not this machine's)."""
    from ..errors import OptionError
    from ..runs.ray_engine import ray_address

    if args.address and args.engine != "ray":
        raise OptionError(None, f"--address names a Ray cluster: it needs --engine ray, not --engine {args.engine}",
                          "address")
    if args.workers is None:
        return
    if args.engine == "ray" and ray_address(args.address) is not None:
        from ..runs.ray_engine import in_flight
        in_flight(args.workers, len(args.traces))
        return
    from ..runs.batch_workers import bounded_workers  # refused with one trace too: the same line with two would fail
    bounded_workers(args.workers, len(args.traces))


def _options(args: argparse.Namespace) -> dict:
    return dict(metric=args.metric, level=args.level, taxonomy=args.taxonomy, drop_unlinked=args.drop_unlinked,
                step_marker=args.step_marker, skip_steps=args.skip_steps, keep_python=args.keep_python,
                layer_info=args.layer_info)


def _analyze_one(args: argparse.Namespace) -> int:
    """``analyze`` of one trace: the report in the chosen format."""
    from ..core.remote import local_path
    from ..pipeline.api import analyze

    opts = _options(args)
    with time_limit(args.trace, args.timeout), local_path(args.trace) as local:  # a URL: fetched, bounded
        report = analyze(local, **opts)
        if local is not args.trace:
            report.trace = args.trace
    render(report, args)
    finished["single_analysis"] = True
    return 0


def _batch(args: argparse.Namespace, paths: list[str]) -> int:
    from ..runs.batch import run_batch
    from .progress import current_display

    parquet_dir = dataset_folder("batch", args, paths[0])
    display = current_display()
    result = run_batch(paths, _options(args), engine=args.engine, workers=args.workers, parquet_dir=parquet_dir,
                       progress=display.file_done if display else None, timeout=args.timeout, address=args.address)
    for f in result.failed:
        print(f"nongemm-trace: error: {f['error']}", file=sys.stderr)
    render(result, args)
    return EXIT_BAD_INPUT if result.failed else 0
