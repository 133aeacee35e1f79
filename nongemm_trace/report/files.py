"""CSV and Parquet rendering: a report's tables (``categories``, ``ops``, ``kernels``), a launch
or FLOPs report's tables, a batch's rows. Times are written in microseconds (``*_us``) next
to the exact nanosecond columns (``*_ns``). Every CSV goes through :func:`.escape.csv_frame` /
:func:`.escape.csv_text`: a name that starts like a formula (``=``, ``+``, ``-``, ``@``) is written
with a leading ``'``, as text; Parquet keeps every name as it is."""

from __future__ import annotations

import polars as pl

from ..core.safe_write import write_file
from ..errors import TraceError
from ..models.batch import BatchResult
from ..models.flops import FlopsReport
from ..models.latency import LatencyReport, WhatIfReport
from ..models.launch import LaunchReport
from ..models.report import Report
from .escape import csv_frame, csv_text


def table_frame(report: Report, table: str) -> pl.DataFrame:
    if table == "categories":
        df = report.categories.rename({"time_ns": f"{report.metric}_time_ns"})
        df = df.with_columns(_us(f"{report.metric}_time_ns"))
        return df.with_columns(pl.lit(report.metric).alias("metric"), pl.lit(report.level).alias("level"))
    if table == "ops":
        return report.ops.with_columns(_us("gpu_time_ns"), _us("self_gpu_time_ns"), _us("cpu_time_ns"),
                                       _us("self_cpu_time_ns"))
    if table == "kernels":
        return report.kernels.with_columns(_us("dur_ns"))
    if table == "phases":
        return phases_frame(report.phases)
    raise ValueError(f"unknown table {table!r}")


def phases_frame(rows: list[dict]) -> pl.DataFrame:
    """One row per phase (``Report.phases``): its figures in ns and µs, each class's GPU time
    (``GEMM_time_ns``, ``non-GEMM_time_ns``, … the classes any phase has) and its top non-GEMM
    categories as ``category share %`` text; no rows (the columns all the same) for a trace without
    phases."""
    classes = sorted({c["class"] for r in rows for c in r["classes"]} | {"GEMM", "non-GEMM"})
    schema = {"phase": pl.Utf8, "iterations": pl.Int64, "time_ns": pl.Int64, "iteration_ns": pl.Int64,
              "batch": pl.Float64, "tokens": pl.Int64, "gpu_time_ns": pl.Int64, "activities": pl.Int64,
              **{f"{c}_time_ns": pl.Int64 for c in classes}, "top_categories": pl.Utf8}
    out = []
    for r in rows:
        by = {c["class"]: c["time_ns"] for c in r["classes"]}
        gpu = r["gpu_time_ns"]
        top = ", ".join(f"{c['category']} {100 * c['time_ns'] / gpu:.1f}%" for c in r["categories"]) if gpu else ""
        out.append({**{k: r[k] for k in ("phase", "iterations", "time_ns", "iteration_ns", "batch", "tokens",
                                         "gpu_time_ns", "activities")},
                    **{f"{c}_time_ns": by.get(c, 0) for c in classes}, "top_categories": top})
    df = pl.DataFrame(out, schema=schema)
    return df.with_columns(*(_us(c) for c in df.columns if c.endswith("_ns")))


def _us(ns_column: str) -> pl.Expr:
    """A ``*_ns`` column in microseconds, rounded to the nanosecond (no float noise such as 255.58700000000002)."""
    return (pl.col(ns_column) / 1000).round(3).alias(ns_column[:-3] + "_us")


def write_table(report: Report, table: str, fmt: str, output: str | None) -> str | None:
    """Write ``table`` as csv/parquet to ``output`` (csv to stdout when no output); returns
    the CSV text when it should be printed."""
    df = table_frame(report, table)
    if fmt == "csv":
        df = csv_frame(df)
        if output is None:
            return df.write_csv()
        write_file(output, lambda path: df.write_csv(path))
        return None
    if fmt == "parquet":
        if output is None:
            raise TraceError(report.trace, "--format parquet needs -o/--output PATH")
        write_file(output, lambda path: df.write_parquet(path))
        return None
    raise ValueError(fmt)


def launch_csv(rep: LaunchReport, table: str) -> str:
    """One of a launch report's tables (``LaunchReport.TABLES``) as CSV, ``*_us`` beside each ``*_ns``."""
    df = getattr(rep, table)
    return csv_frame(df.with_columns((pl.col(c) / 1000).alias(c[:-3] + "_us") for c in df.columns
                                     if c.endswith("_ns"))).write_csv()


def flops_csv(rep: FlopsReport, table: str) -> str:
    """One of a FLOPs report's tables (``FlopsReport.TABLES``) as CSV."""
    return csv_frame(getattr(rep, table)).write_csv()


#: a batch's per-trace columns (CSV; markdown shows them by name)
BATCH_COLUMNS = ["trace", "rank", "metric", "gpu_time_us", "gpu_activities", "GEMM_share", "non_GEMM_share",
                 "top_non_GEMM_category"]


def batch_rows(result: BatchResult) -> list[list]:
    """One row per trace of a batch (``BATCH_COLUMNS``)."""
    rows = []
    for r in result.reports:
        cls = {c["class"]: c["share"] for c in r["classes"]}
        non = [c for c in r["categories"] if c["class"] == "non-GEMM" and c["share"] > 0]
        rows.append([r["trace"], "" if r.get("rank") is None else r["rank"], r["metric"], r["gpu_time_us"],
                     r["gpu_activities"], round(cls.get("GEMM", 0.0), 6), round(cls.get("non-GEMM", 0.0), 6),
                     non[0]["category"] if non else ""])
    return rows


def batch_csv(result: BatchResult) -> str:
    import csv
    import io
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(BATCH_COLUMNS)
    w.writerows([csv_text(v) for v in row] for row in batch_rows(result))
    return buf.getvalue()


def latency_csv(rep: LatencyReport) -> str:
    """One row per (step, category, bound), then the same over all steps (``step`` empty)."""
    per = rep.attribution.join(rep.steps.select("step", "name", "wall"), on="step")
    tot = rep.total.with_columns(pl.lit(None, pl.Int64).alias("step"), pl.lit("all steps").alias("name"),
                                 pl.lit(int(rep.steps["wall"].sum() or 0), pl.Int64).alias("wall"))
    per = per.with_columns(pl.col("wall").cast(pl.Int64), pl.col("ns").cast(pl.Int64))
    rows = pl.concat([per.select("step", "name", "wall", "category", "class", "bound", "ns"),
                      tot.select("step", "name", "wall", "category", "class", "bound", "ns")])
    return csv_frame(rows.select("step", "name", (pl.col("wall") / 1000).alias("wall_us"), "category", "class",
                                 "bound", (pl.col("ns") / 1000).alias("time_us"))).write_csv()


def whatif_csv(rep: WhatIfReport) -> str:
    return csv_frame(rep.steps.select("step", "name", *((pl.col(c) / 1000).alias(f"{c}_us")
                                                        for c in ("measured", "predicted", "amdahl")))).write_csv()
