"""Nsight Systems SQLite exports: analysis, conversion to Kineto JSON, schema variations."""

from __future__ import annotations

import gzip
import json
import sqlite3
from collections import Counter

import pytest
from conftest import SHARED, shared

import nongemm_trace
from nongemm_trace.cli import main
from nongemm_trace.load.nsys import normalize_kernel_name

NSYS = sorted((SHARED / "external" / "nsys").glob("*.sqlite.gz")) if (SHARED / "external" / "nsys").is_dir() else []


def test_bert_nvtx_export_matches_the_kineto_trace_of_the_same_workload():
    nsys = nongemm_trace.analyze(shared("h200_nsys", "bert_nvtx.sqlite.gz"))
    kineto = nongemm_trace.analyze(shared("h200", "bert_base_fp32_bs8_s128__eager.json.gz"))
    a = dict(nsys.categories.select("category", "activities").iter_rows())
    b = dict(kineto.categories.select("category", "activities").iter_rows())
    assert a == b
    sa = dict(nsys.categories.select("category", "share").iter_rows())
    sb = dict(kineto.categories.select("category", "share").iter_rows())
    for cat in sa:
        assert abs(sa[cat] - sb[cat]) < 0.03, cat
    # ops come from emit_nvtx ranges: the launching ops are the same ATen ops
    ops_a = set(nsys.kernels["launch_op"].drop_nulls())
    ops_b = set(kineto.kernels["launch_op"].drop_nulls())
    assert ops_a == ops_b
    assert nsys.metadata["device"]["name"] == "NVIDIA H200"


@pytest.mark.parametrize("path", NSYS, ids=[p.name for p in NSYS])
def test_every_export_converts_and_round_trips(path, tmp_path, capsys):
    direct = nongemm_trace.analyze(path)
    assert direct.gpu_activities > 0
    out = tmp_path / "converted.json.gz"
    assert main(["convert", str(path), "-o", str(out)]) == 0
    doc = json.loads(gzip.decompress(out.read_bytes()))
    assert {"traceEvents", "deviceProperties"} <= set(doc)
    again = nongemm_trace.analyze(out)
    assert again.gpu_activities == direct.gpu_activities
    assert again.gpu_time_ns == direct.gpu_time_ns
    assert dict(again.categories.select("category", "time_ns").iter_rows()) == \
        dict(direct.categories.select("category", "time_ns").iter_rows())


