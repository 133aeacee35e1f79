"""Command line: ``nongemm-trace analyze TRACE [options]``.

A thin layer over :func:`nongemm_trace.analyze` and the renderers. Bad input
exits with code 2 and one line on stderr naming the file and the problem;
nothing but the report goes to stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# polars' allocator (jemalloc) keeps several arenas per core, and pages freed in one are not
# reused by another; and it returns freed pages to the system only after 10 s, longer than most
# runs. One arena, and a background thread returning pages after 100 ms, cost no measurable time
# here and lower the peak memory of a 200 MB trace by about 8 % (324-331 -> 299-305 MB). jemalloc
# reads this once, when polars is first imported, so it is set before anything imports polars;
# a value already set wins.
ALLOCATOR = "narenas:1,background_thread:true,dirty_decay_ms:100,muzzy_decay_ms:0"
os.environ.setdefault("_RJEM_MALLOC_CONF", ALLOCATOR)

from ._version import __version__  # noqa: E402
from .errors import TraceError

EXIT_BAD_INPUT = 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nongemm-trace",
        description="Where GPU time goes in a profiler trace: GEMM vs non-GEMM operators.",
    )
    p.add_argument("--version", action="version", version=f"nongemm-trace {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("analyze", help="GEMM / non-GEMM breakdown of traces (Kineto .json[.gz], nsys .sqlite[.gz])")
    a.add_argument("traces", nargs="+", metavar="TRACE",
                   help="trace file(s), folders (every trace inside) or globs; several are analysed in parallel")
    a.add_argument("--engine", choices=("process", "ray"), default="process",
                   help="several traces: worker processes on this machine (default) or Ray tasks")
    a.add_argument("--workers", type=int, default=None, help="parallel workers (default: the CPU count)")
    a.add_argument("-q", "--quiet", action="store_true", help="no progress display on stderr")
    a.add_argument("--metric", choices=("gpu", "cpu", "paper"), default=None,
                   help="gpu: summed GPU activity time (default); cpu: operator CPU time; paper: cpu + gpu "
                        "(the NonGEMM artifact's metric). Default: the taxonomy's")
    a.add_argument("--level", choices=("launch", "top", "module"), default=None,
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
    a.add_argument("--top", type=int, default=15, metavar="N", help="rows of ops and kernels in the table view")
    a.add_argument("--max-ops", type=int, default=None, metavar="N", help="limit the ops list in JSON to N rows")

    def common(p_):
        p_.add_argument("--taxonomy", default="default")
        p_.add_argument("--level", choices=("launch", "top", "module"), default=None)
        p_.add_argument("--drop-unlinked", action="store_true")
        p_.add_argument("--step-marker", metavar="NAME")
        p_.add_argument("--skip-steps", type=int, default=0, metavar="N")

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
    ck.add_argument("--baseline", metavar="BASE")
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
    n.add_argument("--level", choices=("launch", "top", "module"), default=None)
    return p


#: set once a single-trace analysis has written its report: it started nothing (worker processes,
#: Ray) that must be shut down at exit, so :func:`entry` may skip the interpreter's teardown
_single_analysis_done = False


def entry() -> None:
    """The console command: :func:`main`; after a single-trace analysis, the process exits
    without the interpreter's teardown (freeing a big trace's tables and modules one by one
    takes 0.06-0.1 s, about 5 % of a 200 MB run), its output flushed first."""
    code = main()
    if _single_analysis_done:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:  # a closed pipe: nothing more can be written anyway
            pass
        os._exit(code)
    sys.exit(code)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except TraceError as exc:
        print(f"nongemm-trace: error: {exc.one_line()}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("nongemm-trace: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print(f"nongemm-trace: error: {getattr(args, 'trace', '')}: out of memory", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # never a traceback for the user; one line that names the file
        msg = " ".join(str(exc).split())[:300]
        print(f"nongemm-trace: error: {getattr(args, 'trace', '')}: unexpected failure "
              f"({type(exc).__name__}: {msg}); please report it", file=sys.stderr)
        return EXIT_BAD_INPUT


def _run(args: argparse.Namespace) -> int:
    if args.command == "analyze":
        batch = len(args.traces) > 1 or any(Path(t).is_dir() or (any(ch in t for ch in "*?[") and not Path(t).exists())
                                            for t in args.traces)
        if batch:
            from .batch import expand_inputs
            return _batch(args, expand_inputs(args.traces))
        args.trace = args.traces[0]
        # the first chunks are read and scanned on the other core while polars imports
        from .load import read_ahead
        if read_ahead.start(args.trace, args.keep_python or args.level == "module"):
            try:
                return _analyze_one(args)
            finally:
                read_ahead.discard()  # not taken: the analysis stopped before loading
    if args.command == "explain":
        if args.weak == (args.name is not None):
            raise TraceError(args.trace, "explain takes a NAME or --weak (one of them)")
        if args.weak:
            from .weak import render_text, weak_kernels
            d = weak_kernels(args.trace, taxonomy=args.taxonomy, top=args.top)
        else:
            from .explain import explain, render_text
            d = explain(args.trace, args.name, taxonomy=args.taxonomy)
        if args.format == "json":
            import json
            sys.stdout.write(json.dumps(d, indent=2, ensure_ascii=False) + "\n")
        else:
            sys.stdout.write(render_text(d))
        return 0
    if args.command == "convert":
        return _convert(args)
    if args.command == "launch":
        return _launch(args)
    if args.command == "flops":
        return _flops(args)
    if args.command in ("compare", "plot"):
        return _compare(args)
    if args.command == "check":
        return _check(args)
    if args.command == "annotate":
        from .annotate import annotate
        counts = annotate(args.trace, args.output, taxonomy=args.taxonomy, level=args.level)
        print(f"wrote {args.output}: {counts['ops']:,} ops and {counts['activities']:,} GPU activities annotated",
              file=sys.stderr)
        return 0
    return _analyze_one(args)


def _analyze_one(args: argparse.Namespace) -> int:
    """``analyze`` of one trace: the report in the chosen format."""
    from .api import analyze

    opts = dict(metric=args.metric, level=args.level, taxonomy=args.taxonomy, drop_unlinked=args.drop_unlinked,
                step_marker=args.step_marker, skip_steps=args.skip_steps, keep_python=args.keep_python)
    size = Path(args.trace).stat().st_size if Path(args.trace).is_file() else 0
    big = size > (4 << 20 if args.trace.endswith(".gz") else 32 << 20)  # gzip: ~10x that much JSON
    if big and not args.quiet and sys.stderr.isatty():
        report = _analyze_with_bar(args.trace, opts)
    else:
        report = analyze(args.trace, **opts)
    if args.format == "json":
        from .report.json_out import render_json
        _emit(render_json(report, max_ops=args.max_ops), args.output)
    elif args.format == "markdown":
        from .report.markdown import analyze_markdown
        _emit(analyze_markdown(report, top=args.top), args.output)
    elif args.format in ("csv", "parquet"):
        from .report.files import write_table
        text = write_table(report, args.table, args.format, args.output)
        if text is not None:
            sys.stdout.write(text)
    else:
        from .report.table import render_table
        _render(args.output, lambda console: render_table(report, console, top=args.top))
    global _single_analysis_done
    _single_analysis_done = True
    return 0


def _analyze_with_bar(trace: str, opts: dict):
    """analyze() with a byte progress bar on stderr while the file is read, then a note while
    it is linked and measured (the bar disappears when done; stdout stays the report's)."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn, TransferSpeedColumn

    from .api import analyze

    bar = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                   TimeElapsedColumn(), transient=True)
    task = bar.add_task(f"reading {Path(trace).name}", total=Path(trace).stat().st_size)

    def on_progress(done: int, total: int) -> None:
        bar.update(task, completed=done,
                   description=f"{'analysing' if done >= total else 'reading'} {Path(trace).name}")

    with bar:
        return analyze(trace, progress=on_progress, **opts)


