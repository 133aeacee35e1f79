"""The memory budget (``NONGEMM_MAX_MEMORY``) as a cap on the whole process.

Why: the loader counts its tables against the budget as they grow (:mod:`..load.budget`), and
every stage is linear in its input, but a stage's working set is an estimate, not a promise: a
trace built to defeat one estimate (ten thousand overlapping steps made a 323 KB trace peak at
4.2 GB, with the budget at 1 GB and exit 0) must still end in one line. So a watchdog thread
reads the process's resident set size (``/proc/self/statm``) every few milliseconds and, once it
passes the budget, writes one line naming the file being read or analysed and the figure, and
ends the process with exit status 2 (native code cannot be interrupted by an exception, and the
allocator keeps what Python frees: ending the process is the one sure way). A hard address-space
limit (``RLIMIT_AS``, far above the budget: the thread pools reserve address space they never
touch) is the last guard, for an allocation too sudden for the watchdog: Python's allocations
past it fail as ``MemoryError``, which the command line reports in one line. Under a sanitizer
runtime (AddressSanitizer, ThreadSanitizer: bench/sanitize.sh) the hard limit is left unset: their
shadow memory is terabytes of address space reserved at start-up, and any limit below it makes
the runtime's next mapping fail and abort the process. Their resident set is also not the
program's: shadow memory, red zones around every allocation and a quarantine of freed blocks
make it a few times what the same run holds without them, so under a sanitizer the watchdog's
line is :data:`SANITIZER_FACTOR` times the usual one (the memory a run may hold is judged on a
plain build, bench/fuzz_structure.py).
"""

from __future__ import annotations

import os
import sys
import threading
import time

#: how often the watchdog reads the resident set size
INTERVAL_S = 0.005
#: the exit status of a process ended by the watchdog (bad input: the command line's)
EXIT_STATUS = 2
#: what the process holds whatever the trace (the interpreter, polars' code and thread pools: 51 MB
#: after the imports, 70-170 MB once polars' code and the chunks in flight are in): the watchdog's
#: line is the budget plus this, so that the budget is the trace's share, as the loader's table
#: budget counts it
FLOOR_BYTES = 256 << 20
#: how many times the usual line the watchdog allows under a sanitizer runtime (AddressSanitizer
#: documents about 3x the memory of the plain program, ThreadSanitizer 5-10x for the memory it tracks)
SANITIZER_FACTOR = 3
#: address space beyond the budget the hard limit leaves (thread stacks and the allocators' reserves)
AS_HEADROOM = 8 << 30

_state: dict[str, object] = {"input": None, "thread": None, "limit": None, "on_exceed": None}


def note_input(path: object) -> None:
    """The file the process reads or analyses now: the one the watchdog's line names."""
    _state["input"] = str(path)


def on_exceed(report) -> None:
    """``report(line)`` is called with the watchdog's line before it ends the process: a Ray task's
    driver sees only that its worker died, so the task leaves the line where the driver looks
    (:mod:`nongemm_trace.runs.ray_engine`)."""
    _state["on_exceed"] = report


def resident_bytes() -> int | None:
    """The process's resident set size, or None where ``/proc`` cannot say."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        return None


def line(limit: int, used: int) -> str:
    where = _state["input"] or "the analysis"
    return (f"{where}: needs more than {limit / 1e9:.2f} GB of memory to analyse ({used / 1e9:.2f} GB in use); "
            f"set NONGEMM_MAX_MEMORY to raise the budget")


def start(limit: int, *, hard: bool = False) -> None:
    """Watch this process's memory against ``limit`` bytes plus :data:`FLOOR_BYTES` (plus what the
    process held beyond that floor when the watch started: a Ray worker's own libraries) (once per
    process; a second call sets the new limit). ``hard``: also set the address-space limit (never
    in a process that hosts others: a Ray driver's shared object store reserves address space of
    its own)."""
    base = resident_bytes() or 0  # a Ray worker holds 200 MB and more of its own before any trace
    allowed = limit + max(0, base + (64 << 20) - FLOOR_BYTES)
    if _sanitized():  # the line is allowed + FLOOR_BYTES: the whole of it scaled
        allowed = allowed * SANITIZER_FACTOR + FLOOR_BYTES * (SANITIZER_FACTOR - 1)
    _state["limit"] = allowed
    if hard:
        _hard_limit(limit)
    if _state["thread"] is not None or resident_bytes() is None:
        return
    thread = threading.Thread(target=_watch, name="nongemm-memory", daemon=True)
    _state["thread"] = thread
    thread.start()


def _watch() -> None:
    while True:
        limit = _state["limit"]
        used = resident_bytes()
        if isinstance(limit, int) and used is not None and used > limit + FLOOR_BYTES:
            try:
                text = line(limit, used)
                sys.stderr.write(f"nongemm-trace: error: {text}\n")
                sys.stderr.flush()
                report = _state["on_exceed"]
                if callable(report):
                    report(text)
            finally:
                os._exit(EXIT_STATUS)
        time.sleep(INTERVAL_S)


def _sanitized() -> bool:
    """Whether a sanitizer runtime is loaded (its shadow memory cannot live under an address-space limit)."""
    if any(lib in os.environ.get("LD_PRELOAD", "") for lib in ("libasan", "libtsan", "libhwasan")):
        return True
    try:
        with open("/proc/self/maps", "rb") as fh:
            return any(lib in fh.read() for lib in (b"libasan", b"libtsan", b"libhwasan"))
    except OSError:  # pragma: no cover - not Linux
        return False


def _hard_limit(limit: int) -> None:
    if _sanitized():
        return
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return
    want = limit + FLOOR_BYTES + AS_HEADROOM
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY or soft > want:
            resource.setrlimit(resource.RLIMIT_AS, (want, hard))
    except (ValueError, OSError):  # pragma: no cover - a hard limit below ours already
        pass
