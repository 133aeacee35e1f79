"""The options of one analysis of a trace, as one typed and documented object: which taxonomy, which
level, which activities and steps count, what the loader keeps. The Python API, the command line (its
shared flags are built from these fields), the integrations and the pytest plugin all take this, and
:meth:`AnalysisOptions.selecting` is what the selection stage reads of it.

A contradiction is refused when the object is made, not deep inside an analysis: a negative
``skip_steps``, an unknown level or metric.

Every public entry takes it as ``options: AnalysisOptions | None``; :func:`keywords_of` is how one still
takes the keyword form it replaced (``launch_analysis(a, level="top")``) until
:data:`~nongemm_trace.core.deprecation.REMOVAL`, with the one deprecation warning, and
:func:`options_and_rest` the same for a function whose own keywords (a check's limits) carried them.

:class:`Options` is the same choice resolved against a taxonomy (its defaults filled in): the key an
:class:`~nongemm_trace.pipeline.analysis.Analysis` keeps each selection and report by, and what
:func:`~nongemm_trace.pipeline.selection.select` reads. It lives here, below the analysis, so that the
selection and measure stages name it without a type-only import back up into ``analysis.py``."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.deprecation import REMOVAL, deprecated
from ..core.fields import option
from ..errors import OptionError
from ..vocabulary import LEVELS, METRICS

if TYPE_CHECKING:  # pragma: no cover
    from ..classify.taxonomy import Taxonomy

#: the options the selection stage reads (which activities and steps an analysis sees)
SELECTING = ("level", "drop_unlinked", "step_marker", "skip_steps")


@dataclass(frozen=True)
class AnalysisOptions:
    """How one trace is analysed. ``None`` means the taxonomy's default."""

    taxonomy: Any = option(None, "built-in taxonomy name or a .toml file (default: default)", flags=("--taxonomy",))
    level: str | None = option(None, f"{'; '.join(f'{k}: {v}' for k, v in LEVELS.items())} (with_stack traces). "
                                     "Default: the taxonomy's", choices=tuple(LEVELS))
    drop_unlinked: bool = option(False, "leave out GPU activities with no launch call in the file (launched before "
                                        "profiling)")
    step_marker: str | None = option(None, "name of the ranges that mark steps (default: ProfilerStep#N, else a "
                                           "serving engine's iterations, 'sglang iteration' or 'vllm iteration', "
                                           "else the most repeated top-level annotation)", metavar="NAME")
    skip_steps: int = option(0, "drop the first N steps (warm-up)", metavar="N")
    metric: str | None = option(None, f"{'; '.join(f'{k}: {v}' for k, v in METRICS.items())} (the NonGEMM "
                                      "artifact's metric). Default: the taxonomy's", choices=tuple(METRICS))
    keep_python: bool = option(False, "keep python_function events (with_stack traces)")
    layer_info: str | Path | None = option(None, "a TensorRT profile's layer information (trtexec "
                                                 "--exportLayerInfo; default: the file next to the profile by name)",
                                           metavar="FILE")

    def __post_init__(self) -> None:
        if self.level is not None and self.level not in LEVELS:
            raise OptionError(None, f"unknown level '{self.level}' (choose from {', '.join(LEVELS)})", "level")
        if self.metric is not None and self.metric not in METRICS:
            raise OptionError(None, f"unknown metric '{self.metric}' (choose from {', '.join(METRICS)})", "metric")
        if isinstance(self.skip_steps, bool) or not isinstance(self.skip_steps, int) or self.skip_steps < 0:
            raise OptionError(None, "skip_steps must be >= 0", "skip_steps")

    @classmethod
    def of(cls, options: AnalysisOptions | dict[str, Any] | None) -> AnalysisOptions:
        """``options`` as this object (a dict of its fields' names, as the keyword API takes them)."""
        if isinstance(options, AnalysisOptions):
            return options
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(options or {}) - known)
        if unknown:
            raise TypeError(f"unknown option(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        return cls(**(options or {}))

    def given(self) -> dict[str, Any]:
        """The fields set to other than their defaults, as the keyword API takes them."""
        default = AnalysisOptions()
        return {f: getattr(self, f) for f in self.__dataclass_fields__ if getattr(self, f) != getattr(default, f)}

    def selecting(self) -> dict[str, Any]:
        """The options the selection stage reads, as :meth:`Analysis.selection` takes them."""
        return {k: getattr(self, k) for k in SELECTING}


#: what the keyword form of the API took besides the fields of :class:`AnalysisOptions`
_ALSO = ("progress",)


def keywords_of(options: AnalysisOptions | None, old: dict[str, Any], where: str,
                also: tuple[str, ...] = (), warn: bool = True) -> dict[str, Any]:
    """The options of a function that takes ``options``, the typed object, as the keyword set the stages
    read (its fields that are set). ``old``: the keywords it took in its place before (``level="top"``, …),
    which keep working until :data:`~nongemm_trace.core.deprecation.REMOVAL` with the one deprecation
    warning (a keyword given beside ``options`` wins, as it did); ``also``: the other keywords ``where``
    took with them (a check's limits). An unknown keyword is refused before any warning (``warn``: unless
    the caller gives its own, one for all its former keywords)."""
    if options is not None and not isinstance(options, AnalysisOptions):
        raise TypeError(f"{where}: options must be an AnalysisOptions, not {type(options).__name__}")
    if old:
        known = (*AnalysisOptions.__dataclass_fields__, *_ALSO, *also)
        unknown = sorted(set(old) - set(known))
        if unknown:
            raise TypeError(f"unknown option(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    if old and warn:
        deprecated(f"{where}(..., {', '.join(f'{k}=...' for k in old)})",
                   f"{where}(..., options=AnalysisOptions({', '.join(f'{k}=...' for k in old)}))", REMOVAL)
    return {**(options.given() if options is not None else {}), **old}


def options_and_rest(options: AnalysisOptions | None, given: dict[str, Any],
                     where: str) -> tuple[AnalysisOptions | None, dict[str, Any]]:
    """For a function whose keywords are its own (a check's limits) and took the options among them before:
    ``options`` with the fields among ``given`` folded in (deprecated, as :func:`keywords_of`), and the
    rest of ``given``, its own."""
    former = {k: v for k, v in given.items() if k in AnalysisOptions.__dataclass_fields__}
    rest = {k: v for k, v in given.items() if k not in former}
    if not former:
        return options, rest
    return AnalysisOptions(**keywords_of(options, former, where)), rest


def typed_at(path: str | Path | None, given: dict[str, Any]) -> AnalysisOptions:
    """``given`` (keywords named as the fields) as the typed object; a refused value names ``path``, as
    the stages did when they checked it."""
    try:
        return AnalysisOptions(**given)
    except OptionError as exc:
        raise OptionError(path, exc.problem, *exc.parameters) from None


@dataclass(frozen=True)
class Options:
    """The options of one report (the selection's and the metric). ``None`` means the taxonomy's default."""

    metric: str | None = None
    level: str | None = None
    drop_unlinked: bool = False
    step_marker: str | None = None
    skip_steps: int = 0

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def of(cls, options: AnalysisOptions | None) -> Options:
        """The report options of ``options`` (its taxonomy and what the loader keeps are not read here)."""
        return cls() if options is None else cls(*(getattr(options, k) for k in cls.names()))

    def resolved(self, tax: Taxonomy, path: str | Path | None = None) -> Options:
        """These options with the taxonomy's defaults filled in, each value checked."""
        metric = self.metric or tax.default_metric
        level = self.level or tax.default_level
        if metric not in METRICS:
            raise OptionError(path, f"unknown metric '{metric}' (choose from {', '.join(METRICS)})", "metric")
        if level not in LEVELS:
            raise OptionError(path, f"unknown level '{level}' (choose from {', '.join(LEVELS)})", "level")
        if not isinstance(self.skip_steps, int) or self.skip_steps < 0:
            raise OptionError(path, "skip_steps must be >= 0", "skip_steps")
        return Options(metric, level, bool(self.drop_unlinked), self.step_marker, self.skip_steps)

    def selecting(self) -> Options:
        """These options without the metric: what the selection stage reads (its cache key)."""
        return Options(None, self.level, self.drop_unlinked, self.step_marker, self.skip_steps)
