"""Every file the tool writes goes through here, so that no output can destroy an input or anything
that is not an output file.

Four rules, for the command line and the library alike:

* **An output is never an input.** A path that is, or resolves to (a symbolic link, a hard link, a
  path spelled differently), a file the run reads is refused with one line before anything is
  written. The command line declares its inputs once (:func:`reading`); a library function that
  takes both an input and an output names its input to :func:`write_file` as well.
* **Only a regular file is ever replaced.** A regular file (or a new path) is written whole or not
  at all: the content goes to a temporary file beside the destination, which is then renamed over
  it, so a failed, interrupted or killed write leaves the old file whole and no partial file behind.
  The destination's permission bits are kept when it exists; a new file gets the usual ones (0666
  less the umask), not the temporary file's private 0600.
* **A stream is written in place.** ``-`` is standard output; a character device (``/dev/null``), a
  FIFO, or a descriptor's link (``/dev/stdout``, ``/dev/fd/N`` of a process substitution) is opened
  and written like a shell's ``>`` would, never renamed over. Binary content (parquet, PNG) is refused
  to a terminal. A directory, a block device, a socket or anything else is refused in one line.
* **Links are followed as the kernel's protection of sticky folders would**
  (``fs.protected_symlinks``): a link in a sticky world-writable folder is followed only when it
  belongs to the one writing or to the folder's owner; a regular file there that belongs to someone
  else is not replaced (``fs.protected_regular``). Each link of the path, folders included, is
  resolved here, one at a time, and the final open of a stream does not follow a link that appeared
  after the check (a rename never follows one).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from ..errors import TraceError

#: the inputs of the run in progress (absolute, links resolved), declared by :func:`reading`
_INPUTS: list[str] = []

#: the most links one output path may pass through (the kernel's own limit, ``ELOOP``)
MAX_LINKS = 40

#: how long a write to a FIFO waits for its reader to open it before it gives up with one line
FIFO_READER_WAIT_S = 30.0

Content = str | bytes | Callable[[str], None]


@contextlib.contextmanager
def reading(paths: Iterable[str | Path | None]) -> Iterator[None]:
    """Within this block every :func:`write_file` refuses to replace any of ``paths`` (the run's
    inputs; ``None`` and non-paths are skipped)."""
    added = [str(p) for p in paths if isinstance(p, (str, Path)) and str(p)]
    _INPUTS.extend(added)
    try:
        yield
    finally:
        del _INPUTS[len(_INPUTS) - len(added):]


def _local(path: str) -> str:
    """A ``file://`` URL as the local path it names (every command reads one as a trace); anything
    else as it is (an ``s3://`` object is no file an output could destroy)."""
    if path[:7].lower() != "file://":
        return path
    from urllib.parse import unquote, urlparse
    return unquote(urlparse(path).path)


def _same_file(a: str, b: str) -> bool:
    """``a`` and ``b`` are one existing regular file (the same device and inode: links, other
    spellings and ``file://`` URLs included). A path that does not exist holds nothing to lose, and a
    stream (``-``, a device, a FIFO) is not a file an output could destroy."""
    if a == "-" or b == "-":
        return False
    a, b = _local(a), _local(b)
    try:
        return os.path.samefile(a, b) and stat.S_ISREG(os.stat(a).st_mode)
    except OSError:
        return False


def refuse_input(output: str | Path, inputs: Iterable[str | Path | None] = ()) -> None:
    """Raise :class:`TraceError` when ``output`` is one of ``inputs`` or of the declared inputs."""
    out = str(output)
    for src in [*(str(p) for p in inputs if isinstance(p, (str, Path))), *_INPUTS]:
        if src and _same_file(out, src):
            which = "" if os.path.abspath(out) == os.path.abspath(src) else f" {src} (the same file by another path)"
            raise TraceError(out, f"the output is the input{which}: refusing to overwrite an input; "
                                  "choose another output path")


def refuse_inputs(outputs: Iterable[str | Path | None], inputs: Iterable[str | Path | None]) -> None:
    """:func:`refuse_input` for each output given (``None`` skipped): the command line's early check,
    before any work is done."""
    ins = list(inputs)
    for out in outputs:
        if isinstance(out, (str, Path)) and str(out):
            refuse_input(out, ins)


def write_file(output: str | Path, content: Content, *, inputs: Iterable[str | Path | None] = ()) -> Path:
    """Write ``content`` to ``output`` by the rules of the module docstring: text (UTF-8), bytes, or
    a function that writes a file at the path it is given (polars' ``write_parquet``, matplotlib's
    ``savefig``; the temporary path keeps the destination's suffix, which such writers read).
    Refuses an output that is an input or that may not be written; an ``OSError`` becomes one line
    naming the output. Returns the path written (``-`` for standard output)."""
    refuse_input(output, inputs)
    out = str(output)
    try:
        if out == "-":
            _write_stdout(out, content)
            return Path("-")
        kind, dest = _resolve(out)
        if kind == "stream":
            _write_stream(out, dest, content, follow=False)
        elif kind == "descriptor":
            _write_stream(out, dest, content, follow=True)
        else:
            _replace(dest, content, exists=kind == "regular")
        return Path(dest)
    except OSError as exc:
        raise TraceError(output, f"cannot write: {exc.strerror or exc}") from None


# --- where the output is -------------------------------------------------------------------------

def _is_sticky_shared(st: os.stat_result) -> bool:
    """A folder anyone may add to but only owners may remove from (``/tmp``)."""
    return bool(st.st_mode & stat.S_ISVTX) and bool(st.st_mode & stat.S_IWOTH)


def _resolve(out: str) -> tuple[str, str]:
    """Walk ``out`` one component at a time as the kernel would, following each link by the sticky
    folders' rule. Returns ``(kind, path)``: ``new`` (nothing there yet; folders may be missing),
    ``regular``, ``stream`` (a character device or FIFO, at a path with no link left), or
    ``descriptor`` (a ``/proc/PID/fd/N`` link: ``/dev/stdout``, ``/dev/fd/63`` of a process
    substitution). Raises :class:`TraceError` for anything that may not be written."""
    euid = os.geteuid()
    current = "/" if out.startswith("/") else os.getcwd()
    pending = [c for c in out.split("/") if c not in ("", ".")]
    links = 0
    while pending:
        name = pending.pop(0)
        if name == "..":
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, name)
        try:
            st = os.lstat(candidate)
        except FileNotFoundError:
            return "new", os.path.join(candidate, *pending)
        if not stat.S_ISLNK(st.st_mode):
            if pending and not stat.S_ISDIR(st.st_mode):
                raise OSError(errno.ENOTDIR, "Not a directory")
            current = candidate
            continue
        links += 1
        if links > MAX_LINKS:
            raise OSError(errno.ELOOP, "Too many levels of symbolic links")
        folder = os.stat(current)
        if _is_sticky_shared(folder) and st.st_uid not in (euid, folder.st_uid):
            which = "is a link" if candidate == os.path.abspath(out) else f"passes through {candidate}, a link"
            raise TraceError(out, f"{which} owned by another user (uid {st.st_uid}) in a shared sticky folder: "
                                  "refusing to follow it (the kernel's protected_symlinks rule)")
        if not pending and _is_descriptor_link(candidate):
            return "descriptor", candidate
        target = os.readlink(candidate)
        if target.startswith("/"):
            current = "/"
        pending = [c for c in target.split("/") if c not in ("", ".")] + pending
    st = os.lstat(current)
    if stat.S_ISREG(st.st_mode):
        folder = os.stat(os.path.dirname(current))
        if _is_sticky_shared(folder) and st.st_uid not in (euid, folder.st_uid):
            raise TraceError(out, f"{current} belongs to another user (uid {st.st_uid}) in a shared sticky folder: "
                                  "refusing to replace it (the kernel's protected_regular rule)")
        return "regular", current
    if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        return "stream", current
    raise TraceError(out, f"is {_kind_of(st.st_mode)}, not a file: refusing to write there")


