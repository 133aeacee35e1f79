"""The training callbacks: Hugging Face ``Trainer`` and Lightning, on the CPU with tiny models.

One module-scoped run each (their imports are the cost): the HF run breaks a gate in
``warn`` mode and trains on; the Lightning run breaks one in ``raise`` mode and stops at
the end of the profiled window. Their traces are analysed again here and must agree with
the summaries written next to them. The framework-neutral :class:`StepProfiler` is tested
on a plain loop (gates that hold, a window cut short, one never reached).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import warnings

import pytest
from conftest import REPO

from nongemm_trace.integrations.gates import Gates
from nongemm_trace.integrations.steps import ProfileWindow
from nongemm_trace.pipeline.options import AnalysisOptions

torch = pytest.importorskip("torch", reason="torch not installed (pip install torch)")


def _steps(trace) -> list[str]:
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    return sorted(e["name"] for e in doc["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))


def _run_meta(trace) -> dict:
    return json.loads(gzip.decompress(trace.read_bytes()))["nongemm_run"]


def _summaries_agree(files: dict) -> dict:
    """The JSON summary is the trace's report; the text summary shows every category and the total."""
    from nongemm_trace import analyze
    from nongemm_trace.report.json_out import render_json

    stored = json.loads(files["json"].read_text())
    again = json.loads(render_json(analyze(files["trace"])))
    assert stored["categories"] == again["categories"] and stored["classes"] == again["classes"]
    text = files["text"].read_text()
    assert all(c["category"] in text for c in stored["categories"])
    assert f"{stored['cpu_time_us']:,.1f}" in text and "…" not in text
    return stored


@pytest.fixture(scope="module")
def hf_run(tmp_path_factory):
    pytest.importorskip("transformers", reason="transformers not installed (pip install transformers accelerate)")
    pytest.importorskip("accelerate", reason="accelerate not installed (the Trainer needs it)")
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    from nongemm_trace.integrations.huggingface import NonGemmCallback

    out = tmp_path_factory.mktemp("hf")
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1,
                                                     num_attention_heads=2, intermediate_size=64,
                                                     max_position_embeddings=32))
    data = [{"input_ids": torch.randint(0, 64, (16,)), "labels": torch.tensor(i % 2)} for i in range(16)]
    args = TrainingArguments(output_dir=str(out), max_steps=4, per_device_train_batch_size=4, report_to=[],
                             use_cpu=True, logging_strategy="no", save_strategy="no", disable_tqdm=True)
    cb = NonGemmCallback(window=ProfileWindow(start=1, steps=2, warmup=1, name="bert", html=True),
                         gates=Gates(on_violation="warn", max_share={"non-GEMM": "99%"},
                                     max_category_share={"gemm": 0.001}))
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[cb])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        trainer.train()
    return cb, trainer, seen, out


@pytest.fixture(scope="module")
def lightning_run(tmp_path_factory):
    L = pytest.importorskip("lightning.pytorch", reason="lightning not installed (pip install lightning)")
    from nongemm_trace.integrations.gates import PerformanceGateError
    from nongemm_trace.integrations.lightning import NonGemmCallback

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.GELU(),
                                           torch.nn.Linear(32, 2))

        def training_step(self, batch, i):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    out = tmp_path_factory.mktemp("pl")
    torch.manual_seed(0)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(96, 16), torch.randint(0, 2, (96,))),
                                       batch_size=8)
    cb = NonGemmCallback(out / "traces", window=ProfileWindow(start=1, steps=2, warmup=1),
                         gates=Gates(max_category_share={"normalization": "0.01%"}))
    trainer = L.Trainer(max_steps=6, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=str(out),
                        accumulate_grad_batches=2, callbacks=[cb])
    with pytest.raises(PerformanceGateError) as failed:
        trainer.fit(Tiny(), data)
    return cb, trainer, failed.value


def test_hf_callback_writes_the_trace_and_summaries_and_warns(hf_run):
    from nongemm_trace.integrations.gates import PerformanceGateWarning

    cb, trainer, seen, out = hf_run
    files = cb.profiler.files
    assert files["trace"] == out / "nongemm" / "bert.json.gz"  # default: output_dir/nongemm
    assert set(files) == {"trace", "json", "text", "html", "check"} and all(p.exists() for p in files.values())
    assert _steps(files["trace"]) == ["ProfilerStep#1", "ProfilerStep#2"]  # the window, after one warm-up step
    meta = _run_meta(files["trace"])
    assert meta["framework"] == "transformers" and meta["model"] == "BertForSequenceClassification"
    assert meta["profiled_steps"] == "1..2"
    stored = _summaries_agree(files)
    assert stored["metric"] == "cpu" and len(stored["steps"]) == 2  # a CPU run: shares of operator CPU time
    assert {"gemm", "normalization", "activation"} <= {c["category"] for c in stored["categories"] if c["share"] > 0}
    # warn: the run trained on; the broken limit is a warning and in check.json, the one that held is not
    assert trainer.state.global_step == 4
    gate_warnings = [w for w in seen if issubclass(w.category, PerformanceGateWarning)]
    assert len(gate_warnings) == 1 and "category gemm" in str(gate_warnings[0].message)
    check = json.loads(files["check"].read_text())
    assert check["ok"] is False and [v["limit"] for v in check["violations"]] == ["max-category-share gemm"]
    assert "<svg" in files["html"].read_text()


