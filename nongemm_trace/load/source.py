"""Read a trace file's bytes: plain or gzip (detected by magic bytes, not the name).

Every failure becomes a one-line :class:`TraceError` naming the file: a missing
file, a truncated or corrupt gzip stream, an empty file, or something that is not
JSON at all.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from ..errors import TraceError

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"
_CHUNK = 16 << 20


def read_bytes(path: str | Path) -> bytes:
    """Return the decompressed bytes of ``path``."""
    p = Path(path)
    try:
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
        return _gunzip(p, raw)
    if p.suffix == ".gz":
        raise TraceError(p, "named .gz but is not gzip data")
    return raw


def _gunzip(p: Path, raw: bytes) -> bytes:
    """Decompress all gzip members; a stream cut short is an error, not a partial trace."""
    out = []
    data = raw
    try:
        while data:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            pos = 0
            while True:
                # feed in slices so a huge file never needs a second full copy at once
                chunk = data[pos : pos + _CHUNK]
                pos += len(chunk)
                out.append(d.decompress(chunk))
                if d.eof or not chunk:
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