def _is_descriptor_link(path: str) -> bool:
    """``path`` is a process's descriptor link (``/proc/PID/fd/N``): opening it reopens what the
    descriptor holds (a pipe, a socket, a terminal, a file the shell opened), whatever its text says
    (``pipe:[123]``, or a path that may since have been removed)."""
    parts = path.split("/")
    return len(parts) == 5 and parts[1] == "proc" and parts[3] == "fd"


def _kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISFIFO, "a FIFO")):
        if test(mode):
            return name
    return "neither a regular file nor a stream"


# --- how it is written ---------------------------------------------------------------------------

def _replace(dest: str, content: Content, *, exists: bool) -> None:
    """The atomic replace of a regular file (or the creation of a new one)."""
    path = Path(dest)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=f".partial{path.suffix}")
        if callable(content):
            os.close(fd)
            content(tmp)
        else:
            with os.fdopen(fd, "wb") as fh:
                fh.write(_as_bytes(content))
        os.chmod(tmp, _mode_for(path) if exists else _new_mode())
        os.replace(tmp, path)  # replaces the directory entry itself, never what a link there names
        tmp = None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _write_stream(out: str, path: str, content: Content, *, follow: bool) -> None:
    """Open a character device, FIFO or descriptor link for writing, as ``>`` would, and write."""
    # a descriptor's file is appended to: the shell that opened it truncated it or asked for ``>>``
    flags = os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC | (os.O_APPEND if follow else os.O_NOFOLLOW)
    fd = _open_waiting_for_reader(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (follow and stat.S_ISREG(mode))):
            raise TraceError(out, f"is {_kind_of(mode)}, not a file: refusing to write there")
        if os.isatty(fd) and not isinstance(content, str):
            raise TraceError(out, "is a terminal and this output is binary: write it to a file")
        with os.fdopen(fd, "wb", closefd=True) as fh:
            fd = -1
            _copy_content(fh, content, Path(path).suffix)
    finally:
        if fd >= 0:
            os.close(fd)