def test_lightning_callback_fails_the_run_at_the_end_of_the_window(lightning_run):
    cb, trainer, error = lightning_run
    files = cb.profiler.files
    assert files["trace"].parent.name == "traces" and all(p.exists() for p in files.values())
    assert trainer.global_step == 3  # stopped after the window (steps 1..2), not at max_steps=6
    assert [v.limit for v in error.violations] == ["max-category-share normalization"]
    # the verdict first, the trace's file name last (not "0.0 %")
    assert "above the limit of 0.01 %" in str(error) and str(error).endswith(f"(in {files['trace'].name})")
    assert _steps(files["trace"]) == ["ProfilerStep#1", "ProfilerStep#2"]
    assert _run_meta(files["trace"])["accumulate_grad_batches"] == 2
    stored = _summaries_agree(files)
    # a step is an optimizer step: each ProfilerStep spans two batches (two forward passes)
    linear = [o for o in stored["ops"] if o["op"] == "aten::linear"]
    assert linear and linear[0]["calls"] == 2 * 2 * 2  # 2 layers x 2 batches x 2 steps
    assert json.loads(files["check"].read_text())["ok"] is False


def _loop(profiler, out, n: int):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    x = torch.randn(4, 8)
    profiler.begin(out, "loop")
    for _ in range(n):
        model(x).sum().backward()
        profiler.step()
    profiler.end()


def test_step_profiler_on_a_plain_loop(tmp_path):
    from nongemm_trace.integrations.steps import StepProfiler

    held = StepProfiler(ProfileWindow(start=1, steps=2, warmup=0), gates=Gates(max_share={"non-GEMM": 1.0}),
                        options=AnalysisOptions(metric="cpu"))
    _loop(held, tmp_path / "a", 5)
    assert held.violations == [] and json.loads(held.files["check"].read_text())["ok"] is True
    assert _steps(held.trace_path) == ["ProfilerStep#1", "ProfilerStep#2"] and "html" not in held.files

    # training ends inside the window: written as far as it ran
    short = StepProfiler(ProfileWindow(start=1, steps=5, warmup=1))
    with pytest.warns(UserWarning, match=r"inside the profiled window \(steps 1..5\): .* holds 2 whole steps and a "
                                         r"last, partial one \(ProfilerStep#3\)"):
        _loop(short, tmp_path / "b", 3)
    assert _steps(short.trace_path) == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    assert "check" not in short.files  # no gates given

    never = StepProfiler(ProfileWindow(start=4, steps=2))
    with pytest.warns(UserWarning, match=r"training ended after 2 steps, before the profiled window \(steps 4..5\)"):
        _loop(never, tmp_path / "c", 2)
    assert never.trace_path is None and not (tmp_path / "c" / "loop.json.gz").exists()


def test_gates_are_validated_before_training():
    from nongemm_trace.errors import OptionError
    from nongemm_trace.integrations.steps import StepProfiler

    for bad, needle in (({"max_share": {"nonGEMM": 0.1}}, "unknown name 'nonGEMM'"),
                        ({"max_category_share": {"memroy": 0.1}}, "known: "),
                        ({"max_share": {"non-GEMM": 1.5}}, "not a share between 0 and 1"),
                        ({"max_regression": "10%"}, "needs baseline"),
                        ({"baseline": "base.json.gz"}, "no limit to check"),
                        ({"max_regression": 0.1, "baseline": "/nonexistent/base.json"}, "does not exist"),
                        ({"max_share": {"GEMM": 0.5}, "on_violation": "ignore"}, "on_violation"),
                        ({"start": 1, "warmup": 2}, "must not exceed start"),
                        ({"steps": 0}, "steps must be")):
        window = {k: v for k, v in bad.items() if k in ("start", "steps", "warmup")}
        with pytest.raises(OptionError, match=needle):
            StepProfiler(ProfileWindow(**window) if window else None,
                         gates=Gates(**{k: v for k, v in bad.items() if k not in window}))
        with pytest.raises(OptionError, match=needle), pytest.warns(DeprecationWarning):
            StepProfiler(**bad)  # the keywords it took before: the same refusals, and the warning


def test_the_keywords_the_profiler_took_before_still_work_with_a_warning():
    from nongemm_trace.integrations.steps import StepProfiler

    with pytest.warns(DeprecationWarning, match=r"StepProfiler\(ProfileWindow\(start=\.\.\.\), gates=Gates"):
        old = StepProfiler(start=1, steps=2, warmup=0, html=True, max_share={"non-GEMM": "99%"}, level="top",
                           metric="cpu")
    new = StepProfiler(ProfileWindow(start=1, steps=2, warmup=0, html=True), gates=Gates(max_share={"non-GEMM": "99%"}),
                       options=AnalysisOptions(level="top", metric="cpu"))
    assert (old.window, old.gates, old.report_options) == (new.window, new.gates, new.report_options)
    with pytest.raises(TypeError, match="start given beside window="):
        StepProfiler(ProfileWindow(), start=3)
    with pytest.raises(TypeError, match="takes no stepz"):
        StepProfiler(stepz=3)


def test_frameworks_are_imported_only_by_their_modules():
    code = ("import sys, nongemm_trace.pytest_plugin\n"
            "assert 'polars' not in sys.modules  # every pytest run loads the plugin: it must cost nothing\n"
            "import nongemm_trace, nongemm_trace.integrations, nongemm_trace.integrations.steps, "
            "nongemm_trace.integrations.lightning, nongemm_trace.pytest_plugin\n"
            "assert not {'transformers', 'lightning', 'pytorch_lightning', 'torch'} & set(sys.modules), sys.modules\n"
            "sys.modules['transformers'] = sys.modules['pytorch_lightning'] = None\n"
            "try:\n    import nongemm_trace.integrations.huggingface\nexcept ImportError as e:\n    print(e)\n"
            "try:\n    from nongemm_trace.integrations.lightning import PLNonGemmCallback\n"
            "except ImportError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "needs transformers: pip install transformers" in r.stdout
    assert "needs pytorch_lightning: pip install pytorch_lightning" in r.stdout
