"""Every file the tool reads is opened and read here: traces, a taxonomy and what it ``extends``,
a device spec, a TensorRT layer-information file, a gate's baseline.

Why one reader: a path need not name a regular file. ``/dev/zero``, a link to it, a FIFO a
process feeds forever or a process substitution (``<(…)``) has no size to check before reading,
and a plain ``read()`` of one never ends (3 GB in 2.3 s under a 500 MB budget). Here:

* a **regular file** is read up to its size when it was opened (``fstat`` of the open file, not
  of the path): a file that grows while it is read ends where it ended then (a trace still being
  written is then refused as truncated, never read forever); one deleted while read is read whole
  (the open file keeps its data); a file larger than the cap is refused before reading;
* a **stream** (character device, FIFO, socket) is read through the same cap, counted as its
  bytes arrive: past it, one line naming the file, exit 2;
* a directory is refused in one line.

Opening a FIFO waits for a writer, as a shell's ``<`` does; ``--timeout`` covers the open and the
read (a watchdog ends the process: :func:`nongemm_trace.commands.common.time_limit`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from ..errors import TraceError
from . import env as switches

#: a taxonomy or a device spec is kilobytes of TOML: a larger one is not one
CONFIG_BYTES = 16 << 20
#: the JSON held whole may be this fraction of the memory available (a gzip bomb or a huge file is
#: refused, not swapped to death): a streamed trace peaks at about 1.0-1.5x its JSON size, the
#: whole-document path at several times more
_MEMORY_PER_BYTE = 3


def max_trace_bytes() -> int:
    """The largest JSON held whole, and the most a stream is read: ``NONGEMM_MAX_TRACE_BYTES``,
    else a third of the memory available now."""
    env = switches.text("NONGEMM_MAX_TRACE_BYTES")
    if env:
        try:
            return int(float(env))
        except ValueError:
            pass
    try:
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        avail = 16 << 30
    return max(256 << 20, avail // _MEMORY_PER_BYTE)


def too_big(path: str | Path, size: int, limit: int, what: str) -> TraceError:
    """The one line for input past the cap (``what``: "is", "holds", "decompresses to")."""
    return TraceError(path, f"{what} more than {limit / 1e9:.1f} GB of JSON ({size / 1e9:.1f} GB so far), more "
                            f"than this machine can analyse in memory (set NONGEMM_MAX_TRACE_BYTES to raise the limit)")


class Input:
    """A file open for reading, bounded: a regular file to its size at open, a stream by ``limit``."""

    def __init__(self, path: Path, fh: BinaryIO, size: int, regular: bool, limit: int, refuse) -> None:
        self.path, self._fh, self.size, self.regular = path, fh, size, regular
        self._limit, self._refuse = limit, refuse
        self.done = 0

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes; b"" at the end (of a regular file: its size when opened)."""
        if self.regular:
            n = min(n, self.size - self.done)
            if n <= 0:
                return b""
        try:
            data = self._fh.read(n)
        except OSError as exc:
            raise TraceError(self.path, f"cannot read: {exc.strerror or exc}") from None
        self.done += len(data)
        if self.done > self._limit:
            raise self._refuse(self.done)
        return data

    def read_all(self, block: int = 1 << 20) -> bytes:
        parts: list[bytes] = []
        while True:
            piece = self.read(block)
            if not piece:
                return b"".join(parts)
            parts.append(piece)

    def seek(self, offset: int) -> None:
        """To byte ``offset`` of a regular file (a stream cannot go back: read and dropped)."""
        if self.regular:
            self._fh.seek(offset)
            self.done = offset
            return
        while self.done < offset:
            if not self.read(min(offset - self.done, 1 << 20)):
                return

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> Input:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_input(path: str | Path, limit: int | None = None, *, what: str = "",
               refuse=None, stream_limit: int | None = None) -> Input:
    """Open ``path`` (links followed) for bounded reading. ``limit``: the most bytes read (default
    :func:`max_trace_bytes`); ``stream_limit``: the most read from a stream, where that differs (a
    regular trace that is streamed is bounded by its size); ``what``: how messages name the file
    ("taxonomy", "device spec"); ``refuse(bytes)``: the error past the limit (default: "more than N GB of JSON")."""
    p = Path(path)
    cap = max_trace_bytes() if limit is None else limit
    prefix = f"cannot read the {what}: " if what else "cannot read: "
    try:
        fh = open(p, "rb")
    except FileNotFoundError:
        raise TraceError(p, f"no such file{' (' + what + ')' if what else ''}") from None
    except IsADirectoryError:
        raise TraceError(p, f"is a directory, not a {what or 'trace'} file") from None
    except OSError as exc:
        raise TraceError(p, prefix + f"{exc.strerror or exc}") from None
    try:
        st = os.fstat(fh.fileno())
    except OSError as exc:  # pragma: no cover - fstat of an open file
        fh.close()
        raise TraceError(p, prefix + f"{exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):  # pragma: no cover - open() refuses a directory first
        fh.close()
        raise TraceError(p, f"is a directory, not a {what or 'trace'} file")
    regular = stat.S_ISREG(st.st_mode)
    if refuse is None:
        def refuse(size: int) -> TraceError:
            return too_big(p, size, cap, "is" if regular else "holds")
    if not regular and stream_limit is not None:
        cap = stream_limit
    if regular and st.st_size > cap:
        fh.close()
        raise refuse(st.st_size)
    return Input(p, fh, st.st_size if regular else 0, regular, cap, refuse)


def read_input(path: str | Path, limit: int | None = None, *, what: str = "") -> bytes:
    """The bytes of ``path``, bounded as :func:`open_input` says."""
    with open_input(path, limit, what=what) as f:
        return f.read_all()


def read_text(path: str | Path, what: str, limit: int = CONFIG_BYTES) -> str:
    """A small text file (a taxonomy, a device spec) as UTF-8, bounded; larger than ``limit`` or not
    UTF-8 is one line naming the file."""
    def refuse(size: int) -> TraceError:
        return TraceError(path, f"is not a {what}: more than {limit >> 20} MB")
    with open_input(path, limit, what=what, refuse=refuse) as f:
        data = f.read_all()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceError(path, f"is not a {what}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
