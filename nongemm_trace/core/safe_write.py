"""Every file the tool writes goes through here, so that no output can destroy an input.

Two rules, for the command line and the library alike:

* **An output is never an input.** A path that is, or resolves to (a symbolic link, a hard link, a
  path spelled differently), a file the run reads is refused with one line before anything is
  written. The command line declares its inputs once (:func:`reading`); a library function that
  takes both an input and an output names its input to :func:`write_file` as well.
* **A write is all or nothing.** The content goes to a temporary file beside the destination,
  which is then renamed over it: a failed, interrupted or killed write leaves the old file whole and
  no partial file behind. The destination's permission bits are kept when it exists; a new file gets
  the usual ones (0666 less the umask), not the temporary file's private 0600.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ..errors import TraceError

#: the inputs of the run in progress (absolute, links resolved), declared by :func:`reading`
_INPUTS: list[str] = []


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


def _same_file(a: str, b: str) -> bool:
    """``a`` and ``b`` are one existing file (the same device and inode: links and other spellings
    included). A path that does not exist holds nothing to lose."""
    try:
        return os.path.samefile(a, b)
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


def write_file(output: str | Path, content: str | bytes | Callable[[str], None], *,
               inputs: Iterable[str | Path | None] = ()) -> Path:
    """Write ``content`` to ``output`` atomically (module docstring): text (UTF-8), bytes, or a
    function that writes a file at the path it is given (polars' ``write_parquet``, matplotlib's
    ``savefig``; the temporary path keeps the destination's suffix, which such writers read).
    Refuses an output that is an input; an ``OSError`` becomes one line naming the output."""
    refuse_input(output, inputs)
    # write through a symbolic link to the file it names, as a plain open() would
    dest = Path(os.path.realpath(output))
    tmp = None
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_dir():
            raise IsADirectoryError(21, "Is a directory")
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=f".partial{dest.suffix}")
        if callable(content):
            os.close(fd)
            content(tmp)
        else:
            with os.fdopen(fd, "wb") as fh:
                fh.write(content.encode("utf-8") if isinstance(content, str) else content)
        os.chmod(tmp, _mode_for(dest))
        os.replace(tmp, dest)
        tmp = None
    except OSError as exc:
        raise TraceError(output, f"cannot write: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return dest


def _mode_for(dest: Path) -> int:
    """The destination's permission bits when it exists, else 0666 less the umask."""
    try:
        return dest.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
