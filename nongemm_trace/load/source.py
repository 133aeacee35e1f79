"""Read a trace file's bytes: plain or gzip (detected by magic bytes, not the name).

Every failure becomes a one-line :class:`TraceError` naming the file: a missing
file, a truncated or corrupt gzip stream, an empty file, or something that is not
JSON at all.
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

from ..errors import TraceError

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"
_CHUNK = 16 << 20
#: analysing a trace takes about 4x its JSON size in memory
_MEMORY_PER_BYTE = 4


def max_trace_bytes() -> int:
    """The largest JSON we accept: ``NONGEMM_MAX_TRACE_BYTES``, else a quarter of the
    memory available now (so a gzip bomb or a huge file is refused, not swapped to death)."""
    env = os.environ.get("NONGEMM_MAX_TRACE_BYTES")
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


def _too_big(p: Path, size: int, limit: int, what: str) -> TraceError:
    return TraceError(p, f"{what} more than {limit / 1e9:.1f} GB of JSON ({size / 1e9:.1f} GB so far), more than "
                         f"this machine can analyse in memory (set NONGEMM_MAX_TRACE_BYTES to raise the limit)")


def read_bytes(path: str | Path) -> bytes:
    """Return the decompressed bytes of ``path``."""
    p = Path(path)
    limit = max_trace_bytes()
    try:
        size = p.stat().st_size if p.is_file() else 0
        if size > limit:
            raise _too_big(p, size, limit, "is")
        with open(p, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise TraceError(p, "no such file") from None
    except IsADirectoryError:
        raise TraceError(p, "is a directory, not a trace file") from None
    except OSError as exc:
        raise TraceError(p, f"cannot read: {exc.strerror or exc}") from None
    if not raw:
        raise TraceError(p, "empty file")
    if raw[:2] == GZIP_MAGIC:
        return _gunzip(p, raw, limit)
    if p.suffix == ".gz":
        raise TraceError(p, "named .gz but is not gzip data")
    return raw


def _gunzip(p: Path, raw: bytes, limit: int) -> bytes:
    """Decompress all gzip members; a stream cut short is an error, not a partial trace.
    Output is produced in bounded pieces and counted, so a gzip bomb stops at ``limit``."""
    out = []
    total = 0
    data = raw
    try:
        while data:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            pos = 0
            pending = b""
            while True:
                if not pending:
                    pending = data[pos : pos + _CHUNK]
                    pos += len(pending)
                    if not pending:
                        break
                piece = d.decompress(pending, _CHUNK)
                pending = d.unconsumed_tail
                total += len(piece)
                if total > limit:
                    raise _too_big(p, total, limit, "decompresses to")
                out.append(piece)
                if d.eof:
                    break
            if not d.eof:
                raise TraceError(p, "truncated gzip stream (the file ends before the compressed data does)")
            data = d.unused_data
            # trailing zero padding after the last member is tolerated, as gzip(1) does
            if data.strip(b"\x00") == b"":
                break
            if data[:2] != GZIP_MAGIC:
                break
    except zlib.error as exc:
        raise TraceError(p, f"corrupt gzip data ({exc})") from None
    except (EOFError, gzip.BadGzipFile) as exc:  # pragma: no cover - zlib raises first
        raise TraceError(p, f"corrupt gzip data ({exc})") from None
    return b"".join(out)
