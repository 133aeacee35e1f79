"""Collectors: torch.profiler capture on the CPU; the nsys collector with a stand-in nsys binary."""

from __future__ import annotations

import gzip
import json
import stat
import subprocess
import sys

import pytest
from conftest import REPO, shared

torch = pytest.importorskip("torch", reason="torch not installed (pip install torch==2.13.0)")


def test_capture_writes_trace_metadata_and_summary(tmp_path):
    from nongemm_trace.collectors.examples import tiny_mlp
    from nongemm_trace.collectors.torch_profiler import capture

    step, meta = tiny_mlp()
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        path = capture(step, tmp_path, "mlp", steps=3, wait=1, warmup=1, metadata=meta)
    assert not [w for w in seen if "metadata" in str(w.message).lower()]
    doc = json.loads(gzip.decompress(path.read_bytes()))
    assert doc.get("nongemm_model") == "tiny_mlp" and doc.get("nongemm_torch") == torch.__version__
    steps = sorted(e["name"] for e in doc["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))
    assert len(steps) == 3
    assert doc["nongemm_run"]["model"] == "tiny_mlp" and doc["nongemm_run"]["torch"] == torch.__version__
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    assert any("Input Dims" in e.get("args", {}) for e in ops)  # record_shapes
    summary = json.loads((tmp_path / "mlp.nongemm.json").read_text())
    assert summary["metric"] == "cpu"  # a CPU run has no GPU activity
    assert summary["step_marker"] == "ProfilerStep" and len(summary["steps"]) == 3
    cats = {c["category"] for c in summary["categories"] if c["cpu_time_us"] > 0}
    assert {"gemm", "normalization", "activation"} <= cats


def test_profile_steps_in_an_existing_loop(tmp_path):
    from nongemm_trace.collectors.torch_profiler import profile_steps

    model = torch.nn.Linear(8, 8)
    x = torch.randn(4, 8)
    with profile_steps(tmp_path, "loop", steps=2, wait=0, warmup=1, summary=False) as step:
        for _ in range(3):
            model(x)
            step()
    doc = json.loads(gzip.decompress((tmp_path / "loop.json.gz").read_bytes()))
    assert sum(1 for e in doc["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")) == 2
    assert not (tmp_path / "loop.nongemm.json").exists()
    assert step.profiler.key_averages()  # torch's own table of the same steps, for cross-checks


def test_metadata_with_double_quotes_keeps_the_trace_valid_json(tmp_path):
    """Kineto turns torch's escaped quote into '/"', which ends the string: the collector must not pass quotes."""
    from nongemm_trace.collectors.torch_profiler import profile_steps

    settings = json.dumps({"mode": "tp-infer", "slow_rank": None})
    with profile_steps(tmp_path, "quoted", steps=1, wait=0, warmup=0, summary=False,
                       metadata={"settings": settings}) as step:
        torch.ones(4).add_(1)
        step()
    doc = json.loads(gzip.decompress((tmp_path / "quoted.json.gz").read_bytes()))
    assert doc["nongemm_run"]["settings"] == settings
    assert doc["nongemm_settings"] == settings.replace('"', "'")


def test_command_line_entry_point(tmp_path):
    r = subprocess.run([sys.executable, "-m", "nongemm_trace.collectors.torch_profiler",
                        "nongemm_trace.collectors.examples:tiny_mlp",
                        "--steps", "2", "-o", str(tmp_path), "--name", "cli", "--meta", "batch=16"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "cli.json.gz").exists() and (tmp_path / "cli.nongemm.json").exists()
    doc = json.loads(gzip.decompress((tmp_path / "cli.json.gz").read_bytes()))
    assert doc["nongemm_run"]["batch"] == "16"


def test_nsys_collector_with_a_stand_in_binary(tmp_path):
    """The flow around nsys: profile args, export to SQLite, conversion to Kineto JSON."""
    from nongemm_trace.collectors import nsys as col

    sqlite = gzip.decompress(shared("h200_nsys", "bert_nvtx.sqlite.gz").read_bytes())
    real = tmp_path / "real.sqlite"
    real.write_bytes(sqlite)
    log = tmp_path / "calls.log"
    fake = tmp_path / "nsys"
    fake.write_text(f"""#!/bin/sh
echo "$@" >> {log}
if [ "$1" = profile ]; then
  out=""; prev=""
  for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
  echo rep > "$out.nsys-rep"
elif [ "$1" = export ]; then
  out=""; prev=""
  for a in "$@"; do [ "$prev" = "--output" ] && out="$a"; prev="$a"; done
  cp {real} "$out"
fi
""")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    paths = col.profile([sys.executable, "-c", "pass"], tmp_path / "out" / "bert", nsys=str(fake))
    calls = log.read_text().splitlines()
    assert calls[0].startswith("profile -t cuda,nvtx --sample=none --cpuctxsw=none --capture-range=cudaProfilerApi")
    assert calls[1].startswith("export --type sqlite")
    doc = json.loads(gzip.decompress(paths["trace"].read_bytes()))
    assert sum(1 for e in doc["traceEvents"] if e["cat"] == "kernel") == 308
    import nongemm_trace
    assert nongemm_trace.analyze(paths["trace"]).gpu_activities == 308


def test_nsys_collector_needs_a_binary(monkeypatch, tmp_path):
    from nongemm_trace.collectors import nsys as col
    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SystemExit, match="no nsys binary"):
        col.find_nsys()


def test_capture_runs_the_profiled_steps_back_to_back(tmp_path, monkeypatch):
    """The profiled window is the user's loop as it runs: no synchronize between its steps (issue #41
    item 5). With CUDA made to look present, every synchronize the collector makes is logged beside the
    steps: none falls between two profiled steps."""
    import torch

    from nongemm_trace.collectors import torch_profiler

    log: list[str] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: log.append("sync"))
    monkeypatch.setattr(torch_profiler, "_activities", lambda: [torch.profiler.ProfilerActivity.CPU])
    monkeypatch.setattr(torch_profiler, "run_metadata", lambda extra=None: dict(extra or {}))  # no device to name
    x = torch.ones(8)
    path = torch_profiler.capture(lambda: log.append("step") or torch.relu(x), tmp_path, "loop", steps=3,
                                  unprofiled_rounds=0, summary=False)
    assert path.exists()
    assert log == ["step"] * 5 + ["sync"]
