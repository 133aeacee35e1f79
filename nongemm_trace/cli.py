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

from .errors import OptionError, TraceError  # noqa: E402
from .cli_args import parser  # noqa: E402  (no polars: the allocator is set above)

EXIT_BAD_INPUT = 2


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
    args = parser().parse_args(argv)
    try:
        return _run(args)
    except OptionError as exc:  # the library names parameters; the user typed flags
        print(f"nongemm-trace: error: {_as_flags(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
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


def _as_flags(exc: OptionError) -> str:
    import re

    text = exc.one_line()
    for name in exc.parameters:
        text = re.sub(rf"(?<![-\w]){re.escape(name)}(?!\w)", "--" + name.replace("_", "-"), text)
    return text


def _run(args: argparse.Namespace) -> int:
    if args.command == "analyze":
        if args.example:
            from .examples import example_trace
            args.traces = [*args.traces, str(example_trace())]
        if not args.traces:
            raise TraceError(None, "analyze needs a TRACE (or --example for the trace shipped with the package)")
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
                step_marker=args.step_marker, skip_steps=args.skip_steps, keep_python=args.keep_python,
                layer_info=args.layer_info)
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
                step_marker=args.step_marker, skip_steps=args.skip_steps, keep_python=args.keep_python,
                layer_info=args.layer_info)
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
        from .report.batch_table import batch_rows
        _emit(batch_rows(d, args.format), args.output)
    else:
        from .report.batch_table import render_batch
        _render(args.output, lambda console: render_batch(d, console))
    return EXIT_BAD_INPUT if result.failed else 0


def _convert(args: argparse.Namespace) -> int:
    from .convert import convert

    trace = convert(args.report, args.output)
    print(f"wrote {args.output}: {trace.activities.height:,} GPU activities, {trace.launches.height:,} launch calls, "
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


#: the width of output that is not a terminal (a pipe, a CI log, a file): wide enough that every
#: table is sized to its content and no number or name is cut; ``COLUMNS`` sets another
UNBOUNDED_WIDTH = 100_000


def _render(output: str | None, draw) -> None:
    """Draw a rich report to the terminal (its width), or whole to a pipe or to ``output`` as plain text."""
    from rich.console import Console

    columns = os.environ.get("COLUMNS", "").strip()
    width = int(columns) if columns.isdigit() and int(columns) > 0 else UNBOUNDED_WIDTH
    if output:
        with _open_out(output) as fh:
            draw(Console(file=fh, width=width, color_system=None))
    elif sys.stdout.isatty():
        draw(Console())
    else:
        draw(Console(width=width, color_system=None))


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
