"""CSV and Parquet rendering of one of the report's tables (``categories``, ``ops``,
``kernels``). Times are written in microseconds (``*_us``) next to the exact
nanosecond columns (``*_ns``)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ..errors import TraceError
from ..models.report import Report

TABLES = ("categories", "ops", "kernels")


def table_frame(report: Report, table: str) -> pl.DataFrame:
    if table == "categories":
        df = report.categories.rename({"time_ns": f"{report.metric}_time_ns"})
        df = df.with_columns(_us(f"{report.metric}_time_ns"))
        return df.with_columns(pl.lit(report.metric).alias("metric"), pl.lit(report.level).alias("level"))
    if table == "ops":
        return report.ops.with_columns(_us("gpu_time_ns"), _us("self_gpu_time_ns"))
    if table == "kernels":
        return report.kernels.with_columns(_us("dur_ns"))
    raise ValueError(f"unknown table {table!r}")


def _us(ns_column: str) -> pl.Expr:
    """A ``*_ns`` column in microseconds, rounded to the nanosecond (no float noise such as 255.58700000000002)."""
    return (pl.col(ns_column) / 1000).round(3).alias(ns_column[:-3] + "_us")


def write_table(report: Report, table: str, fmt: str, output: str | None) -> str | None:
    """Write ``table`` as csv/parquet to ``output`` (csv to stdout when no output); returns
    the CSV text when it should be printed."""
    df = table_frame(report, table)
    if fmt == "csv":
        if output is None:
            return df.write_csv()
        _write(lambda: df.write_csv(output), output)
        return None
    if fmt == "parquet":
        if output is None:
            raise TraceError(report.trace, "--format parquet needs -o/--output PATH")
        _write(lambda: df.write_parquet(output), output)
        return None
    raise ValueError(fmt)


def _write(fn, output: str) -> None:
    try:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        fn()
    except OSError as exc:
        raise TraceError(output, f"cannot write: {exc.strerror or exc}") from None
