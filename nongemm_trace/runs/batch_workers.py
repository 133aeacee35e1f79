"""The engines that run a batch's traces in parallel, each trace isolated from the others.

A trace from someone else's run can crash the process that reads it (the kernel's OOM killer,
a crash in native code) or never end (a pipe nobody writes, a file on a stalled mount). Either
must cost that trace only. So each engine watches every trace on its own:

* **processes** (:func:`run_processes`): worker processes of our own, not a
  ``ProcessPoolExecutor``, whose pool breaks as a whole when one worker dies and fails every
  trace still queued. The parent hands one trace at a time to each worker that is ready; a worker
  that dies fails only the trace it held and is replaced; a trace past its time limit has its
  worker killed (``SIGKILL``: a read blocked in the kernel ignores anything gentler) and replaced.
  The limit counts from the moment a started worker took the trace, so a worker's start-up
  (interpreter, polars) is never charged to a trace.
* **Ray** (:func:`.ray_engine.run_ray`): tasks on a local Ray or on a cluster, watched the same way
  (their own module: :mod:`.ray_engine`).

Workers are started with ``spawn``, never ``fork``: forking a process whose polars thread pool
is running can deadlock. Both engines return, per job, its value or a :class:`Failure`.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity: a container's or ``taskset``'s share)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity
        return os.cpu_count() or 1


#: at most this many workers per CPU: each is an interpreter of its own (about 130 MB with polars),
#: and more processes than CPUs only share them (twice the CPUs covers workers waiting on reads)
WORKERS_PER_CPU = 2


def bounded_workers(workers: int | None, traces: int) -> int:
    """How many workers to run for ``traces`` traces: ``workers`` (default: one per CPU), never more than
    the traces. A count below 1, or above :data:`WORKERS_PER_CPU` times the CPUs, is refused: 0 or -5
    workers would run nothing, and 100,000 start one interpreter each (3.2 GB where 2 use 0.27 GB)."""
    cpus = available_cpus()
    if workers is None:
        return max(1, min(cpus, traces))
    from ..errors import OptionError

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise OptionError(None, f"workers must be a whole number of at least 1, not {workers!r}", "workers")
    if workers > WORKERS_PER_CPU * cpus:
        raise OptionError(None, f"workers is {workers:,}, more than {WORKERS_PER_CPU} per CPU of the {cpus} this "
                                f"process may use: at most {WORKERS_PER_CPU * cpus}", "workers")
    return max(1, min(workers, traces))


@dataclass(frozen=True)
class Failure:
    """Why a job gave no value: ``timeout`` (over its limit; the worker was ended) or ``died``
    (its worker process ended without a result: ``how`` says by which signal or exit status)."""

    kind: str
    how: str


def _die_with_parent() -> None:
    """Linux: this process gets SIGKILL when its parent ends, however it ends (a batch killed by CI's
    own time limit leaves no worker behind blocked on a stalled file). Elsewhere nothing."""
    import ctypes
    import os

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return
    if os.getppid() == 1:  # the parent ended before the request was made
        os._exit(1)


def _serve(conn, work: Callable[..., Any], prepare: Callable[[], None] | None) -> None:
    """A worker: prepare, say ready, then run each job the parent sends until told to stop."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it ends the workers itself
    if prepare is not None:
        prepare()
    conn.send(None)
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if job is None:
            return
        index, args = job
        conn.send((index, work(*args)))


def _how(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit status {exitcode}"


class _Worker:
    """One worker process and the job it holds (``index``), with that job's deadline."""

    def __init__(self, ctx, work, prepare):
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, work, prepare), daemon=True)
        self.process.start()
        child.close()
        self.ready = False
        self.index: int | None = None
        self.deadline = float("inf")

    def give(self, index: int, args: tuple, timeout: float | None) -> None:
        self.conn.send((index, args))
        self.index = index
        self.deadline = time.monotonic() + timeout if timeout else float("inf")

    def end(self, kill: bool) -> None:
        if kill:
            self.process.kill()
        else:
            try:
                self.conn.send(None)
            except OSError:
                self.process.kill()
        self.process.join(5)
        if self.process.is_alive():  # pragma: no cover - a worker that ignores the request to stop
            self.process.kill()
            self.process.join()
        self.conn.close()


def run_processes(jobs: list[tuple], work: Callable[..., Any], *, workers: int, timeout: float | None = None,
                  prepare: Callable[[], None] | None = None,
                  done: Callable[[int], None] | None = None) -> list[Any]:
    """``work(*job)`` for every job on ``workers`` worker processes (``prepare()`` runs once in each,
    before its first job); per job its value or a :class:`Failure`, in the order of ``jobs``.
    ``done(index)`` is called as each job ends."""
    import multiprocessing
    from multiprocessing.connection import wait

    if not jobs:
        return []
    ctx = multiprocessing.get_context("spawn")
    results: list[Any] = [None] * len(jobs)
    queue = list(range(len(jobs)))[::-1]
    pool: list[_Worker] = []
    start_failures = 0

    def finish_index(i: int, value: Any) -> None:
        results[i] = value
        if done:
            done(i)

    def finish(w: _Worker, value: Any) -> None:
        assert w.index is not None  # a worker with a job
        finish_index(w.index, value)
        w.index, w.deadline = None, float("inf")

    def replace(w: _Worker) -> None:
        pool.remove(w)
        if queue and len(pool) < workers:
            pool.append(_Worker(ctx, work, prepare))

    try:
        for _ in range(max(1, min(workers, len(jobs)))):
            pool.append(_Worker(ctx, work, prepare))
        while queue or any(w.index is not None for w in pool):
            for w in pool:
                if w.ready and w.index is None and queue:
                    i = queue.pop()
                    try:
                        w.give(i, jobs[i], timeout)
                    except OSError:  # it died since it said ready: the trace waits for another worker
                        queue.append(i)
            first = min(w.deadline for w in pool)
            ready = set(wait([w.conn for w in pool] + [w.process.sentinel for w in pool],
                             None if first == float("inf") else max(0.0, first - time.monotonic())))
            for w in list(pool):
                if w.conn in ready or w.process.sentinel in ready:
                    try:
                        message: Any = w.conn.recv() if w.conn.poll() else EOFError
                    except (EOFError, OSError):
                        message = EOFError
                    if message is None:
                        w.ready = True
                    elif message is not EOFError:
                        finish(w, message[1])
                    else:  # the process ended without a word: it died
                        w.end(kill=True)
                        if w.index is not None:
                            finish(w, Failure("died", _how(w.process.exitcode)))
                        elif not w.ready:
                            start_failures += 1
                            if start_failures > 2 * workers:  # a broken environment: start no more
                                for i in reversed(queue):
                                    finish_index(i, Failure("died", "no worker process could start "
                                                                    f"({_how(w.process.exitcode)})"))
                                queue.clear()
                        replace(w)
                elif w.index is not None and time.monotonic() >= w.deadline:
                    w.end(kill=True)
                    finish(w, Failure("timeout", f"{timeout:g} s"))
                    replace(w)
    finally:
        for w in pool:
            w.end(kill=w.index is not None or not w.ready)
    return results
