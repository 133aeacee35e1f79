"""The models of the answers that are documents rather than tables: ``check``'s verdict
(:class:`CheckResult`), ``explain``'s account of a name (:class:`Explanation`) and the kernels on weak
evidence (:class:`WeakKernels`). Each renders by its type like every other model
(:mod:`nongemm_trace.report`); their JSON is the document the functions returned before they were
models, so ``to_dict()`` of each is that document. Indexing an :class:`Explanation` or a
:class:`WeakKernels` reads its document, and a :class:`CheckResult` unpacks as
``violations, report`` (the tuple ``check`` returned before), and :class:`Annotated` (what ``annotate``
wrote) indexes as the dict of counts it was, so code written against either keeps working until
:data:`REMOVAL`, with the one deprecation warning (:mod:`nongemm_trace.core.deprecation`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core.deprecation import REMOVAL, deprecated
from .report import Report
from .short_repr import short_repr_text


@dataclass(repr=False)
class CheckResult:
    """Every limit ``check`` checked on ``trace``: ``violations`` (the broken ones, a list with
    ``.gates``: every limit with its measured value) and the breakdown ``report`` they were read from."""

    NAME: ClassVar[str] = "check"

    trace: str
    violations: list[Any]
    report: Report = field(repr=False)

    @property
    def ok(self) -> bool:
        return not self.violations

    def __iter__(self) -> Iterator[Any]:
        """``violations, report = check(...)``: the pair ``check`` returned before its result was a model
        (deprecated: read ``.violations`` and ``.report``)."""
        deprecated("unpacking check()'s result as (violations, report)", "its .violations and .report", REMOVAL)
        return iter((self.violations, self.report))

    def __repr__(self) -> str:
        """One line with the verdict: ``CheckResult(trace=…, ok=False, gates=2, broken=['max-share non-GEMM'])``."""
        gates = getattr(self.violations, "gates", None)
        return (f"CheckResult(trace={short_repr_text(self.trace)}, ok={self.ok}"
                + (f", gates={len(gates)}" if gates is not None else "")
                + (f", broken={[getattr(v, 'limit', v) for v in self.violations]!r}" if self.violations else "") + ")")

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"trace": self.trace, "ok": self.ok, "violations": [v.__dict__ for v in self.violations]}
        gates = getattr(self.violations, "gates", None)
        if gates is not None:
            doc["gates"] = [g.__dict__ for g in gates]
        return doc


class _Document:
    """A model whose content is one JSON document (``to_dict``); ``model[key]`` reads it."""

    document: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return self.document

    def __getitem__(self, key: str) -> Any:
        """The document's ``key`` (deprecated: the result was a dict; read ``.to_dict()[key]``)."""
        deprecated(f"indexing {type(self).__name__} (the dict it was)", f"{type(self).__name__}.to_dict()[key]",
                   REMOVAL)
        return self.document[key]

    def __contains__(self, key: object) -> bool:
        return key in self.document

    def __repr__(self) -> str:
        d = self.document
        parts = [f"trace={short_repr_text(str(d.get('trace')))}", f"taxonomy={d.get('taxonomy')!r}",
                 *(f"{k}=<{len(d[k])} item{'' if len(d[k]) == 1 else 's'}>" for k in self.LISTS if d.get(k))]
        return f"{type(self).__name__}({', '.join(parts)})"

    LISTS: ClassVar[tuple[str, ...]] = ()


@dataclass(repr=False)
class Explanation(_Document):
    """``explain``'s account of a name: for each op and kernel matching it, the rule its name meets
    and what the trace's calls got at each level. ``rules``: the text of each rule of the decision
    (the classifier's ladder), which the terminal view prints beside the rule's name."""

    NAME: ClassVar[str] = "explain"
    LISTS: ClassVar[tuple[str, ...]] = ("ops", "kernels")

    document: dict[str, Any]
    rules: dict[str, str] = field(default_factory=dict)


@dataclass(repr=False)
class WeakKernels(_Document):
    """The kernels with the most GPU time on weak evidence, each with a rule that would classify it."""

    NAME: ClassVar[str] = "weak"
    LISTS: ClassVar[tuple[str, ...]] = ("kernels",)

    document: dict[str, Any]


@dataclass(repr=False)
class Annotated(_Document):
    """What ``annotate`` wrote: the ``output`` file and how many ``ops`` and GPU ``activities`` it gave a
    category (``annotated["ops"]`` reads the count, as the dict it was)."""

    NAME: ClassVar[str] = "annotated"

    output: str
    ops: int
    activities: int

    @property
    def document(self) -> dict[str, Any]:  # type: ignore[override]
        return {"output": self.output, "ops": self.ops, "activities": self.activities}

    def __repr__(self) -> str:
        return f"Annotated(output={self.output!r}, ops={self.ops}, activities={self.activities})"
