"""Capture a torch.profiler (Kineto) trace of N steps in one line, with run metadata.

In a loop you already have::

    from nongemm_trace.collectors.torch_profiler import profile_steps

    with profile_steps("out", "resnet50_bs8", steps=5, metadata={"model": "resnet50", "batch": 8}) as step:
        for batch in loader:
            train_step(batch)
            step()                      # marks ProfilerStep#N; stops profiling after the last step

Or hand over a step function::

    capture(lambda: model(x), "out", "resnet50_bs8", steps=5)

Or from the shell, with a factory ``pkg.module:make_step`` that returns a step
callable (or ``(step, metadata)``)::

    python -m nongemm_trace.collectors.torch_profiler pkg.module:make_step --steps 5 -o out/ --name resnet50

Each capture writes ``NAME.json.gz`` (the Kineto trace, with the metadata under
``nongemm_run`` and as trace metadata) and, when nongemm-trace is importable,
``NAME.nongemm.json`` (the ``analyze`` summary). Schedule: ``wait`` idle steps,
``warmup`` traced-but-discarded steps, then ``steps`` active steps, each marked
``ProfilerStep#N``; ``record_shapes=True``; CPU + CUDA activities when CUDA is there.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .unprofiled import METADATA_KEY, Rounds


def run_metadata(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """torch / CUDA versions, device, host, git commit of the working directory (if any), plus ``extra``."""
    import torch

    meta: dict[str, Any] = {"torch": torch.__version__, "python": sys.version.split()[0],
                            "cuda": getattr(torch.version, "cuda", None), "hip": getattr(torch.version, "hip", None)}
    if torch.cuda.is_available():
        meta["device"] = torch.cuda.get_device_name(0)
        meta["device_count"] = torch.cuda.device_count()
    else:
        meta["device"] = "cpu"
    git = shutil.which("git")
    if git:
        try:
            r = subprocess.run([git, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
            if r.returncode == 0:
                meta["git_commit"] = r.stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            pass
    meta.update(extra or {})
    return meta


def trace_handler(out_dir: str | os.PathLike, name: str, metadata: dict[str, Any] | None = None,
                  summary: bool = True, on_written: Callable[[Path], None] | None = None,
                  held: list[tuple[Path, dict[str, Any]]] | None = None,
                  extra: Callable[[], dict[str, Any]] | None = None) -> Callable[[Any], None]:
    """An ``on_trace_ready`` callback: writes ``NAME.json.gz`` and ``NAME.nongemm.json``, then calls
    ``on_written(path)`` (the integrations' summaries and gates). ``extra()``: more top-level keys
    for the document (the unprofiled measurement). With ``held`` (a list), the document is kept
    there instead, to be written by :func:`finish_trace` once the steps after the window are timed.

    A second cycle of the schedule (``repeat`` > 1) writes ``NAME.2.json.gz`` and so on."""
    out = Path(out_dir)
    count = {"n": 0}
    meta = run_metadata(metadata)

    def handler(prof) -> None:
        count["n"] += 1
        stem = name if count["n"] == 1 else f"{name}.{count['n']}"
        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(tmp) / "trace.json"
            prof.export_chrome_trace(str(raw))
            doc = json.loads(raw.read_text())
        doc["nongemm_run"] = meta
        doc.update(extra() if extra is not None else {})
        path = out / f"{stem}.json.gz"
        if held is not None:
            held.append((path, doc))
        else:
            finish_trace(path, doc, summary, on_written)

    return handler


def finish_trace(path: Path, doc: dict[str, Any], summary: bool = True,
                 on_written: Callable[[Path], None] | None = None) -> Path:
    """Write the trace document (gzip, through a temporary file: a killed run leaves no half trace),
    its summary, and call ``on_written``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial")
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=6) as fh:
        json.dump(doc, fh)
    os.replace(tmp, path)
    if summary:
        write_summary(path)
    if on_written is not None:
        on_written(path)
    return path


def write_summary(trace_path: Path) -> Path | None:
    """``analyze`` the trace and write its JSON report next to it (skipped, with a note on
    stderr, when nongemm-trace is not importable in this environment)."""
    try:
        from nongemm_trace import analyze
        from nongemm_trace.report.json_out import render_json
    except ImportError as exc:
        print(f"collectors: no summary for {trace_path} (nongemm-trace not importable: {exc})", file=sys.stderr)
        return None
    out = trace_path.with_name(trace_path.name.replace(".json.gz", ".nongemm.json"))
    out.write_text(render_json(analyze(trace_path)))
    return out


def _activities():
    import torch
    acts = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    return acts