def _batch(args: argparse.Namespace, paths: list[str]) -> int:
    from .batch import run_batch

    opts = dict(metric=args.metric, level=args.level, taxonomy=args.taxonomy, drop_unlinked=args.drop_unlinked,
                step_marker=args.step_marker, skip_steps=args.skip_steps, keep_python=args.keep_python)
    parquet_dir = None
    if args.format == "parquet":
        if not args.output:
            raise TraceError(paths[0], "--format parquet with several traces needs -o/--output DIR (a Parquet dataset)")
        parquet_dir = args.output
    show = not args.quiet and sys.stderr.isatty()
    progress_cb = None
    bar = None
    if show:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        bar = Progress(TextColumn("analysing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                       TextColumn("{task.description}"), transient=True)
        task = bar.add_task("", total=len(paths))
        bar.start()

        def progress_cb(done, total, path):
            bar.update(task, completed=done, description=Path(path).name)
    try:
        result = run_batch(paths, opts, engine=args.engine, workers=args.workers, parquet_dir=parquet_dir,
                           progress=progress_cb)
    finally:
        if bar is not None:
            bar.stop()
    for f in result.failed:
        print(f"nongemm-trace: error: {f['error']}", file=sys.stderr)
    d = result.to_dict()
    if args.format == "json":
        import json
        _emit(json.dumps(d, indent=2, ensure_ascii=False) + "\n", args.output)
    elif args.format == "parquet":
        print(f"wrote the Parquet dataset {parquet_dir} (table=categories|ops|kernels, one part per trace)",
              file=sys.stderr)
    elif args.format in ("csv", "markdown"):
        _emit(_batch_rows(d, args.format), args.output)
    else:
        from .report.batch_table import render_batch
        _render(args.output, lambda console: render_batch(d, console))
    return EXIT_BAD_INPUT if result.failed else 0


def _batch_rows(d: dict, fmt: str) -> str:
    head = ["trace", "rank", "metric", "gpu_time_us", "gpu_activities", "GEMM_share", "non_GEMM_share",
            "top_non_GEMM_category"]
    rows = []
    for r in d["traces"]:
        cls = {c["class"]: c["share"] for c in r["classes"]}
        non = [c for c in r["categories"] if c["class"] == "non-GEMM" and c["share"] > 0]
        rows.append([r["trace"], "" if r.get("rank") is None else r["rank"], r["metric"], r["gpu_time_us"],
                     r["gpu_activities"], round(cls.get("GEMM", 0.0), 6), round(cls.get("non-GEMM", 0.0), 6),
                     non[0]["category"] if non else ""])
    if fmt == "csv":
        import csv
        import io
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(head)
        w.writerows(rows)
        return buf.getvalue()
    out = ["| trace | GPU time (us) | activities | GEMM | non-GEMM | top non-GEMM |", "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        out.append(f"| {Path(r[0]).name} | {r[3]:,.1f} | {r[4]:,} | {100 * r[5]:.1f} % | {100 * r[6]:.1f} % | {r[7]} |")
    c = d["combined"]
    out.append(f"| **all {c['traces']} traces** | {c['gpu_time_us']:,.1f} | {c['gpu_activities']:,} | "
               + " | ".join(f"{100 * next((x['share'] for x in c['classes'] if x['class'] == k), 0.0):.1f} %"
                            for k in ("GEMM", "non-GEMM")) + " | |")
    return "\n".join(out) + "\n"


def _convert(args: argparse.Namespace) -> int:
    import gzip

    import msgspec

    from .load import load_trace
    from .load.nsys import to_kineto

    trace = load_trace(args.report)
    if trace.source_format != "nsys":
        raise TraceError(args.report, "is not an Nsight Systems export (convert reads .sqlite[.gz] / .nsys-rep)")
    blob = msgspec.json.encode(to_kineto(trace))
    out = Path(args.output)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(gzip.compress(blob, 6) if out.name.endswith(".gz") else blob)
    except OSError as exc:
        raise TraceError(out, f"cannot write: {exc.strerror or exc}") from None
    print(f"wrote {out}: {trace.activities.height:,} GPU activities, {trace.launches.height:,} launch calls, "
          f"{trace.ops.height:,} NVTX ranges" + "".join(f"; {a.message}" for a in trace.anomalies), file=sys.stderr)
    return 0


def _options(args: argparse.Namespace) -> dict:
    return {"taxonomy": args.taxonomy, "level": args.level, "drop_unlinked": args.drop_unlinked,
            "step_marker": args.step_marker, "skip_steps": args.skip_steps}


def _compare(args: argparse.Namespace) -> int:
    from .compare import compare
    if args.command == "compare" and len(args.traces) < 2:
        raise TraceError(args.traces[0], "compare needs BASE and at least one more trace")
    cmp = compare(args.traces, per_step=args.per_step, **_options(args))
    if args.command == "plot":
        from .report.bars import plot_bars
        plot_bars(cmp, args.output, absolute=args.absolute, title=args.title)
        print(f"wrote {args.output}", file=sys.stderr)
        return 0
    if args.format == "json":
        import json
        _emit(json.dumps(cmp.to_dict(), indent=2, ensure_ascii=False) + "\n", args.output)
    elif args.format == "markdown":
        from .report.markdown import compare_markdown
        _emit(compare_markdown(cmp), args.output)
    else:
        from .report.compare_table import render_compare
        _render(args.output, lambda console: render_compare(cmp, console))
    return 0


def _check(args: argparse.Namespace) -> int:
    from .check import check, parse_fraction, parse_named
    violations, rep = check(
        args.trace, baseline=args.baseline, max_share=parse_named(args.max_share, "--max-share"),
        max_category_share=parse_named(args.max_category_share, "--max-category-share"),
        max_regression=parse_fraction(args.max_regression, "--max-regression") if args.max_regression else None,
        max_category_regression=parse_named(args.max_category_regression, "--max-category-regression"),
        **_options(args))
    if args.format == "json":
        import json
        print(json.dumps({"trace": args.trace, "ok": not violations,
                          "violations": [v.__dict__ for v in violations]}, indent=2))
    elif violations:
        for v in violations:
            print(f"FAIL {v.limit}: {v.message}")
    else:
        of = {"gpu": "GPU time", "cpu": "CPU time", "paper": "CPU + GPU time"}.get(rep.metric, rep.metric)
        print(f"ok: {args.trace} is within every limit (non-GEMM {100 * rep.share('non-GEMM'):.1f} % of {of})")
    return 1 if violations else 0


def _flops(args: argparse.Namespace) -> int:
    from .flops import flops_analysis
    from .report import flops_out

    rep = flops_analysis(args.trace, device_spec=args.device_spec, **_options(args))
    if args.roofline:
        flops_out.plot_roofline(rep, args.roofline)
    if args.shares_plot:
        flops_out.plot_shares(rep, args.shares_plot)
    if args.format == "json":
        _emit(flops_out.render_json(rep), args.output)
    elif args.format == "csv":
        _emit(getattr(rep, args.table).write_csv(), args.output)
    else:
        _render(args.output, lambda console: flops_out.render_table(rep, console, top=args.top))
    return 0


def _launch(args: argparse.Namespace) -> int:
    from .launch import launch_analysis
    from .report import launch_out

    window = None
    if args.window:
        try:
            lo, hi = (float(x) for x in args.window.split(":"))
        except ValueError:
            raise TraceError(args.trace, f"--window wants START:END in microseconds, not {args.window!r}") from None
        window = (lo, hi)
    rep = launch_analysis(args.trace, short_us=args.short_us, **_options(args))
    if args.plot:
        from .report.timeline import plot_timeline
        plot_timeline(rep, args.plot, window)
    if args.format == "json":
        _emit(launch_out.render_json(rep), args.output)
    elif args.format == "csv":
        df = launch_out.table_frame(rep, args.table)
        _emit(df.write_csv(), args.output)
    else:
        _render(args.output, lambda console: launch_out.render_table(rep, console))
    return 0


def _render(output: str | None, draw) -> None:
    """Draw a rich report to the terminal, or to ``output`` as plain 160-column text."""
    from rich.console import Console
    if output:
        with _open_out(output) as fh:
            draw(Console(file=fh, width=160, color_system=None))
    else:
        draw(Console())


def _open_out(path: str):
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return open(path, "w", encoding="utf-8")
    except OSError as exc:
        raise TraceError(path, f"cannot write: {exc.strerror or exc}") from None


def _emit(text: str, output: str | None) -> None:
    if output:
        with _open_out(output) as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":  # pragma: no cover
    entry()
