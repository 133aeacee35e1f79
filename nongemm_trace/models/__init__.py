"""The result models: what each analysis measured, as tables plus a JSON-ready dict.

One module per model; each has ``to_dict()`` (the documented JSON contract, versioned by
``vocabulary.SCHEMA_VERSION``) and ``from_dict()`` (a stored JSON document read back, so
``Model.from_dict(m.to_dict()).to_dict() == m.to_dict()``). The analyses build them;
renderers (:mod:`nongemm_trace.report`) only read them. Models import nothing but the
base modules (vocabulary, trace, devices).
"""

from .batch import BatchResult
from .comparison import Comparison
from .flops import FlopsReport
from .latency import LatencyReport, WhatIfReport
from .launch import LaunchReport
from .report import Report
from .shapes import ShapesReport
from .verdicts import Annotated, CheckResult, Explanation, WeakKernels

__all__ = ["Annotated", "BatchResult", "CheckResult", "Comparison", "Explanation", "FlopsReport", "LatencyReport",
           "LaunchReport", "Report", "ShapesReport", "WeakKernels", "WhatIfReport"]
