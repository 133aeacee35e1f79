"""How far long work got, told to whoever watches: the command line's progress display, and the
package's log (``logging.getLogger("nongemm_trace")``, silent unless the application configures it).

The library calls :func:`stage` when a stage of one trace starts (reading, linking, measuring) and
passes :func:`bytes_read` as the loader's progress callback. Both log; and when a watcher is set
for the current context (:func:`watching`, which the command line does around a command), they tell
it too. A library user who passes nothing sees nothing: no watcher, and the package's logger has
only a ``NullHandler``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

log = logging.getLogger("nongemm_trace")


class Watcher(Protocol):
    """What the command line's display implements (commands/progress.py)."""

    def stage(self, text: str) -> None: ...

    def read(self, done: int, total: int) -> None: ...


_watcher: ContextVar[Watcher | None] = ContextVar("nongemm_trace_progress", default=None)


@contextmanager
def watching(watcher: Watcher) -> Iterator[Watcher]:
    """Within the block, stages and bytes read are told to ``watcher``."""
    token = _watcher.set(watcher)
    try:
        yield watcher
    finally:
        _watcher.reset(token)


def stage(text: str) -> None:
    """A stage of the work starts (``"reading trace.json.gz"``, ``"linking and classifying"``)."""
    log.info("%s", text)
    w = _watcher.get()
    if w is not None:
        w.stage(text)


def bytes_read(done: int, total: int) -> None:
    """The loader's progress callback: ``done`` of ``total`` bytes of the file consumed."""
    w = _watcher.get()
    if w is not None:
        w.read(done, total)
