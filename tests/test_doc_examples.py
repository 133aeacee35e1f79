"""Examples that run (issue #43 item 6): every ``bash`` and ``python`` block of README.md and docs/*.md is
executed against the files the repository ships, and every shown session (a block that starts with
``$ nongemm-trace …``) is run and its lines must appear in the real output, in order (a shown
output may leave lines out, never change one).

A block that cannot run here says why, in a comment right above it:
``<!-- not run: needs a CUDA GPU -->``. The reason is required, so a skipped example is a decision
someone wrote down. The examples run in a scratch folder that holds what their text names:
``trace.json.gz`` (the bundled BERT trace), ``base_report.json`` (its stored report), ``traces/…``
copies, and ``sample_traces/`` (the shipped samples)."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(?:^<!-- not run: (?P<reason>[^>]*?) -->\n)?^```(?P<lang>\w*)\n(?P<body>.*?)^```", re.S | re.M)
BERT = ROOT / "sample_traces" / "bert_base_fp32_bs8_s128__eager.json.gz"


def _blocks() -> list:
    out = []
    for doc in DOCS:
        text = doc.read_text()
        for m in BLOCK.finditer(text):
            lang, body = m.group("lang"), m.group("body")
            session = lang in ("", "text") and body.startswith("$ nongemm-trace ")
            if lang not in ("bash", "python") and not session:
                continue
            where = f"{doc.relative_to(ROOT)}:{text[:m.start('lang')].count(chr(10)) + 1}"
            out.append(pytest.param("session" if session else lang, body, m.group("reason"), id=where))
    return out


BLOCKS = _blocks()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The folder the examples run in, and their environment: ``nongemm-trace``, ``python3`` and
    ``python`` on PATH run this checkout's code with this interpreter."""
    work = tmp_path_factory.mktemp("examples")
    bin_dir = work / ".bin"
    bin_dir.mkdir()
    tool = bin_dir / "nongemm-trace"
    tool.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m nongemm_trace "$@"\n')
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    for name in ("python3", "python"):
        (bin_dir / name).symlink_to(sys.executable)
    (work / "sample_traces").symlink_to(ROOT / "sample_traces")
    shutil.copy(BERT, work / "trace.json.gz")
    (work / "traces").mkdir()
    for name in ("model", "new", "base", "bert"):
        shutil.copy(BERT, work / "traces" / f"{name}.json.gz")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(ROOT), "COLUMNS": "200", "NONGEMM_PROGRESS_S": "inf"}
    subprocess.run([sys.executable, "-m", "nongemm_trace", "analyze", "trace.json.gz", "--format", "json",
                    "-o", "base_report.json"], cwd=work, env=env, check=True, capture_output=True)
    return work, env


#: runs a Python block, then the test functions it defines (a block that shows a test module); a deprecated
#: name the block itself uses is an error
PYTHON_RUNNER = """
import inspect, sys, warnings
warnings.filterwarnings("error", category=DeprecationWarning, module="__main__")  # no example teaches an old name
source = open(sys.argv[1]).read()
names = {"__name__": "__main__"}
exec(compile(source, sys.argv[1], "exec"), names)
for name, f in list(names.items()):
    if name.startswith("test_") and callable(f) and not inspect.signature(f).parameters:
        f()
"""


def _normal(line: str) -> str:
    return " ".join(line.split())


def _check_session(session: str, env: dict[str, str]) -> None:
    """``$ COMMAND`` and the lines shown after it: run from the repository root, each shown line must
    be a line of the output, in the order shown."""
    command, *shown = session.split("\n")
    command = command[2:].split("  #")[0]
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    real = [_normal(x) for x in done.stdout.splitlines()]
    at = 0
    for line in shown:
        want = _normal(line)
        if not want or want.startswith("(…"):
            continue
        found = next((i for i in range(at, len(real)) if real[i] == want), None)
        assert found is not None, f"{command}: the documented line is not in the output (after line {at}):\n" \
                                  f"{line}\n--- output:\n{done.stdout[-4000:]}"
        at = found + 1


@pytest.mark.parametrize("kind, body, reason", BLOCKS)
def test_documented_example_runs(kind, body, reason, scratch):
    if reason is not None:
        assert reason.strip(), "a block that is not run must say why"
        pytest.skip(f"not run: {reason}")
    work, env = scratch
    if kind == "python" and re.search(r"^\s*import torch|^from nongemm_trace\.collectors\.torch", body, re.M):
        pytest.importorskip("torch", reason="the example captures with torch (the [torch] extra)")
    if kind == "python":
        (work / "block.py").write_text(body)
        (work / "runner.py").write_text(PYTHON_RUNNER)
        # a documented example shows the current form: one that warns of a deprecated one fails
        done = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "runner.py", "block.py"], cwd=work,
                              env=env, capture_output=True, text=True, timeout=300)
    elif kind == "bash":
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=work, env=env,
                              capture_output=True, text=True, timeout=300)
    else:
        for session in re.split(r"\n(?=\$ )", body.rstrip("\n")):
            _check_session(session, env)
        return
    assert done.returncode == 0, (done.stdout[-2000:] + done.stderr[-3000:])


def test_every_documented_block_is_found():
    """The parser sees the blocks (a change of fence style must not silence this test)."""
    assert len(BLOCKS) >= 30
    assert sum(1 for b in BLOCKS if b.values[2] is None) >= 10  # most examples that can run, do


#: the first line of a block that is a command (a block without a language is neither run nor skipped)
COMMAND = re.compile(r"^(?:\$ )?(?:nongemm-trace|python3?|pip|torchrun|nsys|bash|[A-Z_]+=\S*)\s")


def test_every_command_block_says_its_language():
    """Commands in a block with no language escaped the examples' run: docs/multigpu.md's eight-GPU run
    and its analysis, docs/benchmarks.md's Ray cluster run. A command block is ``bash`` (run, or marked
    ``not run`` with its reason); a usage synopsis is ``text``."""
    untagged = []
    for doc in DOCS:
        text = doc.read_text()
        for m in BLOCK.finditer(text):
            body = m.group("body")  # a shown session (``$ nongemm-trace …`` and its output) runs as it is
            if m.group("lang") == "" and COMMAND.match(body) and not body.startswith("$ nongemm-trace "):
                untagged.append(f"{doc.relative_to(ROOT)}:{text[:m.start('lang')].count(chr(10)) + 1}")
    assert untagged == []
