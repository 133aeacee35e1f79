"""nongemm-trace: where GPU time goes in profiler traces — GEMM vs non-GEMM operators.

    >>> import nongemm_trace
    >>> report = nongemm_trace.analyze("trace.json.gz")          # doctest: +SKIP
    >>> report.categories                                       # doctest: +SKIP

Pipeline: load -> link -> classify -> measure -> render (see DESIGN in the README).
"""

from __future__ import annotations

import logging as _logging
from typing import TYPE_CHECKING as _TYPE_CHECKING

from ._version import __version__
from .core import moved as _moved

# the package logs under its name (stages, at INFO); a library user sees nothing unless the
# application configures logging; the command line shows them with --verbose
_logging.getLogger(__name__).addHandler(_logging.NullHandler())

# the public names are imported on first use (PEP 562): ``import nongemm_trace.cli`` must not
# load polars before the command line has set the allocator up (see cli.py)
_PUBLIC = {
    "analyze": ".pipeline.api",
    "Analysis": ".pipeline.analysis",
    "launch_analysis": ".analyses.launch",
    "check": ".analyses.check",
    "compare": ".analyses.compare",
    "explain": ".analyses.explain",
    "annotate": ".writers.annotate",
    "weak_kernels": ".analyses.weak",
    "flops_analysis": ".analyses.flops",
    "LaunchReport": ".models",
    "Report": ".models",
    "FlopsReport": ".models",
    "Comparison": ".models",
    "BatchResult": ".models",
    "LatencyReport": ".models",
    "WhatIfReport": ".models",
    "CheckResult": ".models",
    "ShapesReport": ".models",
    "latency_analysis": ".analyses.latency",
    "whatif_analysis": ".analyses.latency",
    "TraceError": ".errors",
    "run": ".analyses",
    "AnalysisOptions": ".pipeline.options",
    "WhatIfParams": ".analyses.changes",
    "render": ".report",
    "Taxonomy": ".classify.taxonomy",
    "load_taxonomy": ".classify.taxonomy",
    "extend_taxonomy": ".classify.taxonomy",
}

__all__ = [*_PUBLIC, "__version__"]

if _TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    from .analyses import run as run
    from .analyses.changes import WhatIfParams as WhatIfParams
    from .analyses.check import check as check
    from .analyses.compare import compare as compare
    from .analyses.explain import explain as explain
    from .analyses.flops import flops_analysis as flops_analysis
    from .analyses.latency import latency_analysis as latency_analysis
    from .analyses.latency import whatif_analysis as whatif_analysis
    from .analyses.launch import LaunchReport as LaunchReport
    from .analyses.launch import launch_analysis as launch_analysis
    from .analyses.weak import weak_kernels as weak_kernels
    from .classify.taxonomy import Taxonomy as Taxonomy
    from .classify.taxonomy import extend_taxonomy as extend_taxonomy
    from .classify.taxonomy import load_taxonomy as load_taxonomy
    from .errors import TraceError as TraceError
    from .models.report import Report as Report
    from .pipeline.analysis import Analysis as Analysis
    from .pipeline.api import analyze as analyze
    from .pipeline.options import AnalysisOptions as AnalysisOptions
    from .report import render as render
    from .writers.annotate import annotate as annotate


_moved.install()  # old module paths: the module at its new path, with a DeprecationWarning


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'nongemm_trace' has no attribute '{name}'")
    value = getattr(_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def _module(module: str) -> Any:
    """The module of a public name, imported on first use (each a static import: no module but the
    native loader imports by a computed name)."""
    if module == ".pipeline.api":
        from .pipeline import api
        return api
    if module == ".pipeline.analysis":
        from .pipeline import analysis
        return analysis
    if module == ".pipeline.options":
        from .pipeline import options
        return options
    if module == ".analyses":
        from . import analyses
        return analyses
    if module == ".analyses.launch":
        from .analyses import launch
        return launch
    if module == ".analyses.check":
        from .analyses import check
        return check
    if module == ".analyses.compare":
        from .analyses import compare
        return compare
    if module == ".analyses.explain":
        from .analyses import explain
        return explain
    if module == ".writers.annotate":
        from .writers import annotate
        return annotate
    if module == ".analyses.weak":
        from .analyses import weak
        return weak
    if module == ".analyses.flops":
        from .analyses import flops
        return flops
    if module == ".analyses.changes":
        from .analyses import changes
        return changes
    if module == ".analyses.latency":
        from .analyses import latency
        return latency
    if module == ".models":
        from . import models
        return models
    if module == ".report":
        from . import report
        return report
    if module == ".errors":
        from . import errors
        return errors
    if module == ".classify.taxonomy":
        from .classify import taxonomy
        return taxonomy
    raise AttributeError(f"no public module {module}")


def __dir__() -> list[str]:
    """The public names and the loaded subpackages: no helper the module itself imports."""
    loaded = [n for n, v in globals().items() if not n.startswith("_") and getattr(v, "__name__", "")
              .startswith(f"{__name__}.") and type(v).__name__ in ("module", "Package")]
    return sorted({*__all__, *loaded})
