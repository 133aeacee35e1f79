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
                for lo in range(0, df.height, ROW_BATCH):
                    yield ("," if lo else "") + _indented_rows(rows(df.slice(lo, ROW_BATCH)))
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
