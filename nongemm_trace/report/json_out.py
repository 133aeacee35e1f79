"""JSON rendering: a result model's ``to_dict`` written out. Deterministic (sorted tables, fixed
rounding), so the same input always gives byte-identical output."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from typing import Any

#: a document whose growing lists hold more rows than this is written in batches (:class:`Streamed`)
STREAM_ROWS = 50_000


def render_json(model: Any, **to_dict: Any) -> str:
    """A result model (``Report``, ``LaunchReport``, ``FlopsReport``, ``Comparison``, ``BatchResult``)
    as its JSON document; ``to_dict`` goes to its ``to_dict`` (``max_ops`` for a report)."""
    return json.dumps(model.to_dict(**to_dict), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def render_json_batches(model: Any, **to_dict: Any) -> str | Streamed:
    """:func:`render_json` for the command line's output: a report with more than
    :data:`STREAM_ROWS` op and step rows comes as a :class:`Streamed` document, the same bytes
    written a batch of rows at a time (a million steps were a list of a million dicts and one
    string of 400 MB)."""
    tables = getattr(model, "json_tables", None)
    if tables is not None:
        got = tables(to_dict.get("max_ops"))
        if sum(df.height for df, _ in got.values()) > STREAM_ROWS:
            return Streamed(model, got, to_dict)
    return render_json(model, **to_dict)


def _indented_rows(rows: list[dict[str, Any]]) -> str:
    """Flat rows (scalar values) as ``json.dumps(indent=2)`` lays them out one level inside a
    document, by the C encoder: its item separator is a NUL (which no encoded string holds raw),
    then made the line breaks and indents of the rows and of their keys (the indenting encoder is
    pure Python, 5 us a value)."""
    text = json.dumps(rows, ensure_ascii=False, allow_nan=False, separators=(",\x00", ": "))
    body = text[2:-2].replace("},\x00{", "\n    },\n    {\n      ").replace(",\x00", ",\n      ")
    return "\n    {\n      " + body + "\n    }"


#: integer nanoseconds below this (in magnitude) are written as microseconds by integer arithmetic:
#: there ``round(ns / 1000, 3)`` is the double nearest ``ns / 1000`` itself (an ulp far below 0.001),
#: whose shortest ``repr`` is its decimal digits with the trailing zeros dropped
_EXACT_NS = 1 << 50
#: how ``json.dumps`` writes a control character inside a string
_CONTROL = {i: json.dumps(chr(i))[1:-1] for i in range(32)}


def columnar_rows(df: Any, fields: tuple[tuple[str, str, str], ...]) -> str | None:
    """:func:`_indented_rows` of the rows ``fields`` make of ``df``, encoded by polars string
    expressions over whole columns (the rows' dicts and the encoder cost 60 us a row: a million steps
    took a minute): byte for byte the same text, or None where a column is not what these
    encodings cover (a time that is not an integer or past :data:`_EXACT_NS`, a null count, a missing
    column), which the caller then writes row by row."""
    import polars as pl

    parts = []
    for i, (key, col, kind) in enumerate(fields):
        enc = _encoded(df, col, kind)
        if enc is None:
            return None
        parts += [pl.lit(("\n    {\n      " if i == 0 else ",\n      ") + json.dumps(key, ensure_ascii=False) + ": "),
                  enc]
    parts.append(pl.lit("\n    }"))
    return df.select(pl.concat_str(parts).str.join(",")).item()


def _encoded(df: Any, col: str, kind: str) -> Any:
    """The expression writing column ``col`` as JSON values of ``kind``, or None (see :func:`columnar_rows`)."""
    import polars as pl

    if col not in df.columns:
        return pl.lit("null") if kind == "us_or_none" else None
    dtype, c = df.schema[col], pl.col(col)
    if dtype == pl.Null and kind != "int":  # every value missing: null, or 0.0 as ``us(None)``
        return pl.lit("0.0" if kind == "us" else "null")
    if kind == "text":
        if not (dtype == pl.String or isinstance(dtype, (pl.Categorical, pl.Enum))):
            return None
        text = c.cast(pl.String)
        esc = text.str.replace_all("\\", "\\\\", literal=True).str.replace_all('"', '\\"', literal=True)
        if df.select(text.str.contains(r"[\x00-\x1f]").any()).item():
            for code, spelled in _CONTROL.items():
                esc = esc.str.replace_all(chr(code), spelled, literal=True)
        return pl.when(c.is_null()).then(pl.lit("null")).otherwise(pl.concat_str([pl.lit('"'), esc, pl.lit('"')]))
    if not dtype.is_integer():
        return None
    if kind == "int":
        return None if df[col].null_count() else c.cast(pl.String)
    lo, hi = df[col].min(), df[col].max()
    if lo is not None and (lo <= -_EXACT_NS or hi >= _EXACT_NS):
        return None
    v = c.cast(pl.Int64)
    if kind == "us":
        v = v.fill_null(0)
    a = v.abs()
    frac = (a % 1000).cast(pl.String).str.zfill(3).str.strip_chars_end("0")
    text = pl.concat_str([pl.when(v < 0).then(pl.lit("-")).otherwise(pl.lit("")), (a // 1000).cast(pl.String),
                          pl.lit("."), pl.when(frac == "").then(pl.lit("0")).otherwise(frac)])
    return text.fill_null("null")


class Streamed:
    """A JSON document whose long lists are written in batches: the rest of the document is
    made with a stand-in for each (an unguessable string, so no name in the trace can be taken
    for one), and each stand-in is replaced by its list's rows, encoded a batch at a time with
    the indentation the whole document would give them: byte for byte :func:`render_json`'s text."""

    def __init__(self, model: Any, tables: dict[str, tuple[Any, Callable[[Any], list]]], to_dict: dict[str, Any]):
        self._model, self._tables, self._to_dict = model, tables, to_dict

    def pieces(self) -> Iterator[str]:
        from ..models.report import ROW_BATCH

        tag = secrets.token_hex(16)
        marks = {name: f"\x00{tag}:{name}" for name in self._tables}
        text = json.dumps(self._model.to_dict(**self._to_dict, deferred=marks), indent=2, ensure_ascii=False,
                          allow_nan=False) + "\n"
        for name, (df, rows) in self._tables.items():
            quoted = json.dumps(marks[name], ensure_ascii=False)
            before, after = text.split(quoted, 1)
            yield before
            if df.height == 0:
                yield "[]"
            else:
                yield "["
                fields = getattr(rows, "fields", None)
                for lo in range(0, df.height, ROW_BATCH):
                    part = df.slice(lo, ROW_BATCH)
                    encoded = columnar_rows(part, fields) if fields else None
                    yield ("," if lo else "") + (_indented_rows(rows(part)) if encoded is None else encoded)
                yield "\n  ]"
            text = after
        yield text

    def write(self, fh: Any) -> None:
        """Write the document to a text stream."""
        for piece in self.pieces():
            fh.write(piece)

    def to_file(self, path: str) -> None:
        """Write the document to ``path`` (UTF-8): a writer of :func:`~nongemm_trace.core.safe_write.write_file`."""
        with open(path, "w", encoding="utf-8") as fh:
            self.write(fh)

    def text(self) -> str:
        return "".join(self.pieces())


def render_document(document: dict[str, Any], *, ascii_only: bool = False) -> str:
    """A document that is not a model (``explain``'s, ``check``'s) as indented JSON."""
    return json.dumps(document, indent=2, ensure_ascii=ascii_only) + "\n"
