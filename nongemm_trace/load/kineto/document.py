"""A Kineto JSON document decoded whole: its metadata, its raw events array, and the repair
of what broken writers leave behind. The streaming loader (:mod:`.kineto`) falls back to
this path for small files, bare arrays and anything its chunks cannot hold."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec

from ...errors import TraceError
from ..bom import without_bom
from ..source import SQLITE_MAGIC
from .events import ANY_DECODER, ENCODER, TOP_DECODER, MalformedJSON, short_error


def meta_of(top: dict[str, msgspec.Raw]) -> dict[str, Any]:
    """The top-level keys other than ``traceEvents``, decoded one by one (an undecodable one is None)."""
    meta: dict[str, Any] = {}
    for key, raw in top.items():
        try:
            meta[key] = ANY_DECODER.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            meta[key] = None
    return meta


#: the key as writers spell it, and an escaped ASCII letter (another spelling of the same key)
_EVENTS_KEY_TEXT = b'"traceEvents"'
_LETTER_ESCAPE = re.compile(rb"\\u00[4-7][0-9a-fA-F]")
#: the tokens that decide where a key of the top-level object is: strings, brackets, colons
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}:]')
DUPLICATE_EVENTS = ("more than one 'traceEvents' key (the events of one would hide the other's): not a trace "
                    "any writer makes; refusing to guess which holds the events")


def events_keys(text: bytes, at_least: int) -> bool:
    """Whether the top-level object that ``text`` opens (JSON, or the start of it) has at least
    ``at_least`` keys ``traceEvents``, however spelled. At once where the key is written fewer
    times and no letter is escaped (every trace a profiler writes); token by token otherwise."""
    if text.count(_EVENTS_KEY_TEXT) < at_least and not _LETTER_ESCAPE.search(text):
        return False
    return _walk_keys(text) >= at_least


def _walk_keys(text: bytes) -> int:
    depth, found, last = 0, 0, None
    for m in _TOKENS.finditer(text):
        tok = m.group()
        c = tok[:1]
        if c in b"[{":
            depth += 1
        elif c in b"]}":
            depth -= 1
        elif c == b":":
            if depth == 1 and last is not None and ANY_DECODER.decode(last) == "traceEvents":
                found += 1
        last = tok if c == b'"' and depth == 1 else None
    return found


def decode_document(path: str | Path, data: bytes) -> tuple[dict[str, Any], msgspec.Raw | None, bool]:
    """Split the document into metadata and the raw ``traceEvents`` array.

    Returns (metadata, raw events, is_bare_array). A bare JSON array of events
    (the Chrome trace "array format") is accepted too, and so is a UTF-8 byte order mark before either.
    """
    data = without_bom(data)
    if data[-1:] == b"\x00":  # zero padding after the value (a file system's preallocation), as after gzip
        data = data.rstrip(b"\x00") or data  # (nothing but zeros: not JSON, said so below)
    head = data[:64].lstrip()
    if data.startswith(SQLITE_MAGIC):
        raise TraceError(path, "is an SQLite database, not a Kineto JSON trace")
    if not head:
        raise TraceError(path, "empty file")
    if head[:1] == b"[":
        return {}, msgspec.Raw(data), True
    if head[:1] != b"{":
        raise TraceError(path, "not a JSON trace (does not start with '{' or '[')")
    try:
        top = TOP_DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise MalformedJSON(path, f"invalid or truncated JSON ({short_error(exc)})") from None
    except RecursionError:
        raise TraceError(path, "JSON nested too deeply") from None
    events = top.pop("traceEvents", None)
    meta = meta_of(top)
    if events is None:
        raise TraceError(path, "no 'traceEvents' key: not a Kineto/Chrome trace")
    if events_keys(data, 2):
        raise TraceError(path, DUPLICATE_EVENTS)
    return meta, events, False


def repair(data: bytes) -> tuple[bytes, str] | None:
    """Fix what Python's own JSON writer and broken writers leave behind, or None.

    * invalid UTF-8 bytes become U+FFFD (names may be mangled; times are not);
    * ``NaN`` / ``Infinity`` literals (``json.dumps`` writes them) become null,
      so the events that carry them are counted as missing a valid time.
    """
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace").encode("utf-8"), "invalid UTF-8 bytes were replaced by U+FFFD"
    if b"NaN" in data or b"Infinity" in data:
        import json
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            return None
        try:
            return ENCODER.encode(doc), "NaN / Infinity numbers (not JSON) were read as null"
        except (UnicodeEncodeError, msgspec.EncodeError, OverflowError,
                RecursionError):  # a lone surrogate escape: not JSON either
            return None
    return None
