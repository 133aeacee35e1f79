"""The run without the profiler: step times measured around a profiled window, for the trace's metadata.

The profiler makes the host slower (an event per op, a callback per launch, shapes and stacks
recorded), so a trace shows a run nobody ships. What the user's job really does is measured
here, on the same process, model and inputs, just before and just after the profiled window.
The two sides are not the same process state: once a window with CUDA activities ends, Kineto
leaves CUPTI attached to the process unless ``TEARDOWN_CUPTI=1`` is set, and host-bound steps
run slower from then on (docs/latency.md), so each side's median is kept beside the pooled one,
with whether teardown was asked for. A round runs its steps back to back,
as the user's loop does (no synchronize between steps, so the host runs ahead where it can): a
CUDA event recorded before the first step and after each one, and each step's **time** is the
interval between consecutive events, the loop's period (docs/latency.md; the first step's from
the idle device). The host's **issue time** is the wall time until the round's first step
returns, taken right after the synchronize that opens the round: the time to enqueue one step
with an empty queue (later steps can block on a full launch queue, which is the device's pace,
not the host's). Without CUDA both are the wall time of the step.

The result is written into the trace as ``nongemm_unprofiled`` (docs/collectors.md), which
``latency``, ``launch`` and ``whatif`` read to answer for the run without the profiler.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

#: the key of the trace document (and of ``Trace.metadata``) that holds the measurement
METADATA_KEY = "nongemm_unprofiled"
#: the profiler settings recorded with the measurement (torch writes the true ones into the trace too)
SETTINGS = ("record_shapes", "with_stack", "profile_memory", "with_flops", "with_modules")


def time_round(step: Callable[[], Any], steps: int) -> tuple[list[float], list[float]]:
    """``steps`` steps back to back: (each step's time, the first step's host issue time), in microseconds."""
    import torch

    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    if not cuda:
        walls = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            walls.append((time.perf_counter() - t0) * 1e6)
        return walls, walls[:1]
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
    torch.cuda.synchronize()  # the round opens on an idle device: its first step's issue time is the host's own
    t0 = time.perf_counter()
    marks[0].record()
    issue = 0.0
    for i in range(steps):
        step()
        if i == 0:
            issue = (time.perf_counter() - t0) * 1e6
        marks[i + 1].record()
    marks[-1].synchronize()
    return [a.elapsed_time(b) * 1000.0 for a, b in zip(marks, marks[1:])], [issue]


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
        side = {where: [x for r in self.rounds if r["where"] == where for x in r["step_us"]]
                for where in ("before", "after")}
        return {
            "step_us": round(statistics.median(steps), 3) if steps else None,
            "before_step_us": round(statistics.median(side["before"]), 3) if side["before"] else None,
            "after_step_us": round(statistics.median(side["after"]), 3) if side["after"] else None,
            "cupti_teardown": os.environ.get("TEARDOWN_CUPTI") == "1",
            "host_issue_us": round(statistics.median(issue), 3) if issue else None,
            "round_step_us": [round(statistics.median(r["step_us"]), 3) for r in self.rounds],
            "round_host_issue_us": [round(statistics.median(r["host_issue_us"]), 3) for r in self.rounds],
            "rounds": self.rounds,
            "steps_per_round": self.steps_per_round,
            "timing": "cuda_events" if cuda else "wall_clock",
            "synchronized_steps": False,
            "profiler": {k: bool(settings.get(k, False)) for k in SETTINGS},
            "torch": torch.__version__,
        }
