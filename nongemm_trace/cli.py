"""Command line: ``nongemm-trace analyze TRACE [options]``.

Dispatches to the subcommands' handlers (:mod:`nongemm_trace.commands`, a table of
name -> arguments, handler) and maps errors to exit codes: bad input exits with code 2
and one line on stderr naming the file and the problem (library parameters shown as
flags); nothing but the report goes to stdout.
"""

from __future__ import annotations

import argparse
import os
import sys

# polars' allocator (jemalloc) keeps several arenas per core, and pages freed in one are not
# reused by another; and it returns freed pages to the system only after 10 s, longer than most
# runs: one arena. Freed pages returned at once lower the peaks a little (5-7 % from 47 MB of JSON
# up), at a system-time cost in proportion to the memory freed and used again (pages faulted in
# anew): nothing on a small trace, where the interpreter and polars' code are the peak, but a fifth
# more time at 47 MB and half as much again at 184 MB. So at once only below LARGE_TRACE_BYTES, and
# after 100 ms above (figures: docs/benchmarks.md, "Memory as a budget"); each thread's cache of
# freed blocks holds small ones only (4 KiB), which cost no time measured here. jemalloc reads this
# once, when polars is first imported, so it is set before anything imports polars; a value already
# set wins.
ALLOCATOR = "narenas:1,dirty_decay_ms:0,muzzy_decay_ms:0,tcache_max:4096"
ALLOCATOR_LARGE = "narenas:1,background_thread:true,dirty_decay_ms:100,muzzy_decay_ms:0"
LARGE_TRACE_BYTES = 32 << 20


def _json_bytes(arg: str) -> int:
    """About how many bytes of JSON a command-line argument names (0: not a file; a ``.gz`` inflates
    about 8 times)."""
    try:
        size = os.stat(arg).st_size if not arg.startswith("-") and os.path.isfile(arg) else 0
    except (OSError, ValueError):
        return 0
    return size * 8 if arg.endswith(".gz") else size


def _allocator(argv: list[str]) -> str:
    return ALLOCATOR_LARGE if any(_json_bytes(a) >= LARGE_TRACE_BYTES for a in argv) else ALLOCATOR


os.environ.setdefault("_RJEM_MALLOC_CONF", _allocator(sys.argv[1:]))

#: numpy's OpenBLAS starts a thread per core when numpy is imported (the latency commands import it),
#: and those threads cost CPU time while they start and wait; the commands do element-wise array work
#: only, never linear algebra, so one thread (figures: docs/benchmarks.md). A value already set wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

#: glibc maps an allocation this large (or larger) on its own and unmaps it when freed. Its default
#: threshold moves up to the size of each mapped block freed (the file is read in blocks of MBs),
#: after which such blocks come from heaps that keep the freed memory: fixed, the reads' memory goes
#: back to the system (docs/benchmarks.md). Batch workers read it from the environment when they start.
MMAP_THRESHOLD = 128 << 10


def _fix_mmap_threshold() -> None:
    os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", str(MMAP_THRESHOLD))
    try:
        import ctypes

        ctypes.CDLL(None).mallopt(-3, int(os.environ["MALLOC_MMAP_THRESHOLD_"]))  # -3: M_MMAP_THRESHOLD
    except (OSError, AttributeError, ValueError):  # not glibc (musl, macOS): its own allocator's rules
        pass


_fix_mmap_threshold()

from .commands import BY_NAME  # noqa: E402
from .commands.args import parse  # noqa: E402  (no polars: the allocator is set above)
from .commands.common import EXIT_BAD_INPUT, finished  # noqa: E402
from .errors import OptionError, TraceError  # noqa: E402


def entry() -> None:
    """The console command: :func:`main`; after a single-trace analysis, the process exits
    without the interpreter's teardown (freeing a big trace's tables and modules one by one
    takes 0.06-0.1 s, about 5 % of a 200 MB run), its output flushed first.

    Nothing at all in a batch worker that is starting: ``spawn`` imports the parent's main script
    again in each worker, and a wrapper script that calls ``entry()`` without an
    ``if __name__ == "__main__"`` guard would otherwise run the whole command again there."""
    import multiprocessing.process

    if getattr(multiprocessing.process.current_process(), "_inheriting", False):
        return
    code = main()
    if finished["single_analysis"]:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:  # a closed pipe: nothing more can be written anyway
            pass
        os._exit(code)
    sys.exit(code)


def main(argv: list[str] | None = None) -> int:
    from .commands.progress import displayed, logged

    args = parse(argv)
    _note_missing_build()
    try:
        with logged(args), displayed(args):
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
    except Exception as exc:  # noqa: BLE001 - never a traceback for the user; one line that names the file
        msg = " ".join(str(exc).split())[:300]
        print(f"nongemm-trace: error: {getattr(args, 'trace', '')}: unexpected failure "
              f"({type(exc).__name__}: {msg}); please report it", file=sys.stderr)
        return EXIT_BAD_INPUT


_noted: list[bool] = []


def _note_missing_build() -> None:
    """Once per process: a build without the C extensions says so on stderr (it was silent), unless
    the environment turned them off on purpose (``NONGEMM_NATIVE=off``)."""
    from .core import native

    if _noted or native.turned_off("NONGEMM_NATIVE") or all(native.built().values()):
        return
    _noted.append(True)
    print(f"nongemm-trace: note: {native.build_line()}", file=sys.stderr)


def _as_flags(exc: OptionError) -> str:
    import re

    text = exc.one_line()
    for name in exc.parameters:
        text = re.sub(rf"(?<![-\w]){re.escape(name)}(?!\w)", "--" + name.replace("_", "-"), text)
    return text


#: the arguments that name files a command reads, and those that name files it writes
INPUT_ARGS = ("traces", "trace", "report", "baseline", "layer_info", "taxonomy", "device_spec")
OUTPUT_ARGS = ("output", "plot", "roofline", "shares_plot")


def _run(args: argparse.Namespace) -> int:
    """The command, with its inputs declared: an output that is one of them is refused before any
    work, and every write of the command checks again (a file another output wrote meanwhile)."""
    from .core.safe_write import reading, refuse_inputs

    inputs = [p for name in INPUT_ARGS for p in _paths(getattr(args, name, None))]
    refuse_inputs([getattr(args, name, None) for name in OUTPUT_ARGS], inputs)
    _guard_memory(args, inputs)
    with reading(inputs):
        return BY_NAME[args.command].run(args)


def _guard_memory(args: argparse.Namespace, inputs: list[str]) -> None:
    """The memory budget as a cap on this process (:mod:`.core.memory_guard`); the address-space
    limit too where ``NONGEMM_MAX_MEMORY`` is set, unless Ray runs here (its object store reserves
    address space of its own)."""
    from .core import env, memory_guard
    from .load.budget import max_memory

    if inputs:
        memory_guard.note_input(inputs[0])
    explicit = bool(env.text("NONGEMM_MAX_MEMORY"))
    memory_guard.start(max_memory(), hard=explicit and getattr(args, "engine", None) != "ray")


def _paths(value: object) -> list[str]:
    """An argument's file paths: a list's items, or the one value (built-in names match no file)."""
    items = value if isinstance(value, list) else [value]
    return [str(v) for v in items if isinstance(v, str) and v]


if __name__ == "__main__":  # pragma: no cover
    entry()