@contextlib.contextmanager
def profile_steps(out_dir: str | os.PathLike, name: str, *, steps: int = 5, wait: int = 1, warmup: int = 1,
                  metadata: dict[str, Any] | None = None, with_stack: bool = False, with_modules: bool = False,
                  record_shapes: bool = True, profile_memory: bool = False, with_flops: bool = False,
                  summary: bool = True, on_written: Callable[[Path], None] | None = None,
                  unprofiled: Callable[[], dict[str, Any] | None] | None = None,
                  held: list[tuple[Path, dict[str, Any]]] | None = None) -> Iterator[Callable[[], None]]:
    """Profile the steps of an existing loop; call the yielded function once per step.
    ``on_written(path)`` is called once the trace file is written. The yielded function carries
    the ``torch.profiler.profile`` as ``.profiler``, so a caller can read torch's own tables of
    the same steps (``step.profiler.key_averages()``, after the ``with`` block) as a reference.
    ``unprofiled()``: the run measured without the profiler (:mod:`.unprofiled`), written into the
    trace as ``nongemm_unprofiled``; ``held``: keep the document for :func:`finish_trace`."""
    import torch

    settings: dict[str, Any] = dict(record_shapes=record_shapes, with_stack=with_stack, profile_memory=profile_memory,
                    with_flops=with_flops, with_modules=with_modules)
    extra = None if unprofiled is None else (lambda: {k: v for k, v in ((METADATA_KEY, unprofiled()),) if v})
    sched = torch.profiler.schedule(wait=wait, warmup=warmup, active=steps, repeat=1)
    prof = torch.profiler.profile(activities=_activities(), schedule=sched, **settings,
                                  on_trace_ready=trace_handler(out_dir, name, metadata, summary, on_written,
                                                               held=held, extra=extra))
    meta = run_metadata(metadata)
    active_from = wait + warmup  # metadata given before the trace is recording is dropped (with a warning)

    def add_metadata() -> None:
        # Kineto writes a value's backslashes as slashes, so torch's escaped double quote would end
        # the JSON string and break the file: values go in with single quotes (``nongemm_run`` keeps them)
        for k, v in meta.items():
            prof.add_metadata(f"nongemm_{k}", str(v).replace('"', "'"))

    def step() -> None:
        prof.step()
        if prof.step_num == active_from:
            add_metadata()

    step.profiler = prof  # type: ignore[attr-defined]
    with prof:
        if active_from == 0:
            add_metadata()
        yield step


def capture(step: Callable[[], Any], out_dir: str | os.PathLike, name: str, *, steps: int = 5, wait: int = 1,
            warmup: int = 1, metadata: dict[str, Any] | None = None, with_stack: bool = False,
            summary: bool = True, unprofiled_rounds: int = 6, unprofiled_steps: int = 5,
            **settings: bool) -> Path:
    """Run ``step`` wait + warmup + steps times under the profiler, back to back as a training or
    inference loop runs (no synchronize between steps: PyTorch's profiler recipe; the steps are told
    apart by the loop's period, docs/latency.md); returns the trace path.

    Around the profiled window, ``unprofiled_rounds`` rounds of ``unprofiled_steps`` steps run
    without the profiler (half before, half after; :mod:`.unprofiled`), and their times go into
    the trace as ``nongemm_unprofiled`` (0 rounds: none). ``settings``: the profiler's
    ``record_shapes`` (default on), ``profile_memory``, ``with_flops``, ``with_modules``."""
    import torch

    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    rounds = Rounds(step, max(unprofiled_steps, 1))
    chosen: dict[str, Any] = {"record_shapes": True, **settings, "with_stack": with_stack}
    held: list[tuple[Path, dict[str, Any]]] = []
    if unprofiled_rounds:
        step()
        sync()  # a first step outside every timing (lazy initialisation, allocator growth)
        rounds.run((unprofiled_rounds + 1) // 2, "before")
    with profile_steps(out_dir, name, steps=steps, wait=wait, warmup=warmup, metadata=metadata, summary=summary,
                       unprofiled=(lambda: rounds.summary(chosen)) if unprofiled_rounds else None, held=held,
                       **chosen) as mark:
        for _ in range(wait + warmup + steps):
            step()
            mark()
        sync()  # the queue drained before the rounds after the window (the profiler syncs as it stops)
    if unprofiled_rounds:
        rounds.run(unprofiled_rounds // 2, "after")
    for path, doc in held:
        if unprofiled_rounds:
            doc[METADATA_KEY] = rounds.summary(chosen)
        finish_trace(path, doc, summary)
    return Path(out_dir) / f"{name}.json.gz"


def load_factory(spec: str) -> tuple[Callable[[], Any], dict[str, Any]]:
    """``pkg.module:make_step`` -> (step, metadata); the factory returns a step or (step, metadata)."""
    if ":" not in spec:
        raise SystemExit(f"collectors: expected MODULE:FUNCTION, got {spec!r}")
    mod_name, fn_name = spec.split(":", 1)
    sys.path.insert(0, os.getcwd())
    try:
        fn = getattr(importlib.import_module(mod_name), fn_name)
    except (ImportError, AttributeError) as exc:
        raise SystemExit(f"collectors: cannot load {spec}: {exc}") from None
    made = fn()
    if isinstance(made, tuple):
        step, meta = made
        return step, dict(meta or {})
    return made, {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nongemm_trace.collectors.torch_profiler",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("factory", help="MODULE:FUNCTION returning a step callable or (step, metadata)")
    ap.add_argument("-o", "--out", default=".", help="output folder")
    ap.add_argument("--name", help="trace name (default: the function's name)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--wait", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--with-stack", action="store_true")
    ap.add_argument("--no-summary", action="store_true")
    ap.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE", help="extra run metadata")
    args = ap.parse_args(argv)
    step, meta = load_factory(args.factory)
    for kv in args.meta:
        k, _, v = kv.partition("=")
        meta[k] = v
    name = args.name or args.factory.split(":")[1]
    path = capture(step, args.out, name, steps=args.steps, wait=args.wait, warmup=args.warmup, metadata=meta,
                   with_stack=args.with_stack, summary=not args.no_summary)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
