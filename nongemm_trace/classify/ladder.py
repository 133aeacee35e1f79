"""The decision ladder as one table of rules, folded once per use.

Each :class:`Rule` says when it applies, which category it gives, its name (the ``rule``
column of every activity), the evidence rung the category rests on and what it means for a
reader. The classifier, the call-level category every command reads (host time, CPU time,
FLOPs, annotate) and ``explain``'s text all come from this table, so a rule cannot be added to
one of them and forgotten in another.

Stages, in the order the rules are tried:

* ``engine`` — a deployment stack's layer or node, decided per distinct evidence row by
  :mod:`.engines` (its ``engine_rule`` column names the rule);
* ``activity`` and ``call`` — the launch level: ``call`` rules read the launching op's own
  columns (its dataflow, backward node, written-out operation, enclosing op, name) and are
  folded once per op (:func:`call_fold`); on an activity they stand where they sit in the table;
* ``top`` and ``module`` — the levels above launch, tried before the launch-level answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl

from .taxonomy import Taxonomy

if TYPE_CHECKING:
    from polars.expr.whenthen import ChainedThen, Then


@dataclass(frozen=True)
class Context:
    """What the rules read besides the columns, from the taxonomy: its generic categories, its
    activity kinds, the category of host-device copies and whether an unnamed top op falls back."""

    generic: tuple[str, ...]
    kinds: dict[str, str] = field(default_factory=dict)
    transfer_category: str | None = None
    top_fallback: bool = True

    @staticmethod
    def of(tax: Taxonomy) -> Context:
        return Context(tuple(tax.semantics.generic_categories), dict(tax.activity_kinds),
                       tax.transfers[1] if tax.transfers else None, bool(tax.top_fallback))

    def is_generic(self) -> pl.Expr:
        """A call whose name gives no category, or a generic one (copy, fill, arithmetic)."""
        return pl.col("op_category").is_null() | pl.col("op_category").is_in(list(self.generic))

    def kind_category(self) -> pl.Expr:
        return (pl.col("kind").replace_strict(self.kinds, default=None, return_dtype=pl.Utf8) if self.kinds
                else pl.lit(None, pl.Utf8))


Expr = Callable[[Context], pl.Expr]


@dataclass(frozen=True)
class Rule:
    """One step of the ladder. ``when`` is None for the last rule of a stage (it always applies);
    ``evidence_column``, when set, holds the rung per row (``evidence`` fills its nulls: a kernel
    rule says itself whether it names a family or a generic word)."""

    stage: str
    name: str
    when: Expr | None
    category: Expr
    evidence: str
    text: str
    evidence_column: str | None = None


def _col(name: str) -> Expr:
    """A column's value as text: the ops' category columns are categorical codes (link_and_classify)."""
    return lambda c: pl.col(name).cast(pl.String)


def _engine(name: str, evidence: str, text: str) -> Rule:
    return Rule("engine", name, lambda c: pl.col("engine_rule") == name, _col("engine_category"), evidence, text)


def _flag(name: str) -> pl.Expr:
    return pl.col(name).fill_null(False)


def _KEEP(c: Context) -> pl.Expr:
    """Activities whose launch-level answer no level above overrides: an authoritative kernel
    (communication), a quantize/dequantize call, a host-device transfer."""
    return ~_flag("kernel_authoritative") & ~_flag("_lop_qdq") & ~pl.col("_transfer")

LADDER: tuple[Rule, ...] = (
    _engine("onnx_nodes", "semantics", "the ONNX nodes the layer or node runs"),
    _engine("layer_type", "semantics", "the layer's type (or its quantize/dequantize origin)"),
    _engine("region_inputs", "dataflow",
            "a GEMM node that reads one of the Myelin region's input tensors (onnx::MatMul_N)"),
    _engine("region_tactic", "family", "the Myelin region's tactic, a GEMM kernel by the kernel-name rules"),
    _engine("region_endpoints", "generic",
            "the ONNX nodes at the ends of a region that shows no GEMM (one inside would not show)"),
    Rule("activity", "transfer", lambda c: pl.col("_transfer"), lambda c: pl.lit(c.transfer_category, pl.Utf8),
         "semantics", "a copy between host and device memory (the taxonomy's [transfers])"),
    Rule("activity", "kernel_name", lambda c: _flag("kernel_authoritative"), _col("kernel_category"),
         "generic", "the kernel-name rules", "kernel_evidence"),
    Rule("call", "qdq_dataflow", lambda c: _flag("qdq_call"), lambda c: pl.lit("qdq"),
         "dataflow", "a quantize/dequantize dataflow its launching op is part of"),
    Rule("call", "forward_op", lambda c: pl.col("backward_category").is_not_null() & c.is_generic(),
         _col("backward_category"), "semantics",
         "the forward op its backward node differentiates (autograd sequence number), in its context"),
    Rule("call", "op_pattern", lambda c: pl.col("chain_category").is_not_null() & c.is_generic(),
         _col("chain_category"), "dataflow",
         "a written-out operation its launching op is part of (e.g. RMSNorm as pow/mean/rsqrt/mul)"),
    Rule("call", "enclosing_op",
         lambda c: pl.col("enclosing_category").is_not_null() & c.is_generic() & pl.col("op_category").is_not_null(),
         _col("enclosing_category"), "semantics", "the category of the specific op around its generic launching op"),
    Rule("call", "launch_op", None, _col("op_category"), "semantics", "the launching op's category"),
    Rule("activity", "activity_kind", lambda c: c.kind_category().is_not_null(), lambda c: c.kind_category(),
         "semantics", "its kind (memcpy/memset)"),
    Rule("activity", "kernel_name", lambda c: pl.col("kernel_category").is_not_null(), _col("kernel_category"),
         "generic", "the kernel-name rules", "kernel_evidence"),
    Rule("activity", "none", None, lambda c: pl.lit("unclassified"), "none", "no rule (unclassified)"),
    Rule("top", "top_op", lambda c: pl.col("_top_cat").is_not_null() & ~_flag("_top_comp") & _KEEP(c),
         _col("_top_cat"), "semantics", "the top-level op's category"),
    # a taxonomy without fallback (the paper's) leaves activities under unnamed top ops unclassified
    Rule("top", "none", lambda c: pl.lit(not c.top_fallback) & pl.col("top_op").is_not_null()
         & pl.col("_top_cat").is_null() & _KEEP(c), lambda c: pl.lit("unclassified"), "none",
         "no rule (unclassified)"),
    Rule("module", "module", lambda c: pl.col("module_category").is_not_null() & ~_flag("kernel_authoritative")
         & ~pl.col("_transfer"), _col("module_category"), "semantics", "the enclosing nn.Module's category"),
)

#: what each rule means for a reader, by rule name
RULE_TEXT: dict[str, str] = {r.name: r.text for r in LADDER}

STAGES = ("engine", "activity", "call", "top", "module")


def _fold(steps: Iterable[tuple[pl.Expr | None, pl.Expr, pl.Expr]],
          otherwise: tuple[pl.Expr, pl.Expr]) -> tuple[pl.Expr, pl.Expr]:
    """``(category, rule)`` of ``(when, category, rule)`` steps tried in order; a step with no
    condition ends the chain."""
    cat: Then | ChainedThen | None = None
    rule: Then | ChainedThen | None = None
    for when, c, r in steps:
        if when is None:
            otherwise = (c, r)
            break
        cat = pl.when(when).then(c) if cat is None else cat.when(when).then(c)
        rule = pl.when(when).then(r) if rule is None else rule.when(when).then(r)
    if cat is None or rule is None:
        return otherwise
    return cat.otherwise(otherwise[0]), rule.otherwise(otherwise[1])


def call_fold(ctx: Context, skip: tuple[str, ...] = ()) -> tuple[pl.Expr, pl.Expr]:
    """``(category, rule)`` of one op call from the ``call`` rules (those named in ``skip`` left
    out): the launch level's ladder read per call. Every command reads calls through this."""
    steps = [(r.when(ctx) if r.when else None, r.category(ctx), pl.lit(r.name))
             for r in LADDER if r.stage == "call" and r.name not in skip]
    return _fold(steps, (pl.lit(None, pl.Utf8), pl.lit("none")))


