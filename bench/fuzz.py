"""Differential fuzzer of the Kineto loader: every load path gives one answer.

Each input is a small slice of a real trace (../shared/traces) mutated the way hostile or
broken writers do: wrong types, huge, negative, NaN and textual numbers, escapes and
invalid UTF-8, deep nesting, duplicate keys, non-JSON whitespace, event-boundary text
inside strings, non-object items, truncation, gzip members and corrupt CRCs. Every input is
loaded on every path (:data:`PATHS`: the whole document and chunks of several sizes, down to
the smallest; the C scanner and ``NONGEMM_NATIVE=off``; two scanning threads and one; the
read-ahead thread), and the answers must be equal: the same tables, metadata and warnings,
or the same one-line error. The pure-Python whole-document path is the reference.

Run it on a sanitizer build of the C extensions (docs/reliability.md): a sanitizer report
aborts the worker, and the driver keeps the input that did it. ::

    python3 bench/fuzz.py --inputs 2000 --out /tmp/fuzz            # a short run
    python3 bench/fuzz.py --seconds 3600 --jobs 2 --out /tmp/fuzz  # a long one

Exit code 0 when every input agreed on every path; failing inputs are written to
``OUT/failures/`` with the paths' answers.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(Path(__file__).resolve().parent))
if os.environ.get("NONGEMM_EXT_DIR"):  # a sanitizer build of the C extensions (bench/sanitize.sh)
    sys.path.insert(0, os.environ["NONGEMM_EXT_DIR"])

from fuzz_mutate import mutate, seeds  # noqa: E402

#: (name, environment, read ahead first): the load paths compared on every input
PATHS = [
    ("python whole", {"NONGEMM_NATIVE": "off"}, False),
    ("C whole", {}, False),
    ("C chunks 256, 2 threads", {"NONGEMM_CHUNK_BYTES": "256"}, False),
    ("C chunks 256, 1 thread", {"NONGEMM_CHUNK_BYTES": "256", "NONGEMM_SCAN_THREADS": "off"}, False),
    ("C chunks N, 2 threads", {"NONGEMM_CHUNK_BYTES": "N"}, False),
    ("python chunks 256", {"NONGEMM_CHUNK_BYTES": "256", "NONGEMM_NATIVE": "off"}, False),
    ("python chunks N", {"NONGEMM_CHUNK_BYTES": "N", "NONGEMM_NATIVE": "off"}, False),
    ("C read-ahead, chunks 256", {"NONGEMM_CHUNK_BYTES": "256"}, True),
    ("C read-ahead, chunks N", {"NONGEMM_CHUNK_BYTES": "N"}, True),
]
SWITCHES = ("NONGEMM_NATIVE", "NONGEMM_CHUNK_BYTES", "NONGEMM_SCAN_THREADS", "NONGEMM_READ_AHEAD")
TRACES = Path(os.environ.get("NONGEMM_SHARED_TRACES", ROOT.parent / "shared" / "traces"))
#: a worker's exit code when some input's paths disagreed (any other but 0 is a crash)
FAILED = 3
#: seconds one input may take on all paths together before it counts as a hang
HANG_S = 60


def answer(path: Path, keep_python: bool, read_ahead_first: bool):
    """What the loader makes of ``path`` on the path the environment selects: ("ok", tables,
    metadata, warnings) or ("error", the one line); an exception that is not the loader's
    one-line error is an answer of its own (a bug)."""
    from nongemm_trace.errors import TraceError
    from nongemm_trace.load import load_trace, start_read_ahead, stop_read_ahead

    try:
        if read_ahead_first and start_read_ahead(path, keep_python):
            from nongemm_trace.load.kineto import read_ahead
            read_ahead.wait()
        trace = load_trace(path, keep_python=keep_python)
    except TraceError as exc:
        return ("error", exc.one_line())
    except Exception as exc:  # noqa: BLE001 - the fuzzer reports it
        return ("unexpected", f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
    finally:
        stop_read_ahead()
    tables = {name: _plain(getattr(trace, name)) for name in ("ops", "launches", "activities", "python")}
    warnings = [(a.code, a.count, a.message) for a in trace.anomalies]
    return ("ok", tables, json.dumps(trace.metadata, sort_keys=True, default=repr), warnings)


def _plain(df):
    """A table with categorical columns as text (their codes depend on the string cache)."""
    import polars as pl

    return df.with_columns(pl.col(pl.Categorical).cast(pl.Utf8))


def same(a, b) -> bool:
    """Two answers are the same: the same error line, or equal tables (values, dtypes, column
    order, nulls), metadata and warnings."""
    if a[0] != "ok" or b[0] != "ok":
        return a == b
    return a[2:] == b[2:] and all(a[1][k].schema == b[1][k].schema and a[1][k].equals(b[1][k], null_equal=True)
                                   for k in a[1])


def check(path: Path, keep_python: bool, chunk_n: int, paths=PATHS) -> list[tuple[str, object]]:
    """The answer of each path (the reference first) for one input file."""
    out = []
    for name, env, ahead in paths:
        for k in SWITCHES:
            os.environ.pop(k, None)
        for k, v in env.items():
            os.environ[k] = str(chunk_n) if v == "N" else v
        out.append((name, answer(path, keep_python, ahead)))
    for k in SWITCHES:
        os.environ.pop(k, None)
    return out


def _summary(ans) -> str:
    if ans[0] != "ok":
        return f"{ans[0]}: {ans[1]}"
    _, tables, meta, warnings = ans
    rows = ", ".join(f"{k} {df.height} (digest {df.hash_rows().sum() if df.height else 0})" for k, df in tables.items())
    return f"ok: {rows}; warnings {[w[:2] for w in warnings]}"


def worker(args: argparse.Namespace) -> int:
    """Fuzz in this process; the input being tried is in OUT/current.* (a crash leaves it)."""
    if args.tier == "scanner":
        global scanner_check
        from fuzz_scanner import scanner_check
    rng = random.Random(args.seed)
    pool = json.loads(Path(args.seeds).read_text()) if args.seeds else seeds(TRACES, rng)
    out = Path(args.out)
    (out / "failures").mkdir(parents=True, exist_ok=True)
    stats = {"inputs": 0, "agree": 0, "errors": 0, "reports": 0, "failures": 0}
    deadline = time.monotonic() + args.seconds if args.seconds else None
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("hang")))
    while stats["inputs"] < args.inputs and (deadline is None or time.monotonic() < deadline):
        data, what = mutate(rng.choice(pool), rng)
        suffix = ".json.gz" if data[:2] == b"\x1f\x8b" else ".json"
        current = out / f"current-{args.seed}{suffix}"
        for old in out.glob(f"current-{args.seed}.*"):
            old.unlink()
        current.write_bytes(data)
        keep_python = rng.random() < 0.3
        if args.tier == "scanner":
            signal.alarm(HANG_S)
            try:
                verdict, detail = scanner_check(data, keep_python, rng)
            except TimeoutError:
                verdict, detail = "DISAGREE", f"hang: no answer within {HANG_S} s"
            finally:
                signal.alarm(0)
            stats["inputs"] += 1
            if verdict == "DISAGREE":
                stats["failures"] += 1
                keep = out / "failures" / f"{args.seed}-{stats['inputs']}{suffix}"
                keep.write_bytes(data)
                keep.with_suffix(".txt").write_text(f"mutations: {what}\nkeep_python: {keep_python}\n{detail}\n")
            else:
                stats["agree"] += 1
                stats["errors" if verdict == "skipped" else "reports"] += 1
            if stats["inputs"] % 1000 == 0:
                (out / f"stats-{args.seed}.json").write_text(json.dumps(stats))
            continue
        signal.alarm(HANG_S)
        try:
            paths = PATHS[:1] + (rng.sample(PATHS[1:], args.paths) if args.paths else PATHS[1:])
            answers = check(current, keep_python, rng.choice((300, 517, 1024, 2048, 4096)), paths)
        except TimeoutError:
            answers = [("hang", ("hang", f"no answer within {HANG_S} s"))]
        finally:
            signal.alarm(0)
        stats["inputs"] += 1
        ref = answers[0][1]
        bad = [(n, a) for n, a in answers if not same(a, ref)] or ([answers[0]] if ref[0] in ("unexpected", "hang")
                                                                   else [])
        if bad:
            stats["failures"] += 1
            keep = out / "failures" / f"{args.seed}-{stats['inputs']}{suffix}"
            keep.write_bytes(data)
            keep.with_suffix(".txt").write_text(
                f"mutations: {what}\nkeep_python: {keep_python}\n"
                + "".join(f"{n}: {_summary(a)}\n" for n, a in answers))
        else:
            stats["agree"] += 1
            stats["errors" if ref[0] == "error" else "reports"] += 1
        if stats["inputs"] % 100 == 0:
            (out / f"stats-{args.seed}.json").write_text(json.dumps(stats))
    (out / f"stats-{args.seed}.json").write_text(json.dumps(stats))
    current.unlink(missing_ok=True)
    return FAILED if stats["failures"] else 0


def driver(args: argparse.Namespace) -> int:
    """Run ``--jobs`` workers; a worker that dies (a sanitizer report, a crash) has its input kept
    and is started again with the next seed."""
    out = Path(args.out)
    (out / "crashes").mkdir(parents=True, exist_ok=True)
    for old in out.glob("stats-*.json"):  # a run's totals are its own
        old.unlink()
    from nongemm_trace.load.kineto import scanner

    ext = getattr(scanner.SCANNER, "__file__", None)
    if ext is None or not ext.startswith(os.environ.get("NONGEMM_EXT_DIR", "")):
        print(f"the C scanner is not the build asked for (NONGEMM_EXT_DIR): {ext}", file=sys.stderr)
        return 2
    start = time.monotonic()
    seeds_used = iter(range(args.seed, args.seed + 10**6, 1))
    running: dict[int, subprocess.Popen] = {}
    crashes = 0
    per_job = -(-args.inputs // args.jobs)

    def launch() -> None:
        seed = next(seeds_used)
        left = max(1.0, args.seconds - (time.monotonic() - start)) if args.seconds else 0
        cmd = [sys.executable, __file__, "--worker", "--seed", str(seed), "--out", str(out),
               "--inputs", str(per_job), "--seconds", str(left), "--paths", str(args.paths), "--tier", args.tier]
        if args.seeds:
            cmd += ["--seeds", args.seeds]
        env = dict(os.environ)
        env.setdefault("POLARS_MAX_THREADS", "1")  # tiny tables: a thread pool per process is only overhead
        running[seed] = subprocess.Popen(cmd, env=env, stderr=open(out / f"worker-{seed}.log", "w"))

    for _ in range(args.jobs):
        launch()
    while running:
        time.sleep(0.5)
        for seed, proc in list(running.items()):
            rc = proc.poll()
            if rc is None:
                continue
            del running[seed]
            if rc not in (0, FAILED):  # died: a sanitizer report, a crash, an error of the fuzzer
                crashes += 1
                for cur in out.glob(f"current-{seed}.*"):
                    cur.rename(out / "crashes" / f"{seed}{''.join(cur.suffixes)}")
                if not args.seconds or time.monotonic() - start < args.seconds:
                    launch()
    totals = {"inputs": 0, "agree": 0, "errors": 0, "reports": 0, "failures": 0}
    for f in out.glob("stats-*.json"):
        for k, v in json.loads(f.read_text()).items():
            totals[k] += v
    totals["crashes"] = crashes
    totals["tier"] = args.tier
    totals["extension"] = ext
    if args.tier == "paths":
        totals["paths_per_input"] = 1 + (args.paths or len(PATHS) - 1)
    totals["seconds"] = round(time.monotonic() - start, 1)
    print(json.dumps(totals))
    return 0 if not totals["failures"] and not crashes else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=10**9, help="inputs in all (default: until --seconds)")
    ap.add_argument("--seconds", type=float, default=0, help="stop after this long")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--paths", type=int, default=0,
                    help="paths per input besides the reference, drawn at random (default: all)")
    ap.add_argument("--out", default="/tmp/nongemm-fuzz")
    ap.add_argument("--tier", choices=("paths", "scanner", "structure"), default="paths",
                    help="paths: every load path end to end (default); scanner: the C scanner against the "
                         "reference on each input's events array, whole and in chunks (fast); structure: "
                         "nesting depth, overlapping ranges, gzip members and non-regular inputs at scale, "
                         "judged on time and memory (bench/fuzz_structure.py)")
    ap.add_argument("--seeds", help="the seed documents as a JSON list (written by --write-seeds), instead of "
                                     "slices of ../shared/traces made at start")
    ap.add_argument("--write-seeds", metavar="FILE", help="write the seed documents to FILE and stop")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.write_seeds:
        Path(args.write_seeds).write_text(json.dumps(seeds(TRACES, random.Random(args.seed))))
        return 0
    if args.inputs >= 10**9 and not args.seconds:
        ap.error("give --inputs or --seconds")
    if args.tier == "structure":
        import fuzz_structure

        return fuzz_structure.main(args.seconds or 30, args.out, args.seed)
    return worker(args) if args.worker else driver(args)


if __name__ == "__main__":
    sys.exit(main())
