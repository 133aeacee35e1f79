"""A Hugging Face ``transformers`` :class:`TrainerCallback` that profiles chosen training steps.

    from nongemm_trace.integrations.huggingface import NonGemmCallback

    trainer = Trainer(model, args, train_dataset=ds,
                      callbacks=[NonGemmCallback(window=ProfileWindow(start=10, steps=3),
                                                 gates=Gates(max_share={"non-GEMM": "45%"}))])
    trainer.train()      # output_dir/nongemm/train.json.gz, train.nongemm.json, train.nongemm.txt, train.check.json

Steps are optimizer steps (``on_step_end``: after gradient accumulation), counted from 0 when
``train()`` begins. Under several processes each rank writes ``NAME.rankN.*``. Options: those
of :class:`~nongemm_trace.integrations.steps.StepProfiler` (its ``ProfileWindow``, ``gates=`` and
``options=``). ``transformers`` is imported by this
module only: it is no dependency of nongemm-trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

try:
    import transformers
    from transformers import TrainerCallback
except ImportError as exc:  # pragma: no cover - exercised where transformers is missing
    raise ImportError("nongemm_trace.integrations.huggingface needs transformers: pip install transformers "
                      f"({exc})") from None

from ..pipeline.options import AnalysisOptions
from .gates import Gates
from .steps import ProfileWindow, StepProfiler

__all__ = ["NonGemmCallback"]


class NonGemmCallback(TrainerCallback):
    """Profile ``steps`` optimizer steps from step ``start``; write the trace and its summaries under
    ``out_dir`` (default: ``args.output_dir/nongemm``); check the gates, failing the run or warning.
    ``profiler`` (a :class:`StepProfiler`) holds the paths, the report and the broken limits after."""

    def __init__(self, out_dir: str | Path | None = None, *, window: ProfileWindow | None = None,
                 gates: Gates | None = None, options: AnalysisOptions | None = None, **old: Any):
        self.out_dir = out_dir
        # old: the keywords StepProfiler took before its three objects (it warns: deprecated)
        self.profiler = StepProfiler(window, gates=gates, options=options, **old)

    def on_train_begin(self, args, state, control, **kwargs: Any):
        name = self.profiler.name
        if getattr(args, "world_size", 1) > 1:
            name = f"{name}.rank{args.process_index}"
        model = kwargs.get("model")
        meta = {"framework": "transformers", "transformers": transformers.__version__,
                "model": type(model).__name__ if model is not None else None,
                "first_global_step": state.global_step, "gradient_accumulation_steps": args.gradient_accumulation_steps,
                "per_device_train_batch_size": args.per_device_train_batch_size}
        self.profiler.begin(Path(self.out_dir or Path(args.output_dir) / "nongemm"), name, meta)
        return control

    def on_step_end(self, args, state, control, **kwargs: Any):
        self.profiler.step()
        return control

    def on_train_end(self, args, state, control, **kwargs: Any):
        self.profiler.end()
        return control
