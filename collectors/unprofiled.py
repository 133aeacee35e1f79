"""The run without the profiler: step times measured around a profiled window, for the trace's metadata.

The profiler makes the host slower (an event per op, a callback per launch, shapes and stacks
recorded), so a trace shows a run nobody ships. What the user's job really does is measured
here, on the same process, model and inputs, just before and just after the profiled window
(rounds around it, so both sides see the same host state): each step is timed with CUDA events
(an event recorded before the step and one after it, then a synchronize, so one step's time is
from its first launch's start to its last kernel's end), and the host's **issue time** is the
wall time until the step function returns, before the synchronize (the time to enqueue one
step, not waiting for the GPU unless the step itself synchronizes). Without CUDA both are the
wall time of the step.

The result is written into the trace as ``nongemm_unprofiled`` (docs/collectors.md), which
``latency``, ``launch`` and ``whatif`` read to answer for the run without the profiler.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

#: the key of the trace document (and of ``Trace.metadata``) that holds the measurement
METADATA_KEY = "nongemm_unprofiled"
#: the profiler settings recorded with the measurement (torch writes the true ones into the trace too)
SETTINGS = ("record_shapes", "with_stack", "profile_memory", "with_flops", "with_modules")


def time_round(step: Callable[[], Any], steps: int) -> tuple[list[float], list[float]]:
    """``steps`` steps, each timed alone: (step times, host issue times), in microseconds."""
    import torch

    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    gpu, host = [], []
    if cuda:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(steps):
        if cuda:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            begin.record()
            step()
            end.record()
            t1 = time.perf_counter()
            end.synchronize()
            gpu.append(begin.elapsed_time(end) * 1000.0)
        else:
            t0 = time.perf_counter()
            step()
            t1 = time.perf_counter()
            gpu.append((t1 - t0) * 1e6)
        host.append((t1 - t0) * 1e6)
    return gpu, host


class Rounds:
    """Rounds of unprofiled steps taken around a profiled window, and their summary."""

    def __init__(self, step: Callable[[], Any], steps_per_round: int = 5):
        if steps_per_round < 1:
            raise ValueError("steps_per_round must be >= 1")
        self.step, self.steps_per_round = step, steps_per_round
        self.rounds: list[dict[str, Any]] = []

    def run(self, n: int, where: str) -> None:
        """``n`` rounds now; ``where`` says on which side of the window (``before``/``after``)."""
        for _ in range(n):
            gpu, host = time_round(self.step, self.steps_per_round)
            self.rounds.append({"where": where, "step_us": [round(x, 3) for x in gpu],
                                "host_issue_us": [round(x, 3) for x in host]})

    def summary(self, settings: dict[str, Any]) -> dict[str, Any]:
        """The ``nongemm_unprofiled`` document: medians over every timed step, each round's median
        (their spread is the run's noise), and the profiler settings of the window."""
        import torch

        steps = [x for r in self.rounds for x in r["step_us"]]
        issue = [x for r in self.rounds for x in r["host_issue_us"]]
        cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
        return {
            "step_us": round(statistics.median(steps), 3) if steps else None,
            "host_issue_us": round(statistics.median(issue), 3) if issue else None,
            "round_step_us": [round(statistics.median(r["step_us"]), 3) for r in self.rounds],
            "round_host_issue_us": [round(statistics.median(r["host_issue_us"]), 3) for r in self.rounds],
            "rounds": self.rounds,
            "steps_per_round": self.steps_per_round,
            "timing": "cuda_events" if cuda else "wall_clock",
            "synchronized_steps": True,
            "profiler": {k: bool(settings.get(k, False)) for k in SETTINGS},
            "torch": torch.__version__,
        }