def _open_waiting_for_reader(path: str, flags: int) -> int:
    """``os.open``; a FIFO with no reader yet is retried until one comes or
    :data:`FIFO_READER_WAIT_S` passes (a plain open would wait forever)."""
    deadline = time.monotonic() + FIFO_READER_WAIT_S
    while True:
        try:
            fd = os.open(path, flags | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: a FIFO nobody reads
                raise
            if time.monotonic() >= deadline:
                raise OSError(errno.ENXIO, f"no reader opened the FIFO within {FIFO_READER_WAIT_S:g} s") from None
            time.sleep(0.05)
            continue
        os.set_blocking(fd, True)
        return fd


def _write_stdout(out: str, content: Content) -> None:
    """``-o -``: the content on standard output."""
    sys.stdout.flush()
    binary = not isinstance(content, str)
    if binary and sys.stdout.isatty():
        raise TraceError(out, "standard output is a terminal and this output is binary: write it to a file")
    if isinstance(content, str):
        sys.stdout.write(content)
        sys.stdout.flush()
        return
    buffer: BinaryIO = getattr(sys.stdout, "buffer", None) or sys.stdout  # type: ignore[assignment]
    _copy_content(buffer, content, "")
    buffer.flush()


def _copy_content(fh: BinaryIO, content: Content, suffix: str) -> None:
    """Write text, bytes, or what a file-writing function produces (through a private temporary
    file, which keeps ``suffix`` for writers that read it) to the open stream ``fh``."""
    if not callable(content):
        fh.write(_as_bytes(content))
        return
    with tempfile.TemporaryDirectory(prefix="nongemm-out-") as folder:
        tmp = os.path.join(folder, f"out{suffix}")
        content(tmp)
        with open(tmp, "rb") as src:
            shutil.copyfileobj(src, fh, 1 << 20)


def _as_bytes(content: str | bytes) -> bytes:
    return content.encode("utf-8") if isinstance(content, str) else content


def _mode_for(dest: Path) -> int:
    """The destination's permission bits (it exists)."""
    try:
        return dest.stat().st_mode & 0o7777
    except OSError:
        return _new_mode()


def _new_mode() -> int:
    """0666 less the umask: what a new file gets from ``open``."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
