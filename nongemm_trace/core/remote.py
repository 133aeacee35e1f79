"""Traces where they live: ``s3://``, ``gs://`` and every other fsspec URL, listed like folders and
fetched, bounded, to a local file.

Why fetch to a local file rather than read the object as a stream: every loader reads a path (the
Nsight Systems export is an SQLite database, which only opens as a file; the Kineto scanner
re-reads the file when Python events are asked for later), and a fetched copy keeps each loader as
it is, with the same bounds as a local file. The fetch itself is bounded as :mod:`.reader` bounds
a local file: an object larger than :func:`~.reader.max_trace_bytes` is refused before a byte is
read (its size from the store's listing), and the copy stops at that size whatever the store
sends. The copy lives in a temporary folder for one analysis and is removed after it.

The filesystems are optional (``pip install 'nongemm-trace[cloud]'``: fsspec, s3fs, gcsfs); a URL
whose filesystem is not installed is one line naming the extra. ``file://`` and ``memory://`` need
fsspec only.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ..errors import TraceError

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
#: what to install for a URL whose filesystem is missing
EXTRA = "pip install 'nongemm-trace[cloud]'"
_BLOCK = 8 << 20


def is_url(text: object) -> bool:
    """Whether ``text`` is a URL (``scheme://…``) rather than a local path."""
    return isinstance(text, str) and bool(_URL.match(text))


def filesystem(url: str):
    """The fsspec filesystem of ``url`` and the path inside it; a missing library or a URL fsspec cannot
    open is one line naming the URL."""
    try:
        import fsspec
    except ImportError:
        raise TraceError(url, f"reading URLs needs fsspec: {EXTRA}") from None
    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as exc:  # the protocol's library (s3fs, gcsfs, …) is not installed
        raise TraceError(url, f"reading {url.split('://', 1)[0]}:// URLs needs a library that is not "
                              f"installed ({exc}): {EXTRA}") from None
    except ValueError as exc:  # a protocol fsspec does not know
        raise TraceError(url, f"cannot read this URL: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a store's client that cannot start (credentials, endpoint)
        raise TraceError(url, f"cannot open the store ({type(exc).__name__}: {exc})") from None


def _store_error(url: str, exc: Exception) -> TraceError:
    if isinstance(exc, FileNotFoundError):
        return TraceError(url, "no such object")
    if isinstance(exc, PermissionError):
        return TraceError(url, "permission denied")
    return TraceError(url, f"cannot read ({type(exc).__name__}: {exc})")


def expand_url(url: str, is_trace) -> list[str]:
    """``url`` as :func:`~nongemm_trace.runs.batch.expand_inputs` treats a local path: an object is
    itself; a prefix (a "folder") every trace object below it (``is_trace(name)``), sorted; a glob its
    matches. Nothing found is one line naming the URL."""
    fs, path = filesystem(url)
    try:
        if any(ch in path for ch in "*?["):
            found = sorted(p for p in fs.glob(path) if not fs.isdir(p))
            if not found:
                raise TraceError(url, "no object matches this pattern")
        elif fs.isdir(path):
            found = sorted(p for p in fs.find(path) if is_trace(p.rsplit("/", 1)[-1]))
            if not found:
                raise TraceError(url, "prefix holds no trace objects")
        elif fs.exists(path):
            return [url]
        else:
            raise TraceError(url, "no such object or prefix")
    except TraceError:
        raise
    except Exception as exc:  # noqa: BLE001 - the store's own errors, in one line
        raise _store_error(url, exc) from None
    return [fs.unstrip_protocol(p) for p in found]


def is_prefix(url: str) -> bool:
    """Whether ``url`` names more than one object (a prefix or a glob): a batch, as a folder is."""
    fs, path = filesystem(url)
    if any(ch in path for ch in "*?["):
        return True
    try:
        return bool(fs.isdir(path))
    except Exception as exc:  # noqa: BLE001
        raise _store_error(url, exc) from None


@contextlib.contextmanager
def fetched(url: str, limit: int | None = None) -> Iterator[Path]:
    """A local copy of the object ``url`` for the duration of the ``with`` block (its name kept: the
    loaders tell formats by suffix), at most ``limit`` bytes (default :func:`~.reader.max_trace_bytes`)."""
    from .reader import max_trace_bytes, too_big

    cap = max_trace_bytes() if limit is None else limit
    fs, path = filesystem(url)
    try:
        size = fs.size(path)
    except Exception as exc:  # noqa: BLE001
        raise _store_error(url, exc) from None
    if size is not None and size > cap:
        raise too_big(url, size, cap, "is")
    folder = tempfile.mkdtemp(prefix="nongemm-fetch-")
    local = Path(folder) / (path.rsplit("/", 1)[-1] or "trace")
    try:
        done = 0
        try:
            with fs.open(path, "rb") as src, open(local, "wb") as dst:
                while True:
                    block = src.read(min(_BLOCK, cap + 1 - done))
                    if not block:
                        break
                    done += len(block)
                    if done > cap:  # the store sent more than it listed, or listed no size
                        raise too_big(url, done, cap, "holds")
                    dst.write(block)
        except TraceError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise _store_error(url, exc) from None
        yield local
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def local_path(trace: str | Path) -> Iterator[str | Path]:
    """``trace`` itself when it is a local path, else its fetched copy (:func:`fetched`)."""
    if is_url(trace):
        with fetched(str(trace)) as local:
            yield local
    else:
        yield trace


@contextlib.contextmanager
def local_paths(traces: list) -> Iterator[list]:
    """:func:`local_path` of each of ``traces`` (the local ones as they are), for a command of several."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(local_path(t)) for t in traces]


def named_as(model: object, local: object, url: object) -> None:
    """A result computed from a fetched copy names the URL the user gave, not the copy (its ``trace``
    attribute, or its document's, where it has one)."""
    if local is url:
        return
    if isinstance(getattr(model, "trace", None), str):
        model.trace = str(url)  # type: ignore[attr-defined]
    doc = getattr(model, "document", None)  # the verdicts' documents (explain, --weak) carry it inside
    if isinstance(doc, dict) and doc.get("trace") == str(local):
        doc["trace"] = str(url)


def named_as_urls(model: object, locals_: list, urls: list) -> None:
    """A result of several traces (a comparison) computed from fetched copies names the URLs the user
    gave: every ``trace`` column of its tables, every text in its documents (the fusion and
    quantization views name their traces) and its reports' ``trace``."""
    import dataclasses

    import polars as pl

    names = {str(a): str(b) for a, b in zip(locals_, urls) if a is not b}
    if not names or not dataclasses.is_dataclass(model):
        return

    def swap(v: object) -> object:
        if isinstance(v, str):
            return names.get(v, v)
        if isinstance(v, dict):
            return {k: swap(x) for k, x in v.items()}
        if isinstance(v, list):
            return [swap(x) for x in v]
        return v

    for f in dataclasses.fields(model):
        v = getattr(model, f.name)
        if isinstance(v, pl.DataFrame) and "trace" in v.columns:
            v = v.with_columns(pl.col("trace").replace(names))
        elif isinstance(v, (dict, list)) and f.name != "reports":
            v = swap(v)
        setattr(model, f.name, v)
    for r in getattr(model, "reports", None) or []:
        if isinstance(getattr(r, "trace", None), str):
            r.trace = names.get(r.trace, r.trace)
