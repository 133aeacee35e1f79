"""The Kineto loader gives every text column as categorical codes (schema.TEXT), and every later
stage reads text and categorical columns alike: the same trace with its tables as text (as the
Nsight, TensorRT and ONNX Runtime loaders give them) gives byte-identical outputs."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import polars as pl
import pytest
from conftest import shared

import nongemm_trace.load as load_mod
from nongemm_trace import cli, schema
from nongemm_trace.core.frames import appearance_codes, as_text, int_of_text
from nongemm_trace.load import load_trace

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "sample_traces").glob("*.json.gz"))
TABLES = ("ops", "launches", "activities", "python", "cuda_syncs")


@pytest.mark.parametrize("scanner", ["on", "off"])
def test_kineto_text_columns_are_categorical(scanner, monkeypatch):
    """Both paths (the C scanner and msgspec) give every declared text column as categorical."""
    monkeypatch.setenv("NONGEMM_FAST_SCAN", scanner)
    trace = load_trace(SAMPLES[0], keep_python=True)
    for table in TABLES:
        df = getattr(trace, table)
        text = [c for c, want in schema.TABLES[table].items() if want == schema.TEXT]
        assert text and all(df.schema[c] == pl.Categorical for c in text), (table, df.schema)
        assert not [c for c, t in df.schema.items() if t == pl.String], table


def _cli(argv: list[str]) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    return f"rc={rc}\n{out.getvalue()}\n--stderr--\n{err.getvalue()}"


def _outputs(trace: Path, tmp: Path, kernel: str) -> dict[str, str]:
    t = str(trace)
    runs = {
        "analyze": ["analyze", t, "--format", "json"],
        "analyze_top_cpu": ["analyze", t, "--format", "json", "--level", "top", "--metric", "cpu"],
        "kernels_csv": ["analyze", t, "--format", "csv", "--table", "kernels"],
        "launch": ["launch", t, "--format", "json"],
        "launch_acts": ["launch", t, "--format", "csv", "--table", "activities"],
        "flops": ["flops", t, "--format", "json"],
        "latency": ["latency", t, "--format", "json"],
        "whatif": ["whatif", t, "--format", "json", "--scale", f"kernel:{kernel}=0.5", "--graphs"],
        "explain": ["explain", t, kernel, "--format", "json"],
    }
    out = {k: _cli(v) for k, v in runs.items()}
    dest = tmp / "annotated.json"
    out["annotate"] = _cli(["annotate", t, "-o", str(dest)]).replace(str(tmp), "TMP") + dest.read_text()
    return out


@pytest.mark.parametrize(("name", "kernel"), [("bert_base_fp32_bs8_s128__eager.json.gz", "elementwise"),
                                              ("llama_1b_bf16_bs1_s2048__compiled_cudagraphs.json.gz", "triton")])
def test_text_tables_give_the_same_outputs(name, kernel, tmp_path, monkeypatch):
    trace = ROOT / "sample_traces" / name
    coded = _outputs(trace, tmp_path, kernel)
    assert all(v.startswith("rc=0") for v in coded.values()), {k: v[-300:] for k, v in coded.items()}
    real, loads = load_mod.load_trace, []

    def as_another_loader(*args, **kwargs):
        tr = real(*args, **kwargs)
        loads.append(tr)
        for table in TABLES:
            setattr(tr, table, as_text(getattr(tr, table)))
        return tr

    monkeypatch.setattr(load_mod, "load_trace", as_another_loader)
    text = _outputs(trace, tmp_path, kernel)
    assert loads and text == coded


def test_the_result_models_hold_text():
    import nongemm_trace

    r = nongemm_trace.analyze(SAMPLES[0])
    for table in (r.kernels, r.kernel_summary, nongemm_trace.launch_analysis(SAMPLES[0]).activities):
        assert pl.Categorical not in table.schema.values(), table.schema


def test_thread_numbers_depend_on_the_rows_alone():
    """Numbered by first appearance over all the columns given, whatever codes polars holds for them."""
    held = pl.Series(["7", "3", "5"], dtype=pl.Categorical)  # earlier categorical values of the process
    pid = pl.Series("pid", ["5", "5", "9"])
    tid = pl.Series("tid", ["3", "5", "1"])
    for p, t in ((pid, tid), (pid.cast(pl.Categorical), tid.cast(pl.Categorical))):
        got = appearance_codes(p, t)
        assert [s.to_list() for s in got] == [[0, 0, 1], [2, 0, 3]] and [s.name for s in got] == ["pid", "tid"]
    assert held.len() == 3


def test_thread_numbers_by_table_equal_a_replacement():
    """The numbers gathered from a table indexed by code equal a replacement's (null numbered too),
    also where the codes lie too far apart for a table (the replacement then)."""
    a = pl.Series("a", ["x", None, "y", "x", None])
    b = pl.Series("b", ["y", "z", None], dtype=pl.Categorical)

    def replaced(*cols):
        codes = [c.cast(pl.Categorical).to_physical() for c in cols]
        seen = pl.concat(codes).unique(maintain_order=True)
        numbers = pl.int_range(seen.len(), dtype=pl.UInt32, eager=True)
        return [c.replace_strict(seen, numbers, return_dtype=pl.UInt32).to_list() for c in codes]

    want = replaced(a, b)
    assert want == [[0, 1, 2, 0, 1], [2, 3, 1]]
    assert [s.to_list() for s in appearance_codes(a, b)] == want
    far = pl.Series([f"far{i}" for i in range(70_000)], dtype=pl.Categorical)  # pushes the next codes up
    c = pl.Series("c", ["late", None, "late2"])
    assert [s.to_list() for s in appearance_codes(c, a)] == replaced(c, a)
    assert far.len() == 70_000


def test_per_value_by_code_equals_a_replacement():
    """A categorical column's answers gathered from a table indexed by code equal a replacement's
    (null rows take the null value's answer; empty columns; answers of several types), also where
    the codes lie too far apart for a table."""
    from nongemm_trace.core.frames import per_value

    def replaced(df, col, fn, dtype):
        uniq = df.select(pl.col(col).unique()).to_series()
        got = pl.DataFrame({col: uniq.cast(pl.String)}).select(fn(pl.col(col)).cast(dtype)).to_series()
        return pl.col(col).to_physical().replace_strict(uniq.to_physical(), got, default=None, return_dtype=dtype)

    fns = [(lambda e: e.str.contains("mm"), pl.Boolean), (lambda e: e.cast(pl.Int64, strict=False), pl.Int64),
           (lambda e: e.str.replace(r"^.*::", ""), pl.String), (lambda e: e.fill_null("none"), pl.String)]
    names = ["aten::mm", None, "12", "x::y", "aten::mm", "7", None, "ProfilerStep#3"]
    for far in (False, True):
        if far:
            held = pl.Series([f"far{i}" for i in range(70_000)], dtype=pl.Categorical)  # later codes past 70,000
            names = [n and n + "!" for n in names]
        df = pl.DataFrame({"name": pl.Series(names).cast(pl.Categorical)})
        for d in (df, df.head(0), df.drop_nulls(), df.filter(pl.col("name").is_null())):
            for fn, dtype in fns:
                assert d.select(per_value(d, "name", fn, dtype)).equals(d.select(replaced(d, "name", fn, dtype)))
    assert held.len() == 70_000


def test_int_of_text_reads_text_and_codes():
    df = pl.DataFrame({"pid": ["1", "x", None, "1"]})
    for d in (df, df.with_columns(pl.col("pid").cast(pl.Categorical))):
        assert d.select(int_of_text(d, "pid"))["pid"].to_list() == [1, None, None, 1]


def test_shared_trace_with_text_tables_links_the_same():
    """A multi-thread training trace (two host threads): the link and the launch view's replay
    do not depend on the tables' text type."""
    path = shared("h200x2", "bert_ddp_train_rank0.json.gz")
    from nongemm_trace.link import link

    trace = load_trace(path)
    coded = link(trace)
    for table in TABLES:
        setattr(trace, table, as_text(getattr(trace, table)))
    text = link(trace)
    assert as_text(coded.ops).equals(as_text(text.ops))
    assert as_text(coded.activities).equals(as_text(text.activities))
