"""The JSON writer's columnar rows (report/json_out.py ``columnar_rows``) are byte for byte the
rows' ``json.dumps`` (``_indented_rows``): on the shared traces' reports and on random values
(escapes, non-ASCII, nulls, negative and large times, the edge of the integer encoding)."""

from __future__ import annotations

import random

import polars as pl
import pytest
from conftest import kineto_traces

import nongemm_trace
from nongemm_trace.models.report import OP_ROWS, STEP_ROWS
from nongemm_trace.report.json_out import Streamed, _indented_rows, columnar_rows, render_json

_CHARS = ['a', '"', '\\', '\n', '\x00', '\x1f', '\x7f', 'é', '\u2028', '😀', ' ', '\t', '\x08', '\x0c', '\r', '/']


def _text(rng):
    return "".join(rng.choice(_CHARS) for _ in range(rng.randint(0, 8)))


def _int(rng):
    k = rng.choice([0, 1, 3, 6, 9, 12, 15])
    return rng.randint(-10**k, 10**k)


def test_random_rows_are_the_same_bytes():
    rng = random.Random(7)
    for trial in range(150):
        n = rng.randint(1, 40)
        ops = pl.DataFrame({
            "op": [_text(rng) if rng.random() > .1 else None for _ in range(n)],
            "category": [rng.choice(["gemm", 'x"y', None]) for _ in range(n)],
            "calls": [abs(_int(rng)) for _ in range(n)],
            "gpu_time_ns": [_int(rng) if rng.random() > .1 else None for _ in range(n)],
            **{c: [_int(rng) for _ in range(n)]
               for c in ("self_gpu_time_ns", "activities", "cpu_time_ns", "self_cpu_time_ns")}},
            schema_overrides={"category": pl.Categorical})
        assert columnar_rows(ops, OP_ROWS.fields) == _indented_rows(OP_ROWS(ops))
        cols = {"step": [rng.randint(-2**31, 2**31 - 1) for _ in range(n)], "name": [_text(rng) for _ in range(n)],
                **{c: [_int(rng) for _ in range(n)] for c in ("cpu_time_ns", "gpu_time_ns", "activities")}}
        for c in ("step_ns", "latency_ns"):
            if rng.random() > .3:
                cols[c] = [_int(rng) if rng.random() > .2 else None for _ in range(n)]
        steps = pl.DataFrame(cols, schema_overrides={"step": pl.Int32} if trial % 2 else {})
        assert columnar_rows(steps, STEP_ROWS.fields) == _indented_rows(STEP_ROWS(steps))


def test_times_near_the_edge_of_the_integer_encoding():
    edge = 1 << 50
    values = [edge - 1, -(edge - 1), 999, -999, 1000, -1000, 1, -1, 0, 123456789012345, 10**15 + 1]
    rng = random.Random(3)
    values += [rng.randint(-edge + 1, edge - 1) for _ in range(20000)]
    steps = pl.DataFrame({"step": range(len(values)), "name": "s", "cpu_time_ns": values,
                          "gpu_time_ns": values[::-1], "activities": values, "step_ns": values})
    assert columnar_rows(steps, STEP_ROWS.fields) == _indented_rows(STEP_ROWS(steps))
    for beyond in (edge, -edge, 2**62):  # past it, or not integers: the caller writes row by row
        assert columnar_rows(steps.head(1).with_columns(pl.lit(beyond).alias("cpu_time_ns")), STEP_ROWS.fields) is None
    assert columnar_rows(steps.head(1).with_columns(pl.lit(1.5).alias("gpu_time_ns")), STEP_ROWS.fields) is None


def test_shared_traces_reports_stream_the_same_bytes():
    paths = kineto_traces()
    if not paths:
        pytest.skip("needs the shared traces")
    for path in paths[:8]:
        report = nongemm_trace.analyze(str(path))
        tables = report.json_tables(None)
        for df, rows in tables.values():
            if df.height:
                assert columnar_rows(df, rows.fields) == _indented_rows(rows(df)), path
        assert Streamed(report, tables, {}).text() == render_json(report), path


def test_periods_in_us_are_the_per_value_rounding():
    from nongemm_trace.models.report import _periods_us
    from nongemm_trace.vocabulary import us

    rng = random.Random(5)
    values = [rng.randint(-(1 << 50) + 1, (1 << 50) - 1) for _ in range(50000)] + [0, 1, -1, 999, 1000, 1001]
    assert _periods_us(pl.Series(values)) == [us(v) for v in values]
    for edge in ([1 << 50], [-(1 << 63)], [(1 << 63) - 1]):  # by the function a value there
        assert _periods_us(pl.Series(edge, dtype=pl.Int64)) == [us(v) for v in edge]


def test_a_streamed_report_writes_no_row_dicts(monkeypatch):
    """A report with more rows than the writer streams at once: the same bytes as the whole
    document, with no row made a dict (the rows' function, 60 us a row, is never called)."""
    import dataclasses

    from nongemm_trace.models import report as report_model
    from nongemm_trace.report.json_out import STREAM_ROWS, render_json_batches

    paths = kineto_traces()
    if not paths:
        pytest.skip("needs the shared traces")
    report = nongemm_trace.analyze(str(paths[0]))
    n = STREAM_ROWS + 10_000
    steps = pl.DataFrame({"step": pl.int_range(n, eager=True), "name": [f"ProfilerStep#{i}" for i in range(n)],
                          "cpu_time_ns": pl.int_range(n, eager=True) * 7, "gpu_time_ns": pl.int_range(n, eager=True),
                          "activities": pl.int_range(n, eager=True) % 3, "step_ns": pl.int_range(n, eager=True) * 9001})
    report = dataclasses.replace(report, steps=steps)
    whole = render_json(report)
    made = []
    for rows in (report_model.OP_ROWS, report_model.STEP_ROWS):
        monkeypatch.setattr(rows, "make", lambda df, real=rows.make: made.append(df.height) or real(df))
    doc = render_json_batches(report)
    assert isinstance(doc, Streamed)
    assert doc.text() == whole
    assert made == []
