"""The command line's progress display and log, on stderr (stdout stays the report's).

Every command that reads a trace can run for more than a second (a 1 GB trace: seconds to a
minute), so every command gets the same display, fed by the library's stages and bytes read
(:mod:`nongemm_trace.core.progress`) and, for a batch, by the files done:

* on a terminal, a bar (bytes of the file, then the stage; files for a batch) that appears once
  the command has run a second and disappears when it ends;
* off a terminal (CI logs, pipes), one plain line every ``NONGEMM_PROGRESS_S`` seconds (default 5;
  ``inf`` turns them off, as the test suite does), so a long run is never silent for long.

``--quiet`` turns the display off and keeps errors only; ``--verbose`` adds the package's log lines
(``logging`` under ``nongemm_trace``: each stage as it starts, with the time since the command began).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..core import env

#: seconds between two plain progress lines off a terminal (NONGEMM_PROGRESS_S)
DEFAULT_PERIOD_S = 5.0
#: a bar appears only for a command still running after this long
BAR_AFTER_S = 1.0


def period_s() -> float:
    """NONGEMM_PROGRESS_S as seconds (``inf``: never); a value that is not a number above 0 is the default."""
    try:
        value = float(env.text("NONGEMM_PROGRESS_S") or DEFAULT_PERIOD_S)
    except ValueError:
        return DEFAULT_PERIOD_S
    return value if value > 0 else DEFAULT_PERIOD_S


def _mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB" if n >= 10e6 else f"{n / 1e6:,.1f} MB"


class Display:
    """What the command is doing, drawn as a bar on a terminal or written as periodic lines."""

    def __init__(self, command: str, *, tty: bool, period: float, stream: Any = None):
        self.command, self.tty, self.period = command, tty, period
        self.stream = stream if stream is not None else sys.stderr
        self.text = "starting"
        self.done = self.total = 0
        self.files: tuple[int, int] | None = None
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._bar: Any = None
        self._task: Any = None
        self._thread: threading.Thread | None = None

    # -- fed by the library (core/progress.py) and by a batch --------------
    def stage(self, text: str) -> None:
        with self._lock:
            self.text, self.done, self.total = text, 0, 0
        self._draw()

    def read(self, done: int, total: int) -> None:
        with self._lock:
            self.done, self.total = done, total
        self._draw()

    def file_done(self, done: int, total: int, path: str) -> None:
        with self._lock:
            self.files, self.text = (done, total), f"analysed {os.path.basename(path)}"
        self._draw()

    # -- what is shown ---------------------------------------------------------
    def line(self) -> str:
        """The state in one line (the plain display's line, the bar's description)."""
        with self._lock:
            parts = [self.text]
            if self.total:
                parts.append(f"{self.done / self.total:.0%} of {_mb(self.total)}")
            if self.files is not None:
                parts.append(f"{self.files[0]} of {self.files[1]} traces done")
        return ", ".join(parts)

    def _draw(self) -> None:
        if self._bar is None:
            return
        from ..report.terminal import escape  # a file name is text, never rich markup

        with self._lock:
            total = self.files[1] if self.files else self.total or None
            done = self.files[0] if self.files else self.done
        elapsed = time.monotonic() - self._start
        self._bar.update(self._task, total=total, completed=done,
                         description=f"{escape(self.line())} ({elapsed:,.0f} s)")

    def _tick(self) -> None:
        if self.tty:
            if not self._stop.wait(BAR_AFTER_S):
                self._start_bar()
            while not self._stop.wait(0.5):  # the time since the command began, kept current
                self._draw()
            return
        while not self._stop.wait(self.period):
            elapsed = time.monotonic() - self._start
            self.stream.write(f"nongemm-trace {self.command}: {self.line()} ({elapsed:,.0f} s)\n")
            self.stream.flush()

    def _start_bar(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn

        bar = Progress(TextColumn("{task.description}"), BarColumn(), transient=True,
                       console=Console(file=self.stream), redirect_stdout=False, redirect_stderr=False)
        with self._lock:
            if self._stop.is_set():
                return
            self._task = bar.add_task("", total=None)
            self._bar = bar
            bar.start()
        self._draw()

    def start(self) -> None:
        if self.tty or math.isfinite(self.period):
            self._thread = threading.Thread(target=self._tick, name="nongemm-progress", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Ends the display (before the report is written, and when the command ends)."""
        with self._lock:
            self._stop.set()
            bar, self._bar = self._bar, None
        if bar is not None:
            bar.stop()


_current: list[Display] = []


def stop_display() -> None:
    """The report is about to be written: the bar goes first (commands/outputs.render)."""
    for d in _current:
        d.stop()


def wrote(text: str) -> None:
    """A command's closing line on stderr (``wrote report.html``), after the bar is gone: a line written
    while the bar is drawn would land on the bar's own line."""
    stop_display()
    print(text, file=sys.stderr)


def current_display() -> Display | None:
    return _current[-1] if _current else None


@contextmanager
def displayed(args: argparse.Namespace) -> Iterator[Display | None]:
    """The command's progress display, unless ``--quiet``."""
    from ..core.progress import watching

    if getattr(args, "quiet", False):
        yield None
        return
    display = Display(args.command, tty=sys.stderr.isatty(), period=period_s())
    _current.append(display)
    display.start()
    try:
        with watching(display):
            yield display
    finally:
        display.stop()
        _current.remove(display)


class _SinceStart(logging.Formatter):
    def __init__(self) -> None:
        super().__init__()
        self._start = time.monotonic()

    def format(self, record: logging.LogRecord) -> str:
        return f"nongemm-trace: [{time.monotonic() - self._start:6.2f} s] {record.getMessage()}"


@contextmanager
def logged(args: argparse.Namespace) -> Iterator[None]:
    """The package's log on stderr while the command runs: warnings by default, the stages too with
    ``--verbose``, errors only with ``--quiet``. The handler and level are the command's alone: they
    are taken back when it ends (``cli.main`` called from Python leaves the logger as it found it)."""
    log = logging.getLogger("nongemm_trace")
    level = logging.INFO if getattr(args, "verbose", False) else (
        logging.ERROR if getattr(args, "quiet", False) else logging.WARNING)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_SinceStart())
    before = log.level
    log.addHandler(handler)
    log.setLevel(level)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(before)
