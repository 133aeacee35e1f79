"""The changes a what-if replays, as one typed object: :class:`WhatIfParams`, the ``whatif`` analysis's
``Params`` (each field its flag, with its help) and what :func:`~.latency.whatif.predict` takes. Its own
module, light (no polars), so that the catalogue declares the analysis with it and the what-if reads it
without either importing the other.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.fields import option
from ..vocabulary import AUTOCAST_DTYPES

#: the help of every analysis's ``unprofiled_step_us``
UNPROFILED = ("the run's measured step time without the profiler (us, mean per step): calibrates the answers for "
              "the run without the profiler (default: the trace's nongemm_unprofiled metadata, else the "
              "profiler-overhead model alone)")


#: the help of every analysis's ``attached``
ATTACHED = ("answer for the loop's steps after a profiled window, in the same process: torch.profiler leaves CUPTI "
            "attached unless TEARDOWN_CUPTI=1 is set, and every later runtime call pays its callbacks (default: a "
            "process the profiler never attached to)")


@dataclass(frozen=True)
class WhatIfParams:
    """The changes a what-if replays (``scale``: the library takes a dict selector -> factor too)."""

    scale: tuple[str, ...] | dict[str, float] = option(
        (), "multiply the durations of GEMM, non-GEMM, communication, unclassified, a category, op:NAME or "
            "kernel:REGEX activities by FACTOR (0.5 = twice as fast; repeatable, the last matching wins)",
        metavar="SELECTOR=FACTOR", repeat=True)
    cpu_scale: float = option(1.0, "host work takes F times as long", metavar="F")
    launch_us: float | None = option(None, "every launch call costs X us", metavar="X")
    graphs: bool = option(False, "replay each step's launches as CUDA graphs")
    graph_launch_us: float | None = option(None, "with --graphs: one graph replay call costs X us (default: as the "
                                                 "trace's graph launches, else 1.6 us per replayed activity)",
                                           metavar="X")
    autocast: str | None = option(None, "the step under torch.autocast to this dtype: adds the casts and the host "
                                        "work autocast brings (the kernels' own speed-up is your --scale, e.g. "
                                        "GEMM=0.3)", choices=AUTOCAST_DTYPES)
    unprofiled_step_us: float | None = option(None, UNPROFILED, metavar="X")
    attached: bool = option(False, ATTACHED)
