"""nongemm-trace: where GPU time goes in profiler traces — GEMM vs non-GEMM operators.

    >>> import nongemm_trace
    >>> report = nongemm_trace.analyze("trace.json.gz")          # doctest: +SKIP
    >>> report.categories                                       # doctest: +SKIP

Pipeline: load -> link -> classify -> measure -> render (see DESIGN in the README).
"""

from ._version import __version__
from .api import analyze
from .classify.taxonomy import Taxonomy, extend_taxonomy, load_taxonomy
from .errors import TraceError
from .launch import LaunchReport, launch_analysis
from .report.model import Report

__all__ = ["analyze", "launch_analysis", "LaunchReport", "Report", "TraceError", "Taxonomy", "load_taxonomy", "extend_taxonomy", "__version__"]
