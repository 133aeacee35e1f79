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

from nongemm_trace.analyses import specs
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
#: every registered analysis not named above, as its spec runs it (a new one is covered with no edit here)
WRITERS += [([s.name], "-o", [*s.example, "--format", "json"]) for s in specs()
            if s.name not in {words[0] for words, _, _ in WRITERS}]


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
    from nongemm_trace.report_page import write_page
    from nongemm_trace.writers.annotate import annotate

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


# --- only a regular file is ever replaced (issue #42: devices, FIFOs, links planted by others) ----

import json  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402

from nongemm_trace.core import safe_write  # noqa: E402

ROOT = os.geteuid() == 0
NOBODY = 65534


def _namespaces_available() -> str | None:
    """Why the private-mount-namespace tests cannot run here, or None when they can."""
    if not ROOT:
        return "needs root (mknod and mount in a private mount namespace)"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True)
    return None if probe.returncode == 0 else f"no private mount namespace here: {probe.stderr.decode().strip()}"


NO_NAMESPACE = _namespaces_available()


@pytest.mark.skipif(NO_NAMESPACE is not None, reason=str(NO_NAMESPACE))
def test_device_nodes_are_written_in_place_never_replaced():
    """``-o /dev/null`` and ``-o /dev/full`` as root, in a private mount namespace whose /dev is a tmpfs
    of its own (the system's /dev is never touched): the nodes stay character devices, /dev/null takes
    the report, /dev/full ends in one line; a block device is refused and stays a block device."""
    script = f"""
set -u
mount -t tmpfs none /dev
mknod -m 666 /dev/null c 1 3; mknod -m 666 /dev/full c 1 7; mknod -m 600 /dev/blk b 7 250
E=$(mktemp)
run() {{ "{sys.executable}" -m nongemm_trace analyze "{BERT}" --format json -o "$1" 2>"$E"
        echo "rc=$? $(wc -l < "$E") $(head -c 300 "$E")"; }}
run /dev/null; run /dev/full; run /dev/blk
for n in null full blk; do echo "$n $(stat -c '%F %t:%T' /dev/$n)"; done
"""
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "bash", "-c", script],
                       capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[1])
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 6, (p.stdout, p.stderr)
    assert lines[0] == "rc=0 0 ", lines[0]
    assert lines[1].startswith("rc=2 1 ") and "/dev/full" in lines[1] and "No space left" in lines[1], lines[1]
    assert lines[2].startswith("rc=2 1 ") and "a block device" in lines[2], lines[2]
    assert lines[3:] == ["null character special file 1:3", "full character special file 1:7",
                         "blk block special file 7:fa"], lines[3:]


def test_a_fifo_is_written_to_its_reader_and_stays_a_fifo(capsys, tmp_path):
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    code = main(["analyze", str(BERT), "--format", "json", "-o", str(fifo)])
    reader.join(timeout=60)
    capsys.readouterr()
    assert code == 0 and stat.S_ISFIFO(fifo.lstat().st_mode)
    assert json.loads(got[0])["gpu_time_us"] > 0


