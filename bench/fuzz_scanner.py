"""The scanner-level tier of bench/fuzz.py: the C scanner against the Python reference on the
events array of each input, whole and cut into chunks, without the cost of whole loads.

For an input whose document the reference decodes, the events array is turned into tables by
msgspec and polars (``decode_events`` + ``chunk_tables``, the reference) and scanned by C:
whole, then cut at event-boundary patterns (some inside strings: C must then give up), each
chunk in a buffer of its own exact size (with ``PYTHONMALLOC=malloc`` under AddressSanitizer,
a read past its end is reported). The C scanner may give up on any array; where it accepts
one it must give the reference's tables and counts exactly, and the reference must accept
that array too."""

from __future__ import annotations

import gzip
import random
import zlib

import polars as pl

from nongemm_trace.errors import TraceError
from nongemm_trace.load.kineto import fast_scan
from nongemm_trace.load.kineto.cutting import _BOUNDARY
from nongemm_trace.load.kineto.document import decode_document
from nongemm_trace.load.kineto.events import decode_events
from nongemm_trace.load.kineto.tables import TABLES, Tally, chunk_tables


def _text(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(pl.col(pl.Categorical).cast(pl.Utf8))


def _equal(a: dict[str, pl.DataFrame], b: dict[str, pl.DataFrame]) -> bool:
    return all(_text(a[k]).schema == _text(b[k]).schema and _text(a[k]).equals(_text(b[k]), null_equal=True)
               for k in TABLES)


def scanner_check(data: bytes, keep_python: bool, rng: random.Random) -> tuple[str, str]:
    """("agree" | "skipped" | "DISAGREE", what): the C scanner against the reference on ``data``."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error):
            return "skipped", "not gzip"
    try:
        _, raw, _ = decode_document("input", data)
    except TraceError:
        return "skipped", "no events array"
    raw = bytes(raw)
    ref_tally, malformed = Tally(), {}
    try:
        ref_events = decode_events("input", raw, malformed)
    except TraceError:
        ref_events = None
    got = fast_scan.scan(raw, keep_python, c_tally := Tally())
    if ref_events is None:
        return ("DISAGREE", "C accepted an array the reference refuses") if not isinstance(got, str) \
            else ("agree", "both refuse")
    ref = chunk_tables(ref_events, 0, keep_python, ref_tally)
    if not isinstance(got, str) and (got[0] != len(ref_events) or not _equal(got[1], ref)
                                     or c_tally.to_dict() != ref_tally.to_dict()):
        return "DISAGREE", "whole array: C tables differ from the reference"
    # cut at some boundary patterns (as the loader's cutter does, or inside strings)
    cuts = [m.start() + 1 for m in _BOUNDARY.finditer(raw)]
    if not cuts:
        return "agree", "whole"
    chosen = sorted(rng.sample(cuts, min(len(cuts), rng.randint(1, 4))))
    parts, start = [], raw.index(b"[") + 1
    for cut in chosen:
        nxt = raw.index(b"{", cut)
        parts.append(b"[" + raw[start:cut] + b"]")
        start = nxt
    parts.append(b"[" + raw[start:raw.rindex(b"]")] + b"]")
    counts, frames, tally = 0, {k: [] for k in TABLES}, Tally()
    for part in parts:
        res = fast_scan.scan(bytes(part), keep_python, t := Tally())
        if isinstance(res, str):
            return "agree", f"C gave up a chunk ({res})"
        try:
            decode_events("input", part, {})
        except TraceError:
            return "DISAGREE", "C accepted a chunk the reference refuses"
        n, tables = res
        for k, df in tables.items():
            frames[k].append(df.with_columns(pl.col("ev_idx") + counts))
        counts += n
        tally.add(t.to_dict())
    joined = {k: pl.concat([_text(f) for f in frames[k]]) for k in TABLES}
    if counts != len(ref_events) or not _equal(joined, ref) or tally.to_dict() != ref_tally.to_dict():
        return "DISAGREE", f"{len(parts)} chunks: C tables differ from the reference"
    return "agree", f"{len(parts)} chunks"
