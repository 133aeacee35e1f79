"""A newcomer's first run: the suite on a fresh clone without ../shared (issue #43 item 1).

The shared traces are optional: a test that names one of the five traces the repository also ships
runs on the bundled copy (conftest.BUNDLED), the others skip inside the test with the path as reason.
These tests hold that promise: the copies are the same bytes, and no test file reads the shared
folder at import time (a module-level skip is an error for the whole file)."""

from __future__ import annotations

import ast
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BUNDLED, REPO, SAMPLES, SHARED, shared

TESTS = Path(__file__).resolve().parent


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_bundled_copies_are_the_shared_traces(name):
    copy = SAMPLES / BUNDLED[name]
    assert copy.is_file(), f"{copy} is named in conftest.BUNDLED but not shipped"
    original = SHARED / name
    if not original.exists():
        pytest.skip(f"needs the shared traces: {original} not found")
    assert _digest(copy) == _digest(original)


def test_shared_falls_back_to_the_bundled_copy(monkeypatch, tmp_path):
    import conftest

    monkeypatch.setattr(conftest, "SHARED", tmp_path / "absent")
    assert shared("h200", "gpt2_fp32_bs8_s128__compiled.json.gz") == SAMPLES / "gpt2_fp32_bs8_s128__compiled.json.gz"
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="needs the shared traces"):
        shared("h200", "not_shipped.json.gz")


def _module_level_calls(tree: ast.Module) -> list[int]:
    """Lines of ``shared(...)``/``hostile(...)`` calls outside any function or class body."""
    lines = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in ("shared", "hostile"):
                args = [a.value for a in sub.args if isinstance(a, ast.Constant)]
                if "/".join(map(str, args)) not in BUNDLED:
                    lines.append(sub.lineno)
    return lines


def test_no_test_file_needs_the_shared_traces_at_import():
    offenders = {}
    for path in sorted(TESTS.glob("test_*.py")):
        lines = _module_level_calls(ast.parse(path.read_text()))
        if lines:
            offenders[path.name] = lines
    assert offenders == {}, "call shared()/hostile() inside the test, or name a bundled trace"


def test_a_test_file_collects_without_the_shared_traces(tmp_path):
    """test_outputs.py read two shared traces at import: on a fresh clone the whole file errored."""
    env = {**os.environ, "NONGEMM_SHARED_TRACES": str(tmp_path / "absent"), "CI": "false"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                           "-n", "0", "--collect-only", "tests/test_outputs.py"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "error" not in done.stdout.splitlines()[-1]


def test_every_model_has_a_short_repr():
    """A Report's generated repr printed its tables in full (16,753 characters on the bundled BERT)."""
    import nongemm_trace
    from nongemm_trace.analyses.changes import WhatIfParams
    from nongemm_trace.analyses.latency import latency_analysis, whatif_analysis

    path = str(SAMPLES / "bert_base_fp32_bs8_s128__eager.json.gz")
    a = nongemm_trace.Analysis(path)
    models = [a.report(), nongemm_trace.launch_analysis(a), nongemm_trace.flops_analysis(path),
              latency_analysis(path), whatif_analysis(path, WhatIfParams(scale={"GEMM": 0.5})),
              nongemm_trace.compare([path, path]), a, a.taxonomy, nongemm_trace.load_taxonomy("ispass25"),
              nongemm_trace.check(a, max_share={"non-GEMM": 0.01}), nongemm_trace.weak_kernels(a),
              nongemm_trace.explain(a, "aten::add"), nongemm_trace.run("shapes", a), nongemm_trace.run("phases", a)]
    for m in models:
        text = repr(m)
        assert text.startswith(type(m).__name__ + "(") and "\n" not in text and len(text) < 700, text[:200]
        assert ", )" not in text and "<1 items>" not in text, text
    assert "kernel_rows=<308x" in repr(models[0])
    # the Taxonomy's generated repr was 57,150 characters; the Analysis's said nothing but an address
    assert repr(a.taxonomy).startswith("Taxonomy(name='default', version=") and "classified" in repr(a)
    # a gate's result says its verdict (it said only the trace's path)
    assert "ok=False" in repr(models[9]) and "broken=['max-share non-GEMM']" in repr(models[9])


def test_dir_lists_the_public_names_only():
    import nongemm_trace

    names = set(dir(nongemm_trace))
    assert set(nongemm_trace.__all__) <= names
    assert not names & {"Any", "sys", "importlib", "types", "TYPE_CHECKING"}


def test_old_module_paths_warn_with_the_new_path_and_removal_version():
    """``from nongemm_trace.check import check`` (the last release's path) works, with a warning; the
    package's ``check`` stays the function (fresh interpreters: the import happens once a process)."""
    code = ("import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
            "try:\n    from nongemm_trace.check import check\nexcept DeprecationWarning as w:\n    print(w)\n"
            "warnings.simplefilter('ignore')\n"
            "from nongemm_trace.check import check; import nongemm_trace\n"
            "assert nongemm_trace.check is check and callable(check)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "nongemm_trace.check (module) is deprecated: use nongemm_trace.analyses.check" in done.stdout
    assert "goes away in nongemm-trace 0.3" in done.stdout


def test_a_newcomers_ci_job_skips_where_there_is_no_shared_folder(monkeypatch, tmp_path):
    """GitHub Actions and most CI services set CI=true: a newcomer's CI job running the README's test
    command on a fresh clone failed every test that names a shared trace ("shared traces not found
    (CI=true)"). Only a machine that has the shared folder (``../shared``) must not pass by skipping."""
    import conftest

    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(conftest, "SHARED", tmp_path / "shared" / "traces")  # no ../shared: the newcomer
    with pytest.raises(pytest.skip.Exception, match="needs the shared traces"):
        shared("h200", "not_shipped.json.gz")
    with pytest.raises(pytest.skip.Exception, match="hostile reproducers not found"):
        conftest.hostile("x.json", tmp_path / "shared" / "fuzz" / "hostile")
    (tmp_path / "shared").mkdir()  # the project's CI machine, a trace missing from its ../shared: a failure
    with pytest.raises(pytest.fail.Exception, match=r"not_shipped.json.gz not found .*\(CI=true\)"):
        shared("h200", "not_shipped.json.gz")
