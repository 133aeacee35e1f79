"""Profile a window of training steps, summarise the trace and check its gates.

The frameworks' callbacks (:mod:`.huggingface`, :mod:`.lightning`) are thin: they tell a
:class:`StepProfiler` when training begins, when each step ends and when training ends.
The capture is the torch collector's (:func:`nongemm_trace.collectors.torch_profiler.profile_steps`:
a ``torch.profiler`` schedule over the chosen steps, ``ProfilerStep#N`` markers, run
metadata); once the trace is written, it is analysed once and

* ``NAME.json.gz``: the Kineto trace,
* ``NAME.nongemm.json``: the JSON report (``analyze --format json``),
* ``NAME.nongemm.txt``: the terminal report, whole (not cut to a width),
* ``NAME.html``: the HTML page (``html=True``),
* ``NAME.check.json``: the gates' result (when gates are given)

lie side by side. A broken gate raises :class:`~.gates.PerformanceGateError` from the step
that completed the window (the run fails there) or warns, as asked.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..analyses.check import Violation
from ..core.deprecation import REMOVAL, deprecated
from ..core.fields import option
from ..errors import OptionError
from ..pipeline.analysis import Analysis, needs_python
from ..pipeline.options import AnalysisOptions
from .gates import Gates, PerformanceGateError

if TYPE_CHECKING:
    from ..models.report import Report


@dataclass(frozen=True)
class ProfileWindow:
    """Which training steps a :class:`StepProfiler` profiles and what it records and writes: ``steps``
    steps from step ``start`` (counted from 0 when training begins), after ``warmup``
    traced-but-discarded steps. A window that could never be profiled is refused when made."""

    start: int = option(2, "the first profiled step, counted from 0 when training begins")
    steps: int = option(3, "how many steps are profiled")
    warmup: int = option(1, "traced-but-discarded steps right before the first profiled one")
    name: str = option("train", "the files' name (NAME.json.gz, NAME.nongemm.json, ...)")
    html: bool = option(False, "also write the HTML page (NAME.html)")
    with_stack: bool = option(False, "the profiler's with_stack (Python stacks: the module level reads them)")
    with_modules: bool = option(False, "the profiler's with_modules")
    metadata: dict[str, Any] | None = option(None, "added to the trace's run metadata")

    def __post_init__(self) -> None:
        for what, value, low in (("start", self.start, 0), ("steps", self.steps, 1), ("warmup", self.warmup, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise OptionError(None, f"{what} must be an integer >= {low}, not {value!r}", what)
        if self.warmup > self.start:
            raise OptionError(None, f"warmup ({self.warmup}) must not exceed start ({self.start}): the warm-up steps "
                                    "run before the first profiled one", "warmup", "start")


#: the analysis options the profiler took as keywords before ``options=`` (a keyword given beside it wins)
_ANALYSIS_KEYWORDS = ("taxonomy", "level", "metric")


def _typed(window: ProfileWindow | None, gates: Gates | None, old: dict[str, Any]) -> tuple[ProfileWindow, Gates,
                                                                                             dict[str, Any]]:
    """The window, the gates and the analysis keywords of a profiler made the way it was before these
    objects (every setting a keyword: ``StepProfiler(start=10, max_share=…, level="top")``), which keeps
    working until 0.3 with the one deprecation warning. A keyword beside its object is refused."""
    from dataclasses import fields

    if not old:
        return window or ProfileWindow(), gates or Gates(), {}
    taken = {"window": {f.name for f in fields(ProfileWindow)}, "gates": {f.name for f in fields(Gates)},
             "options": set(_ANALYSIS_KEYWORDS)}
    unknown = sorted(set(old) - set().union(*taken.values()))
    if unknown:
        raise TypeError(f"StepProfiler takes no {', '.join(unknown)}")
    for what, given in (("window", window), ("gates", gates)):
        clash = sorted(taken[what] & set(old))
        if given is not None and clash:
            raise TypeError(f"StepProfiler: {', '.join(clash)} given beside {what}=: give each setting once")
    deprecated("StepProfiler(start=..., max_share=..., level=..., ...)",
               "StepProfiler(ProfileWindow(start=...), gates=Gates(max_share=...), options=AnalysisOptions(level=...))",
               REMOVAL)
    window = window or ProfileWindow(**{k: v for k, v in old.items() if k in taken["window"]})
    gates = gates or Gates(**{k: v for k, v in old.items() if k in taken["gates"]})
    return window, gates, {k: v for k, v in old.items() if k in taken["options"]}


class StepProfiler:
    """Profile the training steps ``window`` names (:class:`ProfileWindow`), summarise the trace and check
    ``gates`` (:class:`~.gates.Gates`: the limits of ``nongemm-trace check``, fractions or ``"45%"``,
    checked on the profiled steps; ``on_violation``: ``"raise"`` fails the run, ``"warn"`` warns), under
    ``options`` (an :class:`~nongemm_trace.pipeline.options.AnalysisOptions`: its taxonomy, level and
    metric; the profiled window is its steps, so its step options are not read).

    Three typed objects rather than eighteen keywords: each is validated when made (a misspelt gate
    fails before training), and the callbacks pass them on. The keywords it took before
    (``start=``, ``max_share=``, ``level=`` …) still work until 0.3, with a deprecation warning; an
    analysis keyword given beside ``options`` wins, as it always did.
    """

    def __init__(self, window: ProfileWindow | None = None, *, gates: Gates | None = None,
                 options: AnalysisOptions | None = None, **old: Any):
        from ..classify.taxonomy import load_taxonomy

        window, gates, keywords = _typed(window, gates, old)
        self.window = window
        self.start, self.steps, self.warmup, self.name = window.start, window.steps, window.warmup, window.name
        typed = options.given() if options is not None else {}
        taxonomy, level, metric = (keywords.get(k) or typed.get(k) for k in _ANALYSIS_KEYWORDS)
        self.taxonomy = load_taxonomy(taxonomy or "default")
        self.report_options = {k: v for k, v in (("level", level), ("metric", metric)) if v is not None}
        self.gates = gates
        if self.gates.any or gates.baseline is not None:
            self.gates.validate(self.taxonomy)  # a typo fails now, not after the run
        self.html, self.with_stack, self.with_modules = window.html, window.with_stack, window.with_modules
        self.metadata = dict(window.metadata or {})
        self._stack: contextlib.ExitStack | None = None
        self._mark: Callable[[], None] | None = None
        self._steps_seen = 0
        self._failure: PerformanceGateError | None = None
        #: set once the trace is written: its path, the files beside it, the report and the broken limits
        self.trace_path: Path | None = None
        self.files: dict[str, Path] = {}
        self.report: Report | None = None
        self.violations: list[Violation] = []

    @property
    def active(self) -> bool:
        return self._stack is not None

    def begin(self, out_dir: str | Path, name: str | None = None, metadata: dict[str, Any] | None = None) -> None:
        """Training begins: start the profiler (idle until the window's warm-up)."""
        from ..collectors.torch_profiler import profile_steps

        self.close()
        self.out_dir = Path(out_dir)
        self.run_name = name or self.name
        self._steps_seen = 0
        self._unprofiled = LoopTimes(self.start - self.warmup, dict(with_stack=self.with_stack,
                                                                   with_modules=self.with_modules, record_shapes=True))
        self._stack = contextlib.ExitStack()
        self._mark = self._stack.enter_context(profile_steps(
            self.out_dir, self.run_name, steps=self.steps, wait=self.start - self.warmup, warmup=self.warmup,
            metadata={**self.metadata, **(metadata or {}),
                      "profiled_steps": f"{self.start}..{self.start + self.steps - 1}"},
            with_stack=self.with_stack, with_modules=self.with_modules, summary=False, on_written=self._written,
            unprofiled=self._unprofiled.summary))

    def step(self) -> None:
        """A training step ended. Once the window is complete the trace is written and checked; a
        broken gate (``on_violation="raise"``) raises here."""
        if self._stack is None:
            return
        assert self._mark is not None  # set with the stack
        self._steps_seen += 1
        self._unprofiled.step_ended()
        if self._steps_seen == self.start + self.steps:
            _synchronize()  # the window's last kernels finish before the trace is cut
        self._mark()
        if self._steps_seen >= self.start + self.steps:
            self.close()
        self._raise_pending()

    def end(self) -> None:
        """Training ended: a window cut short is written as far as it ran; a window never reached is
        a warning (training ended before step ``start``)."""
        if self._stack is None:
            return
        seen, window = self._steps_seen, f"steps {self.start}..{self.start + self.steps - 1}"
        self.close()
        if self.trace_path is None and seen <= self.start:
            warnings.warn(f"nongemm-trace: training ended after {seen} step{'s' if seen != 1 else ''}, before the "
                          f"profiled window ({window}): no trace written", stacklevel=2)
        elif seen < self.start + self.steps:
            # the profiler opened ProfilerStep#<seen> at the last step's end; it holds what ran until now
            warnings.warn(f"nongemm-trace: training ended inside the profiled window ({window}): {self.trace_path} "
                          f"holds {seen - self.start} whole step{'s' if seen - self.start != 1 else ''} and a last, "
                          f"partial one (ProfilerStep#{seen})", stacklevel=2)
        self._raise_pending()

    def close(self) -> None:
        """Stop the profiler (no error raised here: :meth:`step` and :meth:`end` raise)."""
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()

    def _raise_pending(self) -> None:
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def _written(self, path: Path) -> None:
        """The collector wrote the trace: analyse it once; write the summaries; check the gates."""
        from ..core.safe_write import write_file
        from ..report.json_out import render_json

        self.trace_path = path
        stem = path.name.split(".json")[0]
        analysis = Analysis(path, taxonomy=self.taxonomy, keep_python=needs_python(self.report_options.get("level")))
        self.report = analysis.report(AnalysisOptions(**self.report_options))
        self.files = {"trace": path, "json": path.with_name(stem + ".nongemm.json"),
                      "text": path.with_name(stem + ".nongemm.txt")}
        write_file(self.files["json"], render_json(self.report), inputs=[path])
        _write_text(self.report, self.files["text"])
        if self.html:
            from ..report_page import write_page

            self.files["html"] = write_page([analysis], path.with_name(stem + ".html"),
                                            options=AnalysisOptions(**self.report_options))
        if self.gates.any:
            level = {k: v for k, v in self.report_options.items() if k == "level"}
            self.violations = self.gates.apply(analysis, AnalysisOptions(**level))
            self.files["check"] = path.with_name(stem + ".check.json")
            if self.violations and self.gates.on_violation == "raise":
                self._failure = PerformanceGateError(path, self.violations)


class LoopTimes:
    """The steps of a training loop before the profiled window (the profiler idles then), timed
    without it: a CUDA event recorded as each step ends, so a step's time is the device time
    between two ends (the loop runs on without waiting). The first step is left out (lazy
    initialisation). The host's issue time is not measured here: the loop's own steps end on no
    boundary the callback sees (:mod:`nongemm_trace.collectors.unprofiled` measures it in
    ``capture``)."""

    def __init__(self, unprofiled_steps: int, settings: dict[str, Any]):
        self.left, self.settings = unprofiled_steps, settings
        self.events: list[Any] = []

    def step_ended(self) -> None:
        import torch

        if self.left <= 0 or not (torch.cuda.is_available() and torch.cuda.is_initialized()):
            return
        self.left -= 1
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        self.events.append(ev)

    def summary(self) -> dict[str, Any] | None:
        """``nongemm_unprofiled`` (:mod:`nongemm_trace.collectors.unprofiled`), or None with fewer than
        three timed step ends (two whole steps after the first)."""
        import statistics

        import torch

        from ..collectors.unprofiled import SETTINGS

        if len(self.events) < 3:
            return None
        self.events[-1].synchronize()
        steps = [round(a.elapsed_time(b) * 1000.0, 3) for a, b in zip(self.events[1:], self.events[2:])]
        return {"step_us": round(statistics.median(steps), 3), "host_issue_us": None, "round_step_us": steps,
                "round_host_issue_us": [], "rounds": [{"where": "before", "step_us": steps, "host_issue_us": []}],
                "steps_per_round": len(steps), "timing": "cuda_events", "synchronized_steps": False,
                "profiler": {k: bool(self.settings.get(k, False)) for k in SETTINGS},
                "torch": torch.__version__}


def _synchronize() -> None:
    """Wait for the GPU (CUDA or ROCm) when torch has started it: its kernels are asynchronous."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _write_text(report: Any, out: Path) -> None:
    from ..report.output import LOG_WIDTH, draw
    from ..report.terminal.report import render_report

    # a log's width, whatever COLUMNS the training job's environment has (an 80-column cut hides numbers)
    draw(str(out), lambda console: render_report(report, console), width=LOG_WIDTH)
