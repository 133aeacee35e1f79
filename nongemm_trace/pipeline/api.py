"""``analyze``: the one-call entry of the Python API, a thin wrapper over
:class:`~nongemm_trace.pipeline.analysis.Analysis`.

load -> link -> classify -> measure; returns a :class:`~nongemm_trace.models.Report`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from . import measure  # noqa: F401  (the pipeline and polars, imported with the entry point as before)
from .analysis import Analysis, needs_python, open_analysis

if TYPE_CHECKING:  # pragma: no cover
    from ..classify.taxonomy import Taxonomy
    from ..models.report import Report
    from .options import AnalysisOptions


def analyze(
    path: str | Path | Analysis,
    *,
    metric: str | None = None,
    level: str | None = None,
    taxonomy: str | Path | Taxonomy | None = None,
    drop_unlinked: bool = False,
    step_marker: str | None = None,
    skip_steps: int = 0,
    keep_python: bool = False,
    progress: Callable[[int, int], None] | None = None,
    layer_info: str | Path | None = None,
    options: AnalysisOptions | None = None,
) -> Report:
    """Analyse one trace file (or an :class:`Analysis` already open).

    taxonomy: a built-in name, a TOML file or a :class:`Taxonomy` (default: ``default``, or the analysis' own).

    metric: ``gpu`` (GPU activity time), ``cpu`` (operator CPU time) or ``paper`` (cpu + gpu,
        the NonGEMM artifact's metric); default: the taxonomy's (``gpu`` for ``default``).
    level: ``launch`` (the op that launched each activity), ``top`` (outermost real op) or
        ``module`` (innermost named nn.Module); default: the taxonomy's (``launch`` for ``default``).
    drop_unlinked: leave out activities with no launch call in the file.
    step_marker / skip_steps: choose the step ranges, drop the first N steps (warm-up).
    keep_python: keep ``python_function`` events in the loaded tables (the module level does anyway).
    progress: called as ``progress(bytes_read, file_size)`` while the file is read.
    layer_info: a TensorRT profile's layer-information file (default: the one next to it by name).
    options: the same options as one :class:`~.options.AnalysisOptions` (a keyword given beside it wins).
    """
    if options is not None:
        given = {"metric": metric, "level": level, "taxonomy": taxonomy, "drop_unlinked": drop_unlinked,
                 "step_marker": step_marker, "skip_steps": skip_steps, "keep_python": keep_python,
                 "layer_info": layer_info}
        merged = {**options.given(), **{k: v for k, v in given.items() if v not in (None, False, 0)}}
        return analyze(path, progress=progress, **merged)
    analysis, typed = open_analysis(path, {
        "taxonomy": taxonomy, "keep_python": keep_python or needs_python(level), "progress": progress,
        "layer_info": layer_info, "metric": metric, "level": level, "drop_unlinked": drop_unlinked,
        "step_marker": step_marker, "skip_steps": skip_steps})
    return analysis.report(typed)
