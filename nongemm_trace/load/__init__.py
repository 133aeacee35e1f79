"""Load a trace file into a :class:`~nongemm_trace.core.trace.Trace` (columnar tables)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..core import memory_guard
from ..errors import TraceError
from .bom import without_bom
from .bounds import sums_checked
from .formats import by_name, exported_by_name, sniff
from .kineto import read_ahead
from .kineto.cutting import read_block
from .source import Progress, iter_blocks, read_bytes
from .stream_overlap import overlaps_noted

if TYPE_CHECKING:  # pragma: no cover
    from ..core.trace import Trace

# the loaders (and polars) are imported on first use: the command line calls start_read_ahead
# before polars is imported, to read the trace's start on another core while polars imports

__all__ = ["load_trace", "start_read_ahead", "TraceError"]


def start_read_ahead(path: str | Path, keep_python: bool) -> bool:
    """Start reading and scanning the first chunks of ``path`` on another core (a large JSON trace,
    the C scanner built; see :mod:`.kineto.read_ahead`); :func:`load_trace` of the same path and
    ``keep_python`` takes them. ``keep_python`` must be what the load will be given (the analysis's
    rule, :func:`nongemm_trace.pipeline.analysis.needs_python`); a read-ahead for another path or table set
    is dropped. False when none was started (too small, not JSON, turned off). Call
    :func:`stop_read_ahead` when the load may not happen."""
    return read_ahead.start(path, keep_python)


def stop_read_ahead() -> None:
    """Stop and drop a read-ahead that no load took (the command failed before loading)."""
    read_ahead.discard()


@sums_checked
@overlaps_noted
def load_trace(path: str | Path, *, keep_python: bool = False, progress: Progress | None = None,
               layer_info: str | Path | None = None) -> Trace:
    """Load ``path``: a Kineto ``.json``/``.json.gz`` trace, an Nsight Systems SQLite export
    (``.sqlite``/``.sqlite.gz``), or an ``.nsys-rep`` report (exported first when an ``nsys``
    binary is on PATH), a TensorRT profile (``layer_info``: its layer-information file, else the one
    next to it by name) or an ONNX Runtime profile. Bad input raises :class:`TraceError`, and so
    does a trace whose durations add up beyond int64 nanoseconds (:mod:`.bounds`).
    ``progress(done, total)`` is called with the bytes of the file read so far."""
    memory_guard.note_input(path)  # the file a process over its memory budget is ended for
    exported = exported_by_name(str(path))
    if exported is not None:  # another tool's report (.nsys-rep): exported first, then opened
        assert exported.open is not None  # a format others export to is one it reads
        return exported.open(str(path), iter([_export_nsys_rep(path)]), {})
    from .kineto.loader import load_read_ahead

    taken = read_ahead.take(path, keep_python)
    if taken is not None:  # the first chunks were scanned while the command line imported
        return load_read_ahead(path, keep_python, taken, progress)
    blocks = iter_blocks(path, block=read_block(), progress=progress, capped=False)  # Kineto: tables budgeted
    try:
        first = next(blocks)
    except StopIteration:  # pragma: no cover - iter_blocks raises on an empty file
        raise TraceError(path, "empty file") from None
    first = without_bom(first)
    fmt = by_name(sniff(first, str(path)))
    assert fmt.open is not None  # sniff refuses a format it cannot read
    return fmt.open(str(path), _chain(first, blocks), {"keep_python": keep_python, "layer_info": layer_info})


def _chain(first: bytes, rest):
    """``first`` then the rest of a block generator, closing it when abandoned."""
    try:
        yield first
        yield from rest
    finally:
        rest.close()


def _export_nsys_rep(path: str | Path) -> bytes:
    """Export an .nsys-rep (or .nsys-rep.gz: inflated to a temporary file, nsys reads only the report
    itself) to SQLite with the nsys on PATH (never anything else)."""
    import shutil
    import subprocess
    import tempfile

    p = Path(path)
    if not p.is_file():
        raise TraceError(p, "no such file")
    nsys = shutil.which("nsys")
    gz = p.name.endswith(".gz")
    if nsys is None:
        raise TraceError(p, f"is {'a gzipped' if gz else 'an'} Nsight Systems report and no nsys binary is on PATH: "
                            "export it first with 'nsys export --type sqlite --output REPORT.sqlite REPORT.nsys-rep'"
                            f"{' (after gunzip)' if gz else ''}, then analyze the .sqlite")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.sqlite"
        rep = p
        if gz:  # nsys reads only the report itself: inflate it (bounded, as every trace is) next to the export
            rep = Path(tmp) / p.name[:-3]
            rep.write_bytes(read_bytes(p))
        try:  # the report's name after "--" (and absolute): a file named "-o…" is never read as an option
            r = subprocess.run([nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(out),
                                "--", str(rep.resolve())], capture_output=True, text=True, timeout=1800)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TraceError(p, f"nsys export failed ({exc})") from None
        if r.returncode != 0 or not out.exists():
            last = (r.stderr or r.stdout or "").strip().splitlines()[-1:] or ["no output"]
            raise TraceError(p, f"nsys export failed: {last[0]}")
        return out.read_bytes()
