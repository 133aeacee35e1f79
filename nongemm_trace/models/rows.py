"""Rows of a JSON document back to tables: the one place the models' ``from_dict`` turn
``*_us`` values into integer ``*_ns`` columns."""

from __future__ import annotations

from typing import Any

import polars as pl

from ..core.trace import Anomaly
from ..vocabulary import ns


def frame(rows: list[dict[str, Any]], columns: dict[str, tuple[str, Any]]) -> pl.DataFrame:
    """A table from JSON rows: ``columns`` maps each column to (the row key, its dtype); a key
    ending in ``_us`` whose column ends in ``_ns`` is converted to whole nanoseconds."""
    data: dict[str, list[Any]] = {}
    for col, (key, _) in columns.items():
        convert = key.endswith("_us") and col.endswith("_ns")
        data[col] = [ns(r.get(key)) if convert else r.get(key) for r in rows]
    return pl.DataFrame(data, schema={c: t for c, (_, t) in columns.items()})


def us_row_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """A table whose rows were written column by column with ``*_ns`` -> ``*_us`` (the launch
    report's per-step/device/stream rows): the names and the nanoseconds come back."""
    if not rows:
        return pl.DataFrame()
    cols: dict[str, list[Any]] = {}
    for key in rows[0]:
        if key.endswith("_us"):
            cols[key[:-3] + "_ns"] = [ns(r[key]) for r in rows]
        else:
            cols[key] = [r[key] for r in rows]
    return pl.DataFrame(cols, strict=False)


def warnings_of(d: dict[str, Any]) -> list[Anomaly]:
    return [Anomaly(w["code"], w.get("count", 1), w["message"]) for w in d.get("warnings") or []]
