"""Many traces at once: files, folders and globs, analysed in parallel worker processes
(or Ray tasks), reported per trace, combined, and across distributed ranks.

Each worker runs the same :func:`~nongemm_trace.analyze` as a single-file run and
returns its JSON object, with the documents of the analyses the registry lists for the batch
(``AnalysisSpec.batch``) under ``analyses``: the driver sends the specs it lists to the workers, so an
analysis registered where the batch is started is run in every worker with no edit here. A file
that cannot be analysed is named with its one-line error while the others still report, and so
is one whose worker died or that ran past its time limit (the engines, which isolate each
trace: :mod:`.batch_workers`). The combined view sums GPU time and activities per category over
all traces; the ranks view compares per-rank step times (mean CPU span of the steps) and their straggler spread.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import env
from ..core.remote import expand_url, is_url
from ..errors import OptionError, TraceError
from ..load.formats import suffix_text, trace_suffixes
from ..models.batch import BatchResult
from .collectives import CALLS_KEY, collectives_view, worker_calls, write_collectives
from .summary import combined

if TYPE_CHECKING:  # pragma: no cover
    from ..analyses.registry import AnalysisSpec
    from ..pipeline.options import AnalysisOptions

#: the file names of every input format (their registry entries)
TRACE_SUFFIXES = trace_suffixes()
#: this tool's own outputs and sidecar files, which end in a trace suffix but are no trace
SKIP_SUFFIXES = (".nongemm.json", ".meta.json", ".golden.json.gz", ".golden.json")


def _is_trace(p: Path) -> bool:
    n = p.name
    return n.endswith(TRACE_SUFFIXES) and not n.endswith(SKIP_SUFFIXES)


def expand_inputs(items: list[str]) -> list[str]:
    """Files as given; folders: every trace file below them (recursively); globs expanded; URLs
    (``s3://``, ``gs://``, any fsspec URL) the same way: a prefix as a folder (:mod:`..core.remote`).
    Order: as given, folders and globs sorted. Nothing found for an item is an error."""
    out: list[str] = []
    for it in items:
        p = Path(it)
        if is_url(it):
            out += expand_url(it, lambda name: _is_trace(Path(name)))
        elif p.is_dir():
            found = sorted(str(f) for f in p.rglob("*") if f.is_file() and _is_trace(f))
            if not found:
                raise TraceError(it, f"folder holds no trace files ({suffix_text(TRACE_SUFFIXES)})")
            out += found
        elif any(ch in it for ch in "*?[") and not p.exists():
            found = sorted(f for f in glob.glob(it, recursive=True) if Path(f).is_file())
            if not found:
                raise TraceError(it, "no file matches this pattern")
            out += found
        else:
            out.append(it)
    return list(dict.fromkeys(out))  # in order, each once


def _one_core_each() -> None:
    """In a batch worker: no scanning threads per trace (the batch already runs one trace per
    core; threads each would only oversubscribe the cores and add memory)."""
    env.assign("NONGEMM_SCAN_THREADS", "off")


#: per rank, from its launch analysis: the time line the straggler is told by; busy time by class
#: (GEMM, non-GEMM, unclassified, exposed communication) + idle = span. A rank's ``timeline`` adds
#: ``host_communication_us``: the self CPU time of its communication ops (the straggler on CPU-only ranks)
TIMELINE_FIELDS = ("span_us", "busy_us", "idle_us", "host_bound_idle_us", "communication_us",
                   "exposed_communication_us", "busy_by_class_us")


def _work(path: str, options: dict[str, Any], parquet_dir: str | None, index: int,
          listing: tuple[AnalysisSpec, ...] = ()) -> dict[str, Any]:
    """One trace, in a worker: the analyze JSON object (with the documents of the ``listing``'s analyses),
    or the error line."""
    from ..analyses import run
    from ..analyses.registry import run_listed
    from ..core.remote import local_path
    from ..pipeline.analysis import open_analysis

    try:
        with local_path(path) as local:  # a URL: its object fetched, bounded, for this trace only
            analysis, typed = open_analysis(local, options)
            rep = analysis.report(typed)
            if local is not path:  # named by its URL, not by the fetched copy
                rep.trace = str(path)
            rank = rank_of(rep)
            timeline = None
            if rank is not None:  # a rank: what it waited for, from the same load
                s = run("launch", analysis, None, typed.selecting()).summary
                timeline = rank_timeline(rep, s)
                calls = _collective_calls(analysis, typed, rep)
            listed = run_listed(analysis, listing, typed.selecting())
    except TraceError as exc:
        return {"trace": path, "error": exc.one_line()}
    except MemoryError:
        return {"trace": path, "error": f"{path}: out of memory"}
    except Exception as exc:  # noqa: BLE001 - one bad file never stops the batch
        return {"trace": path, "error": f"{path}: unexpected failure ({type(exc).__name__}: {exc})"}
    d = rep.to_dict()
    d["rank"] = rank
    if timeline is not None:
        d["timeline"] = timeline
        d[CALLS_KEY] = calls
    d["step_times_us"] = step_times_us(rep)
    if listed:
        d["analyses"] = {s.name: {"error": m.one_line()} if isinstance(m, TraceError) else m.to_dict()
                         for s, m in listed}
    if parquet_dir:
        _write_parts(rep, Path(parquet_dir), index, d["rank"])
    return d


def _collective_calls(analysis, typed: AnalysisOptions, rep) -> dict[str, Any]:
    """A rank's collective calls and its device's link, for the collectives view (:mod:`.collectives`)."""
    from ..analyses.collectives import collective_calls
    from ..devices.links import link_of

    calls = collective_calls(analysis, typed)
    return worker_calls(calls, link_of(rep.metadata.get("device")))


def rank_of(rep) -> Any:
    """The trace's distributed rank (``distributedInfo``), or None."""
    di = rep.metadata.get("trace", {}).get("distributedInfo")
    return di.get("rank") if isinstance(di, dict) else None


def rank_timeline(rep, launch_summary: dict[str, Any]) -> dict[str, Any]:
    """A rank's time line for :func:`ranks`: its launch analysis's figures and its host time in collectives."""
    timeline = {k: launch_summary.get(k) for k in TIMELINE_FIELDS}
    timeline["host_communication_us"] = _host_communication_us(rep)
    return timeline


def rank_entry(rep, launch_summary: dict[str, Any]) -> dict[str, Any]:
    """What :func:`ranks` reads of one rank, from a report and its launch summary (the HTML page's way;
    a batch worker sends the whole report document)."""
    return {"trace": rep.trace, "rank": rank_of(rep), "gpu_time_us": rep.to_dict()["gpu_time_us"],
            "step_times_us": step_times_us(rep), "timeline": rank_timeline(rep, launch_summary)}


def step_times_us(rep) -> list[float]:
    """Each step's time as every command gives it: the loop's period (``step_ns``, metrics/period.py),
    or the step's CPU span where the trace has no host timeline to pace it by."""
    if not rep.steps.height:
        return []
    return [round((p if p is not None else c) / 1000, 3)
            for p, c in zip(rep.steps["step_ns"].to_list(), rep.steps["cpu_time_ns"].to_list())]


def _host_communication_us(rep) -> float:
    """Self CPU time of the communication ops (every thread; wrappers left out, as in the cpu metric):
    where a rank's host waits in collectives (gloo's run on its own threads, as ops of the trace)."""
    import polars as pl
    ops = rep.ops.filter((pl.col("category") == "communication") & ~pl.col("wrapper"))
    return round(int(ops["self_cpu_time_ns"].sum()) / 1000, 3)


def _write_parts(rep, root: Path, index: int, rank: Any) -> None:
    import polars as pl

    from ..core.safe_write import write_file
    from ..report.files import table_frame
    for table in ("categories", "ops", "kernels"):
        df = table_frame(rep, table).with_columns(pl.lit(rep.trace).alias("trace"),
                                                  pl.lit(rank, dtype=pl.Int64).alias("rank"))
        d = root / f"table={table}"
        d.mkdir(parents=True, exist_ok=True)
        write_file(d / f"part-{index:05d}.parquet", df.write_parquet)


def _ms_range(values_us: list[float]) -> str:
    """``12.3-14.5 ms``, or one figure where both ends print the same (a range of one value, two ranks)."""
    lo, hi = f"{min(values_us) / 1000:,.1f}", f"{max(values_us) / 1000:,.1f}"
    return f"{lo} ms" if lo == hi else f"{lo}-{hi} ms"


def _straggler(rows: list[dict[str, Any]]) -> tuple[Any, str]:
    """The rank the others wait for: in a collective every rank waits until the last one arrives, so the
    straggler is the rank with the least time in communication kernels (its collectives start last and
    end at once), ties broken by the most host-bound idle time. Without communication kernels (CPU-only
    ranks, gloo), the same rule on the host time in communication ops; the step times cannot tell, as the
    collectives make every rank's step as long as the slowest's. Without collectives: the slowest mean step."""
    timed = [r for r in rows if r.get("communication_us") is not None]
    if len(timed) == len(rows) and any(r["communication_us"] > 0 for r in rows):
        slow = min(rows, key=lambda r: (r["communication_us"], -(r.get("host_bound_idle_us") or 0.0)))
        others = [r["communication_us"] for r in rows if r is not slow]
        return slow["rank"], (
            f"rank {slow['rank']} spends {slow['communication_us'] / 1000:,.1f} ms in collectives, the others "
            f"{_ms_range(others)} (waiting for it); it is "
            f"{(slow.get('host_bound_idle_us') or 0) / 1000:,.1f} ms idle waiting for its CPU and "
            f"{(slow.get('busy_us') or 0) / 1000:,.1f} ms busy")
    host = [r.get("host_communication_us") for r in rows]
    if all(h is not None for h in host) and any(host):
        slow = min(rows, key=lambda r: r["host_communication_us"])
        others = [r["host_communication_us"] for r in rows if r is not slow]
        return slow["rank"], (
            f"no communication kernels: rank {slow['rank']} spends {slow['host_communication_us'] / 1000:,.1f} ms of "
            f"host time in collective ops, the others {_ms_range(others)} "
            f"(waiting for it)")
    if all(r["mean_step_us"] is not None for r in rows):
        slow = max(rows, key=lambda r: r["mean_step_us"])
        return slow["rank"], (f"no collectives in the traces: rank {slow['rank']} has the longest mean step "
                              f"({slow['mean_step_us'] / 1000:,.1f} ms)")
    slow = max(rows, key=lambda r: r.get("span_us") or 0.0)
    return slow["rank"], (f"no collectives and no steps in the traces: rank {slow['rank']} has the longest GPU "
                          f"span ({(slow.get('span_us') or 0) / 1000:,.1f} ms)")


def ranks(reports: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per distributed rank: step times and its time line; the straggler and its evidence. Ranks
    without step markers (an FSDP run profiled without a schedule) are ranks too: their time line
    tells the straggler, and a note says that they have no step times."""
    per = [r for r in reports if r.get("rank") is not None]
    if len(per) < 2:
        return None
    rows = []
    for r in sorted(per, key=lambda r: r["rank"]):
        st = r.get("step_times_us") or []
        rows.append({"rank": r["rank"], "trace": r["trace"], "steps": len(st),
                     "mean_step_us": round(sum(st) / len(st), 3) if st else None, "max_step_us": max(st, default=None),
                     "gpu_time_us": r["gpu_time_us"], **(r.get("timeline") or {})})
    means = sorted(x["mean_step_us"] for x in rows if x["mean_step_us"] is not None)
    median = (means[len(means) // 2] if len(means) % 2 else (means[len(means) // 2 - 1] + means[len(means) // 2]) / 2) \
        if len(means) > 1 else None
    rank, evidence = _straggler(rows)
    out = {"ranks": rows, "straggler_rank": rank, "straggler_evidence": evidence,
           "straggler_spread": round((means[-1] - means[0]) / median, 6) if median else None}
    unstepped = [str(x["rank"]) for x in rows if not x["steps"]]
    if unstepped:
        out["note"] = (f"rank{'s' if len(unstepped) > 1 else ''} {', '.join(unstepped)} "
                       f"{'have' if len(unstepped) > 1 else 'has'} no step markers: no step times to compare "
                       "(the straggler is told by the time lines; --step-marker NAME names the steps)")
    return out


def run_batch(paths: list[str], options: dict[str, Any], *, engine: str = "process", workers: int | None = None,
              parquet_dir: str | None = None, progress: Callable[[int, int, str], None] | None = None,
              timeout: float | None = None, address: str | None = None) -> BatchResult:
    """Analyse ``paths`` (already expanded) in parallel; results keep the input order. Each trace
    is isolated (:mod:`.batch_workers`): one whose worker dies, or that takes longer than
    ``timeout`` seconds, is failed with its one-line error and the others still report.
    ``engine="ray"`` with ``address`` (else ``RAY_ADDRESS``): on that Ray cluster (:mod:`.ray_engine`),
    where each trace's report is cut to its row and the combined view and the collectives are reduced
    in the cluster (:mod:`.summary`)."""
    from .batch_workers import Failure, bounded_workers, run_processes

    if timeout is not None and not timeout > 0:  # NaN, 0 and negative limits could never be met
        raise OptionError(None, f"timeout must be a number of seconds above 0, not {timeout!r}", "timeout")
    if address and engine != "ray":
        raise OptionError(None, f"an address (a Ray cluster's) needs the Ray engine, not '{engine}'", "address")
    if engine not in ("process", "ray"):
        raise TraceError(None, f"unknown engine '{engine}' (process or ray)")
    from ..analyses.registry import listed

    listing = listed("batch")  # sent with each job: a worker's registry is its own imports'
    jobs = [(p, options, parquet_dir, i, listing) for i, p in enumerate(paths)]
    count = [0]

    def done(i: int) -> None:
        count[0] += 1
        if progress:
            progress(count[0], len(paths), paths[i])
    if engine == "ray":
        return _run_on_ray(paths, jobs, workers, timeout, done, address, parquet_dir)
    results = run_processes(jobs, _work, workers=bounded_workers(workers, len(paths)), timeout=timeout,
                            prepare=_prepare_worker, done=done)
    results = [_failed(paths[i], r) if isinstance(r, Failure) else r for i, r in enumerate(results)]
    ok = [r for r in results if r and "error" not in r]
    failed = [{"trace": r["trace"], "error": r["error"]} for r in results if r and "error" in r]
    calls, per_rank = collectives_view(ok)
    return _result(ok, failed, combined(ok, failed), calls, per_rank, parquet_dir)


def _result(ok: list[dict[str, Any]], failed: list[dict[str, str]], summary: dict[str, Any],
            calls: list[dict[str, Any]], per_rank: dict[int, dict[str, Any]], parquet_dir: str | None) -> BatchResult:
    if parquet_dir and calls:
        write_collectives(calls, Path(parquet_dir))
    view = ranks(ok)
    if view is not None and per_rank:
        for row in view["ranks"]:
            row["collectives"] = per_rank.get(row["rank"])
    return BatchResult(ok, failed, summary, view, calls)


#: what a Ray task may use when NONGEMM_MAX_MEMORY does not say: a cluster's nodes are not this machine, so
#: the budget is not taken from this machine's free memory
RAY_TASK_BUDGET = 2 << 30


def _run_on_ray(paths: list[str], jobs: list[tuple], workers: int | None, timeout: float | None,
                done: Callable[[int], None], address: str | None, parquet_dir: str | None) -> BatchResult:
    """The batch as Ray tasks: each declares its memory budget, rows come to the driver, parts are reduced in
    the cluster."""
    import functools

    try:
        import ray  # noqa: F401
    except ImportError:
        raise TraceError(None, "--engine ray needs Ray: pip install 'nongemm-trace[ray]'") from None
    from ..core.memory_guard import FLOOR_BYTES
    from ..load.budget import max_memory
    from . import summary
    from .batch_workers import Failure, bounded_workers
    from .ray_engine import in_flight, ray_address, ray_session, reduce_parts, run_ray

    address = ray_address(address)
    if address is None:
        workers = bounded_workers(workers, len(paths))
    budget = max_memory() if env.text("NONGEMM_MAX_MEMORY") else RAY_TASK_BUDGET
    settings = {k: v for k, v in os.environ.items() if k.startswith("NONGEMM_")} | {"NONGEMM_MAX_MEMORY": str(budget)}
    prepare = functools.partial(_prepare_worker, settings)
    kept: dict[int, Any] = {}
    with ray_session(address, workers):
        results = run_ray(jobs, _work, workers=in_flight(workers, len(paths)), timeout=timeout,
                          prepare=prepare, done=done, memory=budget + 2 * FLOOR_BYTES, split=summary.split, kept=kept)
        lost: set[int] = set()
        calls, per_rank = reduce_parts({i: ref for i, ref in kept.items() if results[i].get("rank") is not None},
                                       summary.collectives_of, lost=lost.add, tree=False)
        total = reduce_parts({i: ref for i, ref in kept.items() if i not in lost}, summary.sums_only, lost=lost.add)
    results = [_failed(paths[i], r) if isinstance(r, Failure) else r for i, r in enumerate(results)]
    for i in sorted(lost):  # its result was lost with its node after it finished: it cannot count
        results[i] = {"trace": paths[i], "error": TraceError(paths[i], "its result was lost with the Ray node that "
                                                                       "held it").one_line()}
    ok = [r for r in results if r and "error" not in r]
    failed = [{"trace": r["trace"], "error": r["error"]} for r in results if r and "error" in r]
    return _result(ok, failed, summary.combined_of(total, len(failed)), calls, per_rank, parquet_dir)


#: the exit status of a worker its memory guard ended (``core.memory_guard``; the worker reports
#: every other failure as a result)
MEMORY_EXIT = 2


def _failed(path: str, f) -> dict[str, str]:
    """A trace whose worker gave no result: its one-line error."""
    if f.kind == "timeout":
        problem = f"timed out (no result within the time limit of {f.how} per trace)"
    elif f.kind == "memory" or f.how == f"exit status {MEMORY_EXIT}":  # the worker's memory guard ended it
        problem = "needs more memory than the budget to analyse (NONGEMM_MAX_MEMORY, per worker)"
    else:
        problem = f"the worker analysing it died ({f.how})"
    return {"trace": path, "error": TraceError(path, problem).one_line()}


def _prepare_worker(settings: dict[str, str] | None = None) -> None:
    """A worker process or Ray task, before its (first) trace: one core each, and the analysis imported
    (so that a trace's time limit never counts the interpreter's start-up). ``settings``: the driver's
    ``NONGEMM_*`` settings (a Ray task on another node has not got the driver's environment)."""
    os.environ.update(settings or {})
    _one_core_each()
    from ..core import memory_guard
    from ..load.budget import max_memory
    from ..pipeline import analysis  # noqa: F401

    memory_guard.start(max_memory())  # each worker its own budget: over it, it ends (and only its trace fails)

