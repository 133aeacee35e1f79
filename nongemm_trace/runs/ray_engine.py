"""The Ray engine: a batch's traces as Ray tasks, on a Ray started here or on an existing cluster.

* **Where**: ``address`` (``--address``, else ``RAY_ADDRESS``) connects to a running cluster, which
  owns its CPUs: no ``num_cpus`` is passed (Ray refuses it when connecting), and ``workers`` is the
  most tasks in flight at once. Without an address (or with ``local``) a Ray is started here on
  ``workers`` CPUs and shut down after the batch.
* **Isolation**: tasks without retries (a trace that kills its worker would only kill three more
  workers). Each task is a stream that first says it runs, so that its time limit counts from then,
  not from its submission (it may wait for a CPU, or for Ray to start a worker); a task past its
  limit is cancelled with ``force=True``, which ends its worker process. A task whose worker or whole
  node ends fails alone, with Ray's reason.
* **Memory**: each task declares ``memory=`` to Ray (its budget plus what a worker process holds of
  its own), so Ray places no more tasks on a node than its memory holds, and the worker enforces
  the budget itself (:mod:`..core.memory_guard`). A worker its guard ends leaves its line in Ray's
  key-value store before it exits, so that the trace is failed as over its memory budget, not as
  a worker that died for no known reason (Ray says only "the worker died").
* **Results stay in the cluster**: a task's value is split by ``split`` into the row the driver prints
  and the part that is only reduced; the driver fetches the rows and leaves the parts in the object
  store, where :func:`reduce_parts` reduces them (a tree of reduce tasks).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import OptionError, TraceError
from .batch_workers import Failure

#: Ray settings for a local Ray on a busy host (seconds): how long a worker may take to register
RAY_PATIENCE = {"RAY_worker_register_timeout_seconds": "600"}
#: the key-value namespace a worker its memory guard ends writes its line to
KV_NAMESPACE = "nongemm-trace"
#: parts per reduce task: each level of the tree reduces this many parts into one
FAN_IN = 32
#: seconds to wait for a cluster's address to accept a connection (Ray itself waits minutes for a head
#: that is not there, printing nothing)
PROBE_S = 5.0


def probe(address: str) -> None:
    """Refuse in one line a ``host:port`` (or ``ray://host:port``) address where nothing accepts a
    connection; other forms (``auto``) are left to Ray."""
    import socket

    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_S).close()
    except OSError as exc:
        raise TraceError(None, f"Ray at {address} did not answer (nothing accepts a connection there within "
                               f"{PROBE_S:.0f} s: {exc.strerror or exc})") from None


def ray_address(address: str | None) -> str | None:
    """The cluster to connect to: ``address``, else ``RAY_ADDRESS``; None (or ``local``): start Ray here."""
    address = address or os.environ.get("RAY_ADDRESS") or None
    return None if address in (None, "local") else address


@contextlib.contextmanager
def ray_session(address: str | None, workers: int | None) -> Iterator[None]:
    """Ray for the batch: connected to ``address``, or started here on ``workers`` CPUs and shut down after;
    a Ray already initialized in this process is used as it is."""
    import ray

    started = False
    if not ray.is_initialized():
        try:
            if address:
                probe(address)
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            else:
                # Ray kills a worker that has not registered within 60 s (its default), and the task fails; on
                # a loaded host (every core busy) a worker's start alone takes that long, so a local Ray started
                # here waits up to 10 minutes (Ray reads RAY_<setting>; a value already set wins)
                for key, setting in RAY_PATIENCE.items():
                    os.environ.setdefault(key, setting)
                ray.init(address="local", num_cpus=workers or None, include_dashboard=False, log_to_driver=False,
                         logging_level=logging.WARNING)
        except TraceError:
            raise
        except Exception as exc:  # noqa: BLE001 - a node or cluster that is not there: in one line
            what = f"Ray at {address} did not answer" if address else "Ray did not start"
            raise TraceError(None, f"{what} ({type(exc).__name__}: {exc})") from None
        started = True
    quiet = _quiet_driver()
    try:
        yield
    finally:
        try:
            if started:
                ray.shutdown()
        finally:
            quiet()


def _quiet_driver() -> Callable[[], None]:
    """Keep Ray's driver from printing the cluster's error messages (a node that ended, a worker that died) on
    stdout, which carries the report alone: each failed trace is named in one line of our own. Ray prints them
    from a thread of its own through ``ray._private.worker.print_to_stdstream``, with no setting to turn it off;
    returns the call that puts it back."""
    try:
        from ray._private import worker
    except ImportError:  # pragma: no cover - a Ray without that module prints as it likes
        return lambda: None
    original = getattr(worker, "print_to_stdstream", None)
    if original is None:  # pragma: no cover
        return lambda: None
    worker.print_to_stdstream = lambda data, ignore_prefix: None

    def restore() -> None:
        worker.print_to_stdstream = original
    return restore


def in_flight(workers: int | None, jobs: int) -> int:
    """How many tasks run at once: ``workers`` (on a cluster any number of at least 1: the cluster's CPUs
    are not this machine's), else all of them (Ray queues them by their resources)."""
    if workers is None:
        return max(1, jobs)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise OptionError(None, f"workers must be a whole number of at least 1, not {workers!r}", "workers")
    return workers


def _ray_stream(work: Callable[..., Any], prepare: Callable[[], None] | None, split: Callable[[Any], tuple] | None,
                key: str, *args: Any):
    """A Ray task as a stream: ``None`` once it runs (its time limit starts then), then ``work(*args)``, or with
    ``split`` its row and then its part. A worker its memory guard ends writes its line under ``key`` first."""
    from ..core import memory_guard

    memory_guard.on_exceed(lambda line: _note(key, line))
    if prepare is not None:
        prepare()
    yield None
    value = work(*args)
    if split is None:
        yield value
        return
    row, part = split(value)
    yield row
    yield part


def _note(key: str, line: str) -> None:
    from ray.experimental import internal_kv

    internal_kv._internal_kv_put(key, line.encode(), overwrite=True, namespace=KV_NAMESPACE)


def _noted(key: str) -> str | None:
    from ray.experimental import internal_kv

    try:
        got = internal_kv._internal_kv_get(key, namespace=KV_NAMESPACE)
        if got is not None:
            internal_kv._internal_kv_del(key, namespace=KV_NAMESPACE)
    except Exception:  # noqa: BLE001 - the store is gone with the cluster: the plain reason stands
        return None
    return got.decode() if got else None


def _why(exc: Exception) -> str:
    """Ray's reason a task gave no value, in a few words."""
    import ray.exceptions as rx

    if isinstance(exc, rx.NodeDiedError) or "node" in str(exc).lower() and "died" in str(exc).lower():
        return f"its Ray node ended: {type(exc).__name__}"
    return f"Ray task failed: {type(exc).__name__}"


def run_ray(jobs: list[tuple], work: Callable[..., Any], *, workers: int, timeout: float | None = None,
            prepare: Callable[[], None] | None = None, done: Callable[[int], None] | None = None,
            memory: int | None = None, split: Callable[[Any], tuple] | None = None,
            kept: dict[int, Any] | None = None) -> list[Any]:
    """``work(*job)`` for every job as Ray tasks (within :func:`ray_session`), at most ``workers`` at once, each
    declaring ``memory`` bytes; per job its value (with ``split``: its row, and its part's reference in ``kept``)
    or a :class:`Failure`, in the order of ``jobs``."""
    import ray

    opts: dict[str, Any] = {"num_returns": "streaming", "max_retries": 0}
    if memory:
        opts["memory"] = int(memory)
    task = ray.remote(**opts)(_ray_stream)
    batch = uuid.uuid4().hex
    results: list[Any] = [None] * len(jobs)
    queue = list(range(len(jobs)))[::-1]
    flight: dict[Any, int] = {}
    deadline: dict[Any, float] = {}  # a running task's end of time

    def submit() -> None:
        while queue and len(flight) < workers:
            i = queue.pop()
            flight[task.remote(work, prepare, split, f"{batch}/{i}", *jobs[i])] = i

    def finish(stream, value: Any) -> None:
        i = flight.pop(stream)
        results[i] = value
        deadline.pop(stream, None)
        if done:
            done(i)

    submit()
    while flight:
        first = min(deadline.values(), default=float("inf"))
        wait_s = None if first == float("inf") else max(0.0, first - time.monotonic())
        ready: list[Any]  # the streams (ObjectRefGenerator) whose next value is in
        ready, _ = ray.wait(list(flight), num_returns=1, timeout=wait_s)
        for stream in ready:
            try:
                value = ray.get(next(stream))
            except Exception as exc:  # noqa: BLE001 - the task's worker or node died (killed, out of memory)
                line = _noted(f"{batch}/{flight[stream]}")
                finish(stream, Failure("memory", line) if line else Failure("died", _why(exc)))
                continue
            if stream not in deadline:  # it started
                deadline[stream] = time.monotonic() + timeout if timeout else float("inf")
                continue
            if split is not None and kept is not None and not (isinstance(value, dict) and "error" in value):
                kept[flight[stream]] = next(stream)  # the part: a reference, left in the cluster
            finish(stream, value)
        now = time.monotonic()
        for stream, end in list(deadline.items()):
            if now >= end:
                ray.cancel(stream, force=True)
                finish(stream, Failure("timeout", f"{timeout:g} s"))
        submit()
    return results


def _reduce(reduce: Callable[[list[Any]], Any], *parts: Any) -> Any:
    """A reduce task: ``reduce`` of the parts Ray resolved for it on its node."""
    return reduce(list(parts))


def reduce_parts(kept: dict[int, Any], reduce: Callable[[list[Any]], Any], *, lost: Callable[[int], None],
                 tree: bool = True) -> Any:
    """``reduce`` of every part in ``kept`` (references), computed in the cluster; its result comes to the
    driver. ``tree``: reduce tasks of :data:`FAN_IN` parts each, then of their results, until one is left
    (``reduce`` must then take its own results as parts); else one task over all the parts (a reduction
    that needs them together, such as matching collectives across ranks). A part lost with its node (its
    task finished, then the node ended) is named to ``lost(index)`` and left out: the parts are then
    fetched one by one and reduced here."""
    import ray

    if not kept:
        return reduce([])
    task = ray.remote(max_retries=0, num_cpus=0)(_reduce)
    level = [kept[i] for i in sorted(kept)]
    try:
        if not tree:
            return ray.get(task.remote(reduce, *level))
        while len(level) > 1:
            level = [task.remote(reduce, *level[k:k + FAN_IN]) for k in range(0, len(level), FAN_IN)]
        return reduce([ray.get(level[0])])
    except Exception:  # noqa: BLE001 - a part or a reduce task lost with a node: reduce what is left here
        parts = []
        for i in sorted(kept):
            try:
                parts.append(ray.get(kept[i]))
            except Exception:  # noqa: BLE001
                lost(i)
        return reduce(parts)
