"""No output destroys an input, and no write leaves a partial file (nongemm_trace.core.safe_write).

Every command that writes a file is run with its output equal to its input, spelled the same, through
a symbolic link, through a hard link and through another spelling of the path: each refuses with one
line and exit 2, and the input keeps every byte. Then the writes themselves: a write that fails midway
keeps the old file and leaves no temporary one; permission bits are kept."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat

import pytest
from conftest import SAMPLES, shared

from nongemm_trace.cli import main
from nongemm_trace.core.safe_write import reading, write_file
from nongemm_trace.errors import TraceError

BERT = SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz"

#: (command words before the trace, the option that names the output, words after)
WRITERS = [
    (["analyze"], "-o", []),
    (["analyze"], "-o", ["--format", "json"]),
    (["analyze"], "-o", ["--format", "csv"]),
    (["analyze"], "-o", ["--format", "parquet"]),
    (["report"], "-o", []),
    (["annotate"], "-o", []),
    (["launch"], "--plot", []),
    (["launch"], "-o", ["--format", "json"]),
    (["flops"], "--roofline", []),
    (["flops"], "--shares-plot", []),
    (["latency"], "-o", ["--format", "json"]),
    (["whatif"], "-o", ["--scale", "GEMM=0.5"]),
    (["plot"], "-o", []),
]


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _aliases(trace, tmp_path):
    """The trace's own path and three other paths to the same file."""
    link = tmp_path / "link.json.gz"
    link.symlink_to(trace)
    hard = tmp_path / "hard.json.gz"
    os.link(trace, hard)
    respelled = tmp_path / "sub" / ".." / trace.name
    (tmp_path / "sub").mkdir()
    return {"same": trace, "symlink": link, "hardlink": hard, "respelled": respelled}


@pytest.mark.parametrize("words,flag,extra", WRITERS, ids=[" ".join(w + [f] + e) for w, f, e in WRITERS])
def test_every_writer_refuses_an_output_that_is_its_input(capsys, tmp_path, words, flag, extra):
    trace = tmp_path / BERT.name
    shutil.copy(BERT, trace)
    before = _digest(trace)
    for how, out in _aliases(trace, tmp_path).items():
        code = main(words + [str(trace), flag, str(out)] + extra)
        _, err = capsys.readouterr()
        assert code == 2, how
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "refusing to overwrite an input" in lines[0], (how, err)
        assert _digest(trace) == before, how
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["hard.json.gz", "link.json.gz", trace.name, "sub"])


@pytest.mark.parametrize("words,flag,extra", WRITERS, ids=[" ".join(w + [f] + e) for w, f, e in WRITERS])
def test_every_writer_writes_whole_files_and_no_partial_one(capsys, tmp_path, words, flag, extra):
    suffix = {"--plot": ".png", "--roofline": ".png", "--shares-plot": ".svg", "report": ".html"}.get(
        flag if flag != "-o" else words[0], ".out")
    if words == ["plot"]:
        suffix = ".png"
    out = tmp_path / "out" / f"result{suffix}"
    code = main(words + [str(BERT), flag, str(out)] + extra)
    capsys.readouterr()
    assert code == 0 and out.stat().st_size > 0
    assert [p.name for p in out.parent.iterdir()] == [out.name]


def test_compare_refuses_to_overwrite_either_trace(capsys, tmp_path):
    base, new = tmp_path / "base.json.gz", tmp_path / "new.json.gz"
    shutil.copy(BERT, base)
    shutil.copy(SAMPLES / "gpt2_fp32_bs8_s128__compiled.json.gz", new)
    digests = (_digest(base), _digest(new))
    for argv in (["compare", base, new, "-o", new], ["compare", base, new, "--format", "json", "-o", base]):
        code = main([str(a) for a in argv])
        assert code == 2 and "refusing to overwrite an input" in capsys.readouterr().err
    assert (_digest(base), _digest(new)) == digests


def test_convert_refuses_to_overwrite_its_nsight_export(capsys, tmp_path):
    export = tmp_path / "bert_nvtx.sqlite.gz"
    shutil.copy(shared("h200_nsys", "bert_nvtx.sqlite.gz"), export)
    before = _digest(export)
    assert main(["convert", str(export), "-o", str(export)]) == 2
    assert "refusing to overwrite an input" in capsys.readouterr().err
    assert _digest(export) == before


def test_a_batch_output_in_a_folder_of_inputs_still_writes(capsys, tmp_path):
    """The refusal is for the inputs themselves, not for their folder: a batch written beside its traces."""
    trace = tmp_path / BERT.name
    shutil.copy(BERT, trace)
    out = tmp_path / "report.json"
    assert main(["analyze", str(trace), "--format", "json", "-o", str(out)]) == 0
    assert out.stat().st_size > 0 and not [p for p in tmp_path.iterdir() if ".partial" in p.name]


def test_the_library_refuses_too(tmp_path):
    from nongemm_trace.analyses.annotate import annotate
    from nongemm_trace.report_page import write_page

    trace = tmp_path / BERT.name
    shutil.copy(BERT, trace)
    before = _digest(trace)
    with pytest.raises(TraceError, match="refusing to overwrite an input"):
        annotate(trace, trace)
    link = tmp_path / "link.json.gz"
    link.symlink_to(trace)
    with pytest.raises(TraceError, match="refusing to overwrite an input"):
        write_page([trace], link)
    with reading([trace]), pytest.raises(TraceError, match="refusing to overwrite an input"):
        write_file(trace, "x")
    assert _digest(trace) == before


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing_behind(tmp_path):
    out = tmp_path / "report.csv"
    out.write_text("old")

    def half_then_fail(path):
        with open(path, "w") as fh:
            fh.write("half")
        raise KeyboardInterrupt  # an interrupted run, not only an OSError

    with pytest.raises(KeyboardInterrupt):
        write_file(out, half_then_fail)
    assert out.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.csv"]


def test_an_unwritable_output_is_one_line_naming_it(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = main(["analyze", str(BERT), "--format", "json", "-o", str(blocker / "out.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and str(blocker / "out.json") in err[0] and "cannot write" in err[0]


def test_permissions_are_kept_and_new_files_get_the_usual_ones(tmp_path):
    old = tmp_path / "kept.txt"
    old.write_text("old")
    old.chmod(0o640)
    write_file(old, "new")
    assert old.read_text() == "new" and stat.S_IMODE(old.stat().st_mode) == 0o640
    umask = os.umask(0o022)
    try:
        fresh = write_file(tmp_path / "fresh.txt", b"x")
    finally:
        os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644


def test_a_symlinked_output_writes_the_file_it_names(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    write_file(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
