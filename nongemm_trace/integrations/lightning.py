"""A PyTorch Lightning :class:`Callback` that profiles chosen training steps.

    from nongemm_trace.integrations.lightning import NonGemmCallback

    trainer = L.Trainer(max_steps=100, callbacks=[NonGemmCallback(
        window=ProfileWindow(start=10, steps=3), gates=Gates(max_category_share={"memory": 0.1}))])
    trainer.fit(model, loader)   # default_root_dir/nongemm/train.json.gz, .nongemm.json, .nongemm.txt, .check.json

Steps are optimizer steps (``trainer.global_step`` advancing; with ``accumulate_grad_batches``
a step spans several batches), counted from 0 when fitting begins. Under several processes
each rank writes ``NAME.rankN.*``. Options: those of
:class:`~nongemm_trace.integrations.steps.StepProfiler` (its ``ProfileWindow``, ``gates=`` and
``options=``). The callback is built on ``lightning.pytorch`` (``NonGemmCallback``) or, for the
older package name, ``pytorch_lightning`` (``PLNonGemmCallback``); neither is a dependency of nongemm-trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..pipeline.options import AnalysisOptions
from .gates import Gates
from .steps import ProfileWindow, StepProfiler

__all__ = ["NonGemmCallback", "PLNonGemmCallback"]  # noqa: F822 - built on first access (__getattr__)


def _framework(package: str) -> Any:
    """``lightning.pytorch`` or ``pytorch_lightning``, imported by name (each a static import: no module
    but the native loader imports by a computed name)."""
    if package == "lightning.pytorch":
        import lightning.pytorch
        return lightning.pytorch
    import pytorch_lightning
    return pytorch_lightning


def _callback_class(package: str) -> type:
    """The callback on ``package``'s ``Callback`` (``lightning.pytorch`` or ``pytorch_lightning``)."""
    try:
        pl = _framework(package)
    except ImportError as exc:
        raise ImportError(f"nongemm_trace.integrations.lightning needs {package.split('.')[0]}: pip install "
                          f"{package.split('.')[0]} ({exc})") from None

    callback: Any = pl.Callback  # the framework's base class, known only at run time

    class NonGemmCallback(callback):
        """Profile ``steps`` optimizer steps from step ``start``; write the trace and its summaries under
        ``out_dir`` (default: ``trainer.default_root_dir/nongemm``); check the gates, failing the run
        or warning. ``profiler`` (a :class:`StepProfiler`) holds the paths, report and broken limits after."""

        def __init__(self, out_dir: str | Path | None = None, *, window: ProfileWindow | None = None,
                     gates: Gates | None = None, options: AnalysisOptions | None = None, **old: Any):
            self.out_dir = out_dir
            # old: the keywords StepProfiler took before its three objects (it warns: deprecated)
            self.profiler = StepProfiler(window, gates=gates, options=options, **old)
            self._global_step = 0

        def on_train_start(self, trainer, pl_module) -> None:
            name = self.profiler.name
            if trainer.world_size > 1:
                name = f"{name}.rank{trainer.global_rank}"
            meta = {"framework": package.split(".")[0], "lightning": getattr(pl, "__version__", None),
                    "model": type(pl_module).__name__, "first_global_step": trainer.global_step,
                    "accumulate_grad_batches": trainer.accumulate_grad_batches}
            self._global_step = trainer.global_step
            self.profiler.begin(Path(self.out_dir or Path(trainer.default_root_dir) / "nongemm"), name, meta)

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            if trainer.global_step != self._global_step:  # an optimizer step completed with this batch
                self._global_step = trainer.global_step
                self.profiler.step()

        def on_train_end(self, trainer, pl_module) -> None:
            self.profiler.end()

        def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
            self.profiler.close()

    NonGemmCallback.__module__ = __name__
    return NonGemmCallback


def __getattr__(name: str) -> Any:
    """Each class is made on first use, so only the package asked for is imported."""
    if name in __all__:
        value = _callback_class("lightning.pytorch" if name == "NonGemmCallback" else "pytorch_lightning")
        value.__qualname__ = value.__name__ = name
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