def test_nsightful_matches_its_own_golden_rendering(tmp_path):
    path = shared("external", "nsys", "nsightful_t4_power_iteration.sqlite.gz")
    golden = json.loads(gzip.decompress(shared("external", "nsys",
                                               "nsightful_t4_power_iteration.golden.json.gz").read_bytes()))
    out = tmp_path / "t4.json"
    assert main(["convert", str(path), "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    kernels = [e for e in doc["traceEvents"] if e["cat"] == "kernel"]
    assert len(kernels) == 3689
    assert Counter(e["args"]["shortName"] for e in kernels) == Counter(e["name"] for e in golden if e["cat"] == "cuda")
    # kernel times as the golden file has them (microseconds, same origin)
    want = Counter((e["name"], round(e["ts"], 3), round(e["dur"], 3)) for e in golden if e["cat"] == "cuda")
    got = Counter((e["args"]["shortName"], round(e["ts"], 3), round(e["dur"], 3)) for e in kernels)
    assert got == want
    ranges = [e for e in doc["traceEvents"] if e["cat"] in ("cpu_op", "user_annotation")]
    want_r = Counter((e["name"], round(e["ts"], 3), round(e["dur"], 3)) for e in golden if e["cat"] == "nvtx")
    got_r = Counter((e["name"], round(e["ts"], 3), round(e["dur"], 3)) for e in ranges)
    assert got_r == want_r and len(ranges) == 786


def test_kernel_names_normalized_to_kineto_spelling():
    raw = ("void at::native::_scatter_gather_elementwise_kernel<(int)128, (int)8, void at::native::"
           "_cuda_scatter_gather_internal_kernel<(bool)0, at::native::OpaqueType<(int)8>, long>::operator ()"
           "<at::native::TensorAssign>(at::TensorIterator &, long, long, long, const T1 &)::[lambda(int) (instance 1)]>"
           "(int, T3)")
    n = normalize_kernel_name(raw)
    assert n.startswith("void at::native::_scatter_gather_elementwise_kernel<128, 8, ")
    assert "<false, at::native::OpaqueType<8>, long>" in n and "{lambda(int)#1}" in n
    assert normalize_kernel_name("void <unnamed>::k()") == "void (anonymous namespace)::k()"


def _variant(tmp_path, sql: list[str]):
    """The shared export changed by ``sql``, as a file (edited in place: no ``deserialize``, which
    Python 3.10's sqlite3 lacks)."""
    src = shared("h200_nsys", "bert_nvtx.sqlite.gz")
    out = tmp_path / "variant.sqlite"
    out.write_bytes(gzip.decompress(src.read_bytes()))
    con = sqlite3.connect(out)
    for s in sql:
        con.execute(s)
    con.commit()
    con.close()
    return out


def _run(path, capsys):
    code = main(["analyze", str(path), "--format", "json"])
    out, err = capsys.readouterr()
    return code, out, err


def test_missing_tables_are_warnings(tmp_path, capsys):
    p = _variant(tmp_path, ["drop table NVTX_EVENTS", "drop table CUPTI_ACTIVITY_KIND_RUNTIME"])
    code, out, err = _run(p, capsys)
    assert code == 0, err
    d = json.loads(out)
    assert d["gpu_activities"] == 308 and d["attribution"] == {"none": 308}
    assert sum(w["count"] for w in d["warnings"] if w["code"] == "missing_table") == 2
    assert next(c for c in d["categories"] if c["category"] == "unclassified")["activities"] == 0


def test_empty_tables_give_an_empty_report(tmp_path, capsys):
    p = _variant(tmp_path, ["delete from CUPTI_ACTIVITY_KIND_KERNEL", "delete from NVTX_EVENTS"])
    code, out, err = _run(p, capsys)
    assert code == 0, err
    assert json.loads(out)["gpu_activities"] == 0


def test_missing_essential_column_is_a_one_line_error(tmp_path, capsys):
    p = _variant(tmp_path, ["alter table CUPTI_ACTIVITY_KIND_KERNEL drop column start"])
    code, out, err = _run(p, capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "lacks columns start" in err and str(p) in err


def test_unterminated_ranges_and_domain_markers(tmp_path, capsys):
    p = _variant(tmp_path, ["update NVTX_EVENTS set end = NULL where rowid % 50 = 0",
                            "insert into NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
                            "values (1, NULL, 75, 'CCCL', 281483801526798, 1)"])
    code, out, err = _run(p, capsys)
    assert code == 0, err
    d = json.loads(out)
    assert d["gpu_activities"] == 308
    assert any(w["code"] == "unterminated_ranges" for w in d["warnings"])


def test_nsys_rep_without_nsys_binary(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    rep = tmp_path / "report.nsys-rep"
    rep.write_bytes(b"not really")
    code, out, err = _run(rep, capsys)
    assert code == 2 and "nsys export --type sqlite" in err and len(err.strip().splitlines()) == 1


def test_nsys_rep_name_reaches_nsys_after_double_dash(tmp_path, capsys, monkeypatch):
    """A report named like an option (``-o…``) is handed to ``nsys export`` after ``--``, as an
    absolute path: nsys never reads it as an option."""
    export = tmp_path / "export.sqlite"
    export.write_bytes(gzip.decompress(shared("h200_nsys", "bert_nvtx.sqlite.gz").read_bytes()))
    argv = tmp_path / "argv.txt"
    fake = tmp_path / "bin" / "nsys"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {argv}\n'
                    f'while [ "$1" != "--output" ]; do shift; done\ncp {export} "$2"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    rep = tmp_path / "-o.nsys-rep"
    rep.write_bytes(b"a report")
    code, out, err = _run("./-o.nsys-rep", capsys)
    assert code == 0, err
    args = argv.read_text().splitlines()
    assert args[-2:] == ["--", str(rep.resolve())]
    assert json.loads(out)["gpu_activities"] == 308


def test_a_query_past_its_time_budget_is_one_line(capsys, monkeypatch):
    """Every statement runs under a time budget (sqlite_safe.budget_seconds): one past it is
    interrupted and refused in one line naming the budget."""
    from nongemm_trace.load import sqlite_safe

    monkeypatch.setattr(sqlite_safe, "budget_seconds", lambda size: -1.0)
    code, out, err = _run(shared("h200_nsys", "bert_nvtx.sqlite.gz"), capsys)
    assert code == 2 and "took longer than" in err and len(err.strip().splitlines()) == 1


def test_convert_refuses_kineto_input(tmp_path, capsys):
    code = main(["convert", str(shared("h200", "bert_base_fp32_bs8_s128__eager.json.gz")), "-o", str(tmp_path / "x")])
    assert code == 2
    assert "not an Nsight Systems export" in capsys.readouterr().err


def test_both_collectors_agree_on_the_same_workload():
    """ResNet-50 captured on an H200 by collectors.torch_profiler and by collectors.nsys."""
    from conftest import SAMPLES
    a = nongemm_trace.analyze(SAMPLES / "collected" / "resnet50_bs8_torchprof.json.gz")
    b = nongemm_trace.analyze(SAMPLES / "collected" / "resnet50_bs8_nsys.sqlite.gz")
    assert a.gpu_activities == b.gpu_activities == 1160
    assert a.steps.height == b.steps.height == 5
    assert dict(a.categories.select("category", "activities").iter_rows()) == \
        dict(b.categories.select("category", "activities").iter_rows())
    for cat, share in a.categories.select("category", "share").iter_rows():
        assert abs(share - b.share(cat)) < 0.01, cat


def test_exports_load_without_deserialize(monkeypatch):
    """Python 3.10's sqlite3 has no Connection.deserialize: the export is restored from a temporary
    file instead, with the same tables."""
    import sqlite3

    from nongemm_trace.load import sqlite_safe

    path = shared("h200_nsys", "bert_nvtx.sqlite.gz")
    want = nongemm_trace.analyze(path)

    real_connect = sqlite3.connect

    class NoDeserialize:  # a 3.10 connection: everything but deserialize
        def __init__(self, *a, **k):
            self._con = real_connect(*a, **k)

        def __getattr__(self, name):
            if name == "deserialize":
                raise AttributeError(name)
            return getattr(self._con, name)

    made = []
    real_restore = sqlite_safe._restore
    monkeypatch.setattr(sqlite_safe.sqlite3, "connect", lambda *a, **k: made.append(1) or NoDeserialize(*a, **k))
    restored = []
    monkeypatch.setattr(sqlite_safe, "_restore", lambda con, data: restored.append(1) or real_restore(con._con, data))
    got = nongemm_trace.analyze(path)
    assert made and restored and got.to_dict()["categories"] == want.to_dict()["categories"]


def test_gzipped_nsys_rep(tmp_path, capsys, monkeypatch):
    """A .nsys-rep.gz is an Nsight Systems report, not 'not a JSON trace': without nsys, the line
    that says how to export it; with nsys, it is inflated and exported (a stand-in nsys here that
    checks it got the inflated report and writes the shared SQLite export)."""
    import gzip
    import stat
    import sys

    monkeypatch.setenv("PATH", str(tmp_path))
    rep = tmp_path / "report.nsys-rep.gz"
    rep.write_bytes(gzip.compress(b"NSYS-REPORT-BYTES"))
    code, out, err = _run(rep, capsys)
    assert code == 2 and "gzipped Nsight Systems report" in err and "nsys export --type sqlite" in err
    assert len(err.strip().splitlines()) == 1
    export = tmp_path / "export.sqlite"
    export.write_bytes(gzip.decompress(shared("h200_nsys", "bert_nvtx.sqlite.gz").read_bytes()))
    nsys = tmp_path / "nsys"
    nsys.write_text(f"#!{sys.executable}\n# nsys export --type sqlite --force-overwrite true --output OUT -- REPORT\n"
                    "import shutil, sys\n"
                    "if open(sys.argv[9], 'rb').read() != b'NSYS-REPORT-BYTES': sys.exit(3)\n"
                    f"shutil.copy({str(export)!r}, sys.argv[7])\n")
    nsys.chmod(nsys.stat().st_mode | stat.S_IXUSR)
    code, out, err = _run(rep, capsys)
    assert code == 0, err
    assert json.loads(out)["gpu_activities"] == 308
