"""``nongemm-trace analyze --example``: a real trace ships inside the package (package data), so the
first command works from a plain ``pip install``."""

from __future__ import annotations

import json
from pathlib import Path

from nongemm_trace import cli
from nongemm_trace.examples import EXAMPLE, example_trace

ROOT = Path(__file__).resolve().parent.parent


def test_example_is_package_data_and_analyzes(capsys):
    path = example_trace()
    assert path.is_file() and path.name == EXAMPLE
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"examples/*.json.gz"' in pyproject  # shipped in the wheel
    assert cli.main(["analyze", "--example", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["gpu_activities"] == 308 and len(d["steps"]) == 2


def test_analyze_without_a_trace_says_so(capsys):
    assert cli.main(["analyze"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--example" in err[0]


def test_sdist_carries_what_its_tests_need(tmp_path):
    """The source distribution holds the test helpers and data, the sample traces and the package
    data, so ``python3 -m pytest`` collects and runs from the unpacked sdist."""
    import subprocess
    import sys
    import tarfile

    if not (ROOT / "setup.py").is_file():  # an installed package, not a checkout or sdist
        import pytest
        pytest.skip("no setup.py here")
    r = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (archive,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(archive) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    need = {"tests/conftest.py", "tests/golden.py", "tests/data/golden.json", "sample_traces/README.md",
            "sample_traces/bert_base_fp32_bs8_s128__eager.json.gz", "nongemm_trace/facts/inductor.toml",
            "nongemm_trace/examples/" + EXAMPLE, "csrc/nongemm_scan.c", "collectors/torch_profiler.py",
            "README.md", "docs/architecture.md", "examples/first_analysis.ipynb",
            "sample_traces/tensorrt/resnet50_fp16.profile.json"}
    assert need <= names, sorted(need - names)
    assert not any(n.endswith((".so", ".pyc")) for n in names)
