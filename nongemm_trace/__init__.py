"""nongemm-trace: where GPU time goes in profiler traces — GEMM vs non-GEMM operators.

    >>> import nongemm_trace
    >>> report = nongemm_trace.analyze("trace.json.gz")          # doctest: +SKIP
    >>> report.categories                                       # doctest: +SKIP

Pipeline: load -> link -> classify -> measure -> render (see DESIGN in the README).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import TYPE_CHECKING, Any

from ._version import __version__

# the public names are imported on first use (PEP 562): ``import nongemm_trace.cli`` must not
# load polars before the command line has set the allocator up (see cli.py)
_PUBLIC = {
    "analyze": ".pipeline.api",
    "Analysis": ".pipeline.analysis",
    "launch_analysis": ".analyses.launch",
    "check": ".analyses.check",
    "compare": ".analyses.compare",
    "explain": ".analyses.explain",
    "annotate": ".analyses.annotate",
    "weak_kernels": ".analyses.weak",
    "flops_analysis": ".flops",
    "LaunchReport": ".models",
    "Report": ".models",
    "FlopsReport": ".models",
    "Comparison": ".models",
    "BatchResult": ".models",
    "LatencyReport": ".models",
    "WhatIfReport": ".models",
    "latency_analysis": ".latency",
    "whatif_analysis": ".latency",
    "TraceError": ".errors",
    "Taxonomy": ".classify.taxonomy",
    "load_taxonomy": ".classify.taxonomy",
    "extend_taxonomy": ".classify.taxonomy",
}

__all__ = [*_PUBLIC, "__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from .analyses.annotate import annotate as annotate
    from .analyses.check import check as check
    from .analyses.compare import compare as compare
    from .analyses.explain import explain as explain
    from .analyses.launch import LaunchReport as LaunchReport
    from .analyses.launch import launch_analysis as launch_analysis
    from .analyses.weak import weak_kernels as weak_kernels
    from .classify.taxonomy import Taxonomy as Taxonomy
    from .classify.taxonomy import extend_taxonomy as extend_taxonomy
    from .classify.taxonomy import load_taxonomy as load_taxonomy
    from .errors import TraceError as TraceError
    from .flops import flops_analysis as flops_analysis
    from .latency import latency_analysis as latency_analysis
    from .latency import whatif_analysis as whatif_analysis
    from .models.report import Report as Report
    from .pipeline.analysis import Analysis as Analysis
    from .pipeline.api import analyze as analyze


#: modules that moved into the floors' folders (docs/architecture.md, "The tree"), importable by
#: their old path too (``import nongemm_trace.analysis``: scripts and monkeypatches written before
#: the move); the analyses whose old module name is now a public function (``check``, ``compare``,
#: ``explain``, ``annotate``) keep only the new path, as an old-path import would shadow the function
_MOVED = {
    "trace": "core.trace", "frames": "core.frames", "native": "core.native", "safe_write": "core.safe_write",
    "analysis": "pipeline.analysis", "selection": "pipeline.selection", "measure": "pipeline.measure",
    "api": "pipeline.api", "launch": "analyses.launch", "weak": "analyses.weak", "convert": "analyses.convert",
    "batch": "runs.batch", "batch_workers": "runs.batch_workers", "cli_args": "commands.args",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """An old path imports the module at its new one: the same module object, its own spec kept."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        head, _, tail = fullname.partition(".")
        if head != __name__ or tail not in _MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(f"{__name__}.{_MOVED[spec.name.partition('.')[2]]}")
        self._specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = self._specs.pop(module.__name__, module.__spec__)  # importlib set the alias's


if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    sys.meta_path.append(_MovedModules())


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'nongemm_trace' has no attribute '{name}'")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
