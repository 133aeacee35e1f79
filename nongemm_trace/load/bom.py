"""A UTF-8 byte order mark before a JSON document: dropped by every reader of one.

JSON's standard (RFC 8259, section 8.1) forbids a writer to add the mark and lets a parser
ignore it; Windows tools add it (PowerShell's ``Out-File``, Notepad's "UTF-8 with BOM"), so a
trace or profile that went through one starts with the three bytes ``EF BB BF``. msgspec and
Python's ``json`` refuse them, and the loaders tell a format by the document's first byte: each
place that reads a JSON document's start (the format's sniffing, the first block of a load, the
whole-document decode, the stream's text before ``traceEvents``, a stored report, a layer
information file, ``annotate``'s re-read) drops the mark here first, so one answer comes from
every load path.
"""

from __future__ import annotations

from typing import TypeVar

UTF8_BOM = b"\xef\xbb\xbf"

Data = TypeVar("Data", bytes, bytearray, memoryview)


def without_bom(data: Data) -> Data:
    """``data`` without a UTF-8 byte order mark at its start (the same object when it has none)."""
    return data[len(UTF8_BOM):] if bytes(data[:len(UTF8_BOM)]) == UTF8_BOM else data