def test_a_fifo_nobody_reads_ends_in_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(safe_write, "FIFO_READER_WAIT_S", 0.2)
    fifo = tmp_path / "nobody-reads"
    os.mkfifo(fifo)
    code = main(["analyze", str(BERT), "--format", "json", "-o", str(fifo)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "no reader" in err[0] and str(fifo) in err[0]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_dash_is_standard_output_and_no_file_named_dash(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["analyze", str(BERT), "--format", "json", "-o", "-"])
    out = capsys.readouterr().out
    assert code == 0 and json.loads(out)["gpu_time_us"] > 0
    assert list(tmp_path.iterdir()) == []


def _cli(*args: str, **kw):
    return subprocess.run([sys.executable, "-m", "nongemm_trace", *args], capture_output=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[1], **kw)


def test_dev_stdout_into_a_pipe_and_a_process_substitution(tmp_path):
    p = _cli("analyze", str(BERT), "--format", "csv", "-o", "/dev/stdout")
    assert p.returncode == 0 and p.stdout.decode().startswith("category") or b"," in p.stdout.splitlines()[0], p.stderr
    sink = tmp_path / "sink.csv"
    q = subprocess.run(["bash", "-c", f'"{sys.executable}" -m nongemm_trace analyze "{BERT}" --format parquet '
                                      f'-o >(cat > "{sink}"); wait'], capture_output=True, timeout=300,
                       cwd=Path(__file__).resolve().parents[1])
    assert q.returncode == 0, q.stderr
    for _ in range(100):  # the substitution's cat may finish just after bash returns
        if sink.exists() and sink.stat().st_size > 0:
            break
        threading.Event().wait(0.05)
    assert sink.read_bytes()[:4] == b"PAR1"


def test_binary_output_to_a_terminal_is_refused_in_one_line():
    import pty

    main_fd, sub_fd = pty.openpty()
    try:
        p = subprocess.run([sys.executable, "-m", "nongemm_trace", "analyze", str(BERT), "--format", "parquet",
                            "-o", "-"], stdout=sub_fd, stderr=subprocess.PIPE, timeout=300,
                           cwd=Path(__file__).resolve().parents[1])
    finally:
        os.close(sub_fd)
        os.close(main_fd)
    err = p.stderr.decode().strip().splitlines()
    assert p.returncode == 2 and len(err) == 1 and "terminal" in err[0] and "binary" in err[0]


def test_directories_and_sockets_are_refused(capsys, tmp_path):
    sock_path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    try:
        for target, what in ((tmp_path, "a directory"), (sock_path, "a socket")):
            code = main(["analyze", str(BERT), "--format", "json", "-o", str(target)])
            err = capsys.readouterr().err.strip().splitlines()
            assert code == 2 and len(err) == 1 and what in err[0], err
        assert stat.S_ISSOCK(sock_path.lstat().st_mode)
    finally:
        server.close()


def _sticky_folder(tmp_path):
    """A world-writable sticky folder (``/tmp``'s kind) and a victim's file in a private folder."""
    shared_dir = tmp_path / "sticky"
    shared_dir.mkdir()
    shared_dir.chmod(0o1777)
    victim = tmp_path / "victim"
    victim.mkdir()
    precious = victim / "precious.txt"
    precious.write_text("precious data")
    precious.chmod(0o640)
    return shared_dir, precious


@pytest.mark.skipif(not ROOT, reason="needs root to give a link to another user (lchown)")
def test_a_link_planted_by_another_user_in_a_sticky_folder_is_not_followed(capsys, tmp_path):
    shared_dir, precious = _sticky_folder(tmp_path)
    planted = shared_dir / "report.json"
    planted.symlink_to(precious)
    os.lchown(planted, NOBODY, NOBODY)
    code = main(["analyze", str(BERT), "--format", "json", "-o", str(planted)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "owned by another user" in err[0] and "protected_symlinks" in err[0]
    assert precious.read_text() == "precious data" and stat.S_IMODE(precious.stat().st_mode) == 0o640
    assert planted.is_symlink()
    # a folder on the way counts too: a planted link to a folder
    (shared_dir / "dir").symlink_to(precious.parent)
    os.lchown(shared_dir / "dir", NOBODY, NOBODY)
    assert main(["analyze", str(BERT), "--format", "json", "-o", str(shared_dir / "dir" / "precious.txt")]) == 2
    assert precious.read_text() == "precious data"
    capsys.readouterr()


@pytest.mark.skipif(not ROOT, reason="needs root to give a file to another user (chown)")
def test_own_links_are_followed_and_others_files_in_sticky_folders_kept(capsys, tmp_path):
    shared_dir, precious = _sticky_folder(tmp_path)
    mine = shared_dir / "mine.json"
    mine.symlink_to(precious)  # the writer's own link: followed, as the kernel would
    write_file(mine, "new")
    assert mine.is_symlink() and precious.read_text() == "new"
    theirs = shared_dir / "theirs.json"
    theirs.write_text("theirs")
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(TraceError, match="protected_regular"):
        write_file(theirs, "x")
    assert theirs.read_text() == "theirs"
    outside = tmp_path / "elsewhere.txt"  # a link owned by another user outside a sticky folder is followed
    outside.write_text("old")
    other_link = tmp_path / "their-link.txt"
    other_link.symlink_to(outside)
    os.lchown(other_link, NOBODY, NOBODY)
    write_file(other_link, "new")
    assert outside.read_text() == "new"


def test_a_link_that_appears_after_the_check_is_not_followed(tmp_path, monkeypatch):
    """The stream's final open refuses a link (O_NOFOLLOW): a FIFO swapped for a link between the
    check and the open writes nothing through it."""
    precious = tmp_path / "precious.txt"
    precious.write_text("precious")
    swapped = tmp_path / "was-a-fifo"
    swapped.symlink_to(precious)
    monkeypatch.setattr(safe_write, "_resolve", lambda out: ("stream", str(swapped)))
    with pytest.raises(TraceError, match="cannot write"):
        write_file(swapped, "x")
    assert precious.read_text() == "precious"


def test_link_loops_end_in_one_line(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to(b)
    b.symlink_to(a)
    with pytest.raises(TraceError, match="cannot write: Too many levels"):
        write_file(a, "x")