def call_category(generic: Iterable[str], backward: bool = True) -> pl.Expr:
    """One op call's category from its context (the call rules read only the taxonomy's generic
    categories): qdq dataflow, then, for a generic call, the forward op of its backward node
    (when ``backward``), the written-out operation it is part of, the specific op around it;
    else its name's."""
    return call_fold(Context(tuple(generic)), skip=() if backward else ("forward_op",))[0]


def launch_fold(ctx: Context, engine: bool) -> tuple[pl.Expr, pl.Expr]:
    """``(category, rule)`` of an activity at the launch level. The launching op's ``call``
    answer is read from its folded columns ``_lop_cat`` / ``_lop_rule`` (one fold per op),
    and counts only when it names a category and the op is no wrapper."""
    use_lop = pl.col("_lop_cat").is_not_null() & ~pl.col("_lop_wrap").fill_null(True)
    steps: list[tuple[pl.Expr | None, pl.Expr, pl.Expr]] = []
    for i, r in enumerate(LADDER):
        if r.stage == "call":  # the call rules, where they stand: one step, their fold already made
            if LADDER[i - 1].stage != "call":
                steps.append((use_lop, pl.col("_lop_cat"), pl.col("_lop_rule")))
        elif r.stage == "activity" or (engine and r.stage == "engine"):
            steps.append((r.when(ctx) if r.when else None, r.category(ctx), pl.lit(r.name)))
    return _fold(steps, (pl.lit("unclassified"), pl.lit("none")))


def level_fold(ctx: Context, level: str, launch: tuple[pl.Expr, pl.Expr]) -> tuple[pl.Expr, pl.Expr]:
    """``(category, rule)`` at ``level`` (``top`` or ``module``): its own rules, else ``launch``."""
    steps = [(r.when(ctx), r.category(ctx), pl.lit(r.name)) for r in LADDER if r.stage == level and r.when]
    return _fold(steps, launch)


def evidence_of(rule: pl.Expr) -> pl.Expr:
    """The rung an activity's category rests on, from the rule that gave it."""
    per_row = {r.name: r for r in LADDER if r.evidence_column}
    fixed = {r.name: r.evidence for r in LADDER if not r.evidence_column}
    out = rule.replace_strict(fixed, default="none", return_dtype=pl.Utf8)
    for name, r in per_row.items():
        out = pl.when(rule == name).then(pl.col(r.evidence_column).cast(pl.String).fill_null(r.evidence)).otherwise(out)  # type: ignore[arg-type]
    return out
