"""The format registry: each file is told by its first bytes; ONNX Runtime and TensorRT profiles
go to their readers, and a recognised document that is not read (a TensorRT layer-information
file on its own, a rocprofiler-sdk trace) is one exit-2 line naming it, never an empty report."""

from __future__ import annotations

import gzip

import mutants
import pytest
from conftest import shared

from nongemm_trace.errors import TraceError
from nongemm_trace.load import formats, load_trace

NOT_READ = [
    ("tensorrt", "trex__notebooks__layer_info.json", "TensorRT layer-information"),
    ("tensorrt", "trex__tests__inputs__mobilenet.qat.onnx.engine.graph.json", "TensorRT layer-information"),
]
READ = [
    ("onnxruntime", "ort__vscode-onnxvalidate__onnxruntime_profile__2019-06-28_04-56-43.json", "onnxruntime"),
    ("tensorrt", "trex__notebooks__profile.json", "tensorrt"),
    ("tensorrt", "trex__examples__pytorch__resnet__A100__fp16__resnet.onnx.engine.profile.json", "tensorrt"),
]


@pytest.mark.parametrize("folder,name,fmt", READ)
def test_profiles_of_other_stacks_go_to_their_readers(folder, name, fmt, tmp_path):
    path = shared("external2", folder, name)
    assert formats.sniff(path.read_bytes()[: formats.SNIFF_BYTES], str(path)) == fmt
    assert load_trace(path).source_format == fmt  # one name per format: the entry's and the trace's
    packed = tmp_path / (name + ".gz")  # compressed: told after inflating, and read
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert load_trace(packed).activities.height == load_trace(path).activities.height


def test_a_rocprofiler_trace_is_named():
    head = b'{"rocprofiler-sdk-tool": [{"metadata": {"pid": 1}}]}'
    with pytest.raises(TraceError, match="rocprofiler-sdk JSON trace"):
        formats.sniff(head, "run.json")


@pytest.mark.parametrize("folder,name,what", NOT_READ)
def test_profiles_of_other_stacks_are_named_not_half_read(folder, name, what, tmp_path):
    path = shared("external2", folder, name)
    with pytest.raises(TraceError, match=what):
        load_trace(path)
    packed = tmp_path / (name + ".gz")  # the same, compressed: told after inflating
    packed.write_bytes(gzip.compress(path.read_bytes()))
    code, out, err = mutants.run_cli(packed)
    assert code == 2 and out == "" and what in err and len(err.strip().splitlines()) == 1


def test_every_shared_kineto_and_nsys_trace_sniffs_as_its_format():
    import glob

    root = shared()
    found = 0
    for path in sorted(glob.glob(str(root / "**" / "*.*"), recursive=True)):
        if not path.endswith((".json", ".json.gz", ".sqlite", ".sqlite.gz")) or "/onnxruntime/" in path \
                or "/tensorrt/" in path or path.endswith((".meta.json", "README.md")) or "_perf_report_csvs" in path:
            continue
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as fh:
            head = fh.read(formats.SNIFF_BYTES)
        want = "nsys" if ".sqlite" in path else "kineto"
        assert formats.sniff(head, path) == want, path
        found += 1
    assert found >= 40


def test_a_kineto_array_of_events_is_still_kineto():
    head = b'[{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]'
    assert formats.sniff(head, "t.json") == "kineto"


# -- what a format is: every command asks its entry -------------------------------------------

ORT = ("external2", "onnxruntime", "ort__vscode-onnxvalidate__onnxruntime_profile__2019-06-28_04-56-43.json")
TRT = ("external2", "tensorrt", "trex__notebooks__profile.json")
NSYS = ("h200_nsys", "bert_nvtx.sqlite.gz")


@pytest.mark.parametrize("parts", [ORT, TRT, NSYS, ("h200", "bert_base_fp32_bs8_s128__eager.json.gz")])
def test_a_loaded_trace_has_its_entry_s_name_and_extra_columns(parts):
    trace = load_trace(shared(*parts))
    fmt = formats.format_of(trace)
    assert fmt.name == trace.source_format and str(shared(*parts)).endswith(fmt.suffixes)
    for table, columns in fmt.extra_columns.items():
        got = getattr(trace, table).schema
        assert {c: got[c] for c in columns} == columns, table


def test_batch_finds_every_format_s_files():
    from nongemm_trace.runs.batch import TRACE_SUFFIXES

    assert set(TRACE_SUFFIXES) == {s for f in formats.FORMATS for s in (*f.suffixes, *f.exported_from)}


def _refusal(capsys, *argv):
    from nongemm_trace.cli import main

    code = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    return err


def test_annotate_tells_an_onnx_runtime_user_what_to_do_not_to_convert_an_nsight_export(capsys, tmp_path):
    err = _refusal(capsys, "annotate", shared(*ORT), "-o", tmp_path / "out.json")
    assert str(shared(*ORT)) in err and "ONNX Runtime profile cannot be annotated" in err
    assert "Nsight" not in err and "convert" not in err


def test_annotate_tells_an_nsight_user_to_convert_first(capsys, tmp_path):
    err = _refusal(capsys, "annotate", shared(*NSYS), "-o", tmp_path / "out.json")
    assert "convert this Nsight Systems export first" in err


def test_a_format_without_a_host_timeline_is_refused_by_latency_in_its_own_words(capsys):
    err = _refusal(capsys, "latency", shared(*TRT))
    assert "this TensorRT profile holds times per layer and no host timeline" in err


def test_convert_names_what_it_reads(capsys, tmp_path):
    err = _refusal(capsys, "convert", shared(*ORT), "-o", tmp_path / "out.json")
    assert "is not an Nsight Systems export (convert reads .sqlite[.gz] / .nsys-rep[.gz])" in err
