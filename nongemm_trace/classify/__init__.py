"""Classify ops and GPU activities into categories and classes.

Rules run once per unique op name and once per unique kernel name; the results
are joined back onto the tables. An activity's category at level ``launch``:

1. a memcpy between host and device is a transfer (the taxonomy's ``[transfers]``), whatever
   launched it;
2. else an *authoritative* kernel rule (communication kernels) wins;
3. else the category of its launching op, when that op is a real operator a rule names —
   taken from the op's dataflow (a quantize/dequantize chain, a written-out operation such
   as RMSNorm) or the specific op around a generic one (:mod:`.semantics`) before its name;
4. else its kind (memcpy / memset are memory: a fact of the activity, semantic evidence even in
   a trace without ops);
5. else the kernel-name rules;
6. else ``unclassified``.

At level ``top`` the top-level op's category replaces step 3 (unless the top op is
composite or named by no rule, when the launch-level answer stands).
"""

from __future__ import annotations

import polars as pl

from ..core.frames import add_columns, lookup_columns, outermost_up, per_value
from ..core.trace import Trace
from ..link import Linked, link
from .backward import backward_category
from .calls import qdq_calls
from .engines import is_engine, with_engine_columns
from .ladder import Context, call_fold, evidence_of, launch_fold, level_fold
from .modules import module_of_activities, module_table
from .rules import inductor_fused_ops, is_composite, is_wrapper, kernel_verdict, op_category
from .semantics import chain_category, enclosing_category
from .taxonomy import Taxonomy, load_taxonomy
from .vector_match import any_match

__all__ = ["classify", "link_and_classify", "load_taxonomy", "Taxonomy", "LEVELS", "EVIDENCE"]

from ..vocabulary import EVIDENCE, LEVELS


def op_name_table(tax: Taxonomy, ops: pl.DataFrame) -> pl.DataFrame:
    """One row per unique (name, cat) of ``ops`` (text or categorical columns): its category,
    wrapper and composite flags. The rules run in Python only for the names a rule could name
    (:func:`_ruled_by_nothing`): an annotation no rule names (a million distinct ``ProfilerStep#N``
    took 16 s here, 16 us a name) is a wrapper with no category, found in a few passes over the
    column (:mod:`.vector_match`)."""
    uniq = ops.select("name", "cat").unique().select(pl.col("name", "cat").cast(pl.String))  # codes, then text once
    plain = _ruled_by_nothing(tax, uniq)
    rows = []
    for name, cat in uniq.filter(~plain).iter_rows():
        oc, _ = op_category(tax, name, use_tokens=cat not in tax.annotation_categories)
        rows.append((name, cat, oc, is_wrapper(tax, name, cat, oc), is_composite(tax, name)))
    schema = {"name": pl.Utf8, "cat": pl.Utf8, "op_category": pl.Utf8, "is_wrapper": pl.Boolean,
              "is_composite": pl.Boolean}
    quiet = uniq.filter(plain)
    quiet = quiet.with_columns(pl.lit(None, pl.Utf8).alias("op_category"), pl.lit(True).alias("is_wrapper"),
                               (pl.col("name").is_in(list(tax.composite_names))
                                | any_match(tax.compiled.composite, quiet["name"])).alias("is_composite"))
    return pl.concat([pl.DataFrame(rows, schema=schema, orient="row"), quiet.select(list(schema))]) \
        .with_columns(pl.col(c).cast(ops.schema[c]) for c in ("name", "cat"))  # as ``ops`` holds them


def _ruled_by_nothing(tax: Taxonomy, uniq: pl.DataFrame) -> pl.Series:
    """The (name, cat) rows :func:`.rules.op_category` gives no category, known without running it:
    an annotation (no token rules) whose name and name after the last ``::`` no op name holds, that
    is not an Inductor launch (``triton_``) or a backward node (``_backward``, ``Backward``), and
    that no op pattern matches. Such a row is a wrapper (an annotation with no category,
    :func:`.rules.is_wrapper`); only its composite flag is left to find. Every other row goes
    through the rules as before."""
    name = pl.col("name")
    base = name.str.replace(r"(?s)^.*::", "")  # ``name.rsplit("::", 1)[-1]``: greedy, the last ``::``
    cond = (pl.col("cat").is_in(list(tax.annotation_categories)) & name.is_not_null()
            & ~name.is_in(list(tax.op_full)) & ~base.is_in(list(tax.op_base)))
    if tax.fusion_enabled:
        cond &= ~name.str.starts_with("triton_")
    if tax.derive_backward:
        cond &= ~name.str.contains("_backward", literal=True) & ~name.str.contains("Backward", literal=True)
    plain = uniq.select(cond.fill_null(False)).to_series()
    return plain & ~any_match(tax.compiled.op_patterns, uniq["name"])


def kernel_name_table(tax: Taxonomy, acts: pl.DataFrame) -> pl.DataFrame:
    """One row per unique kernel name: its kernel-rule category, authority, evidence (``family`` or
    ``generic``) and Inductor fused ops."""
    rows = []
    for (name,) in acts.select("name").unique().iter_rows():
        kc, auth, evidence, _ = kernel_verdict(tax, name)
        fused = inductor_fused_ops(tax, name)
        rows.append((name, kc, auth, evidence, ",".join(fused) if fused else None))
    return pl.DataFrame(rows, schema={"name": pl.Utf8, "kernel_category": pl.Utf8, "kernel_authoritative": pl.Boolean,
                                      "kernel_evidence": pl.Utf8, "fused_ops": pl.Utf8}, orient="row") \
        .with_columns(pl.col("name").cast(acts.schema["name"]))  # as ``acts`` holds them (the join key)


def _with_name_columns(ops: pl.DataFrame, tax: Taxonomy) -> pl.DataFrame:
    """``ops`` with the columns of :func:`op_name_table` for its (name, cat). Names and categories
    are cast to categorical codes once: the unique pairs are found and joined back on the codes
    (hashing millions of strings twice cost 0.3 s at 1 GB of JSON, and 60 MB of scratch memory at
    200 MB, at the run's peak). The codes stay referenced until both sides are cast: a value may
    get another code in a later cast once nothing holds the first."""
    codes = ops.select(pl.col("name").cast(pl.Categorical), pl.col("cat").cast(pl.Categorical))
    names = op_name_table(tax, codes)
    got = codes.join(names.with_columns(pl.col("name").cast(pl.Categorical), pl.col("cat").cast(pl.Categorical)),
                     on=["name", "cat"], how="left", nulls_equal=True, maintain_order="left")
    return ops.with_columns(got.drop("name", "cat").with_columns(pl.col("op_category").cast(pl.Categorical)))


def _as_codes(df: pl.DataFrame) -> pl.DataFrame:
    """The category columns of the op table as categorical codes: 4 bytes a row where a text column
    holds a 16-byte view (four of them over every op took 100 MB at 1 GB of JSON); the rules read them
    as text (:func:`.ladder.call_fold`), once per op or activity they fold."""
    return df.with_columns(pl.col(c).cast(pl.Categorical) for c in df.columns if c.endswith("_category"))


def link_and_classify(trace: Trace, tax: Taxonomy) -> Linked:
    """Link the trace with this taxonomy's wrapper rules and attach op categories."""
    ops = _with_name_columns(trace.ops, tax).with_columns(pl.col("is_wrapper").fill_null(False))
    linked = link(trace, ops)
    # the top-level op: the outermost real operator above (or at) the launching op
    linked.ops = outermost_up(linked.ops, "is_wrapper", "top_id")
    linked.activities = lookup_columns(linked.activities, "launch_op_id",
                                       linked.ops.select("op_id", pl.col("top_id").alias("top_op_id")), "op_id")
    flags = qdq_calls(linked.ops, tax)
    linked.ops = add_columns(linked.ops, flags, "op_id").with_columns(pl.col("qdq_call").fill_null(False))
    context = chain_category(linked.ops, tax).join(enclosing_category(linked.ops, tax), on="op_id", how="left")
    linked.ops = add_columns(linked.ops, _as_codes(context), "op_id")
    # the backward pass: each node's generic work takes its forward op's category (sequence numbers)
    linked.ops = add_columns(linked.ops, _as_codes(backward_category(linked.ops, tax)), "op_id")
    return linked


#: the op columns the call rules and the activity columns taken from an activity's op read
_CALL_COLUMNS = ("name", "op_category", "chain_category", "enclosing_category", "backward_category", "qdq_call",
                 "is_wrapper", "is_composite")


def _per_activity(acts: pl.DataFrame, key: str, ops: pl.DataFrame, *exprs: pl.Expr) -> list[pl.Series]:
    """``exprs`` over the op columns of each activity's op ``key`` (null where it has none): the
    columns are gathered to the activities first, then the rules folded, once per activity rather
    than over every op of the trace (whose text results were the classify stage's peak)."""
    cols = [c for c in _CALL_COLUMNS if c in ops.columns]
    rows = lookup_columns(acts.select(key), key, ops.select("op_id", *cols), "op_id")
    return rows.select(*exprs).get_columns()


def classify(linked: Linked, tax: Taxonomy, level: str = "launch") -> pl.DataFrame:
    """Return the activities table with ``launch_op``, ``top_op``, ``module``, ``op``, ``category``,
    ``class``, ``fused_ops`` and ``rule`` (which step of the decision gave the category)."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}")
    ops = linked.ops
    acts = linked.activities
    engine = is_engine(acts)
    if engine:  # a deployment stack's layers or nodes: their ONNX nodes and layer types decide first
        acts = with_engine_columns(tax, acts)
    kn = kernel_name_table(tax, acts)
    # only the names go through the join (a left join copies every column of the activities: 100 bytes
    # a row of a GPU-only trace, beside the linked table that still holds them), and the texts are
    # gathered as codes (4 bytes a row, each text held once), as classify() returns them
    acts = add_columns(acts, kn.with_columns(pl.col("kernel_category", "kernel_evidence", "fused_ops")
                                             .cast(pl.Categorical)), "name")
    # the launching op's answer from the call rules, folded once per op; a top-level op that is one
    # call of a written-out operation (or a backward node's) counts as that operation too
    ctx = Context.of(tax)
    lop_cat, lop_rule = call_fold(ctx)
    top_cat, _ = call_fold(ctx, skip=("qdq_dataflow", "enclosing_op"))
    acts = acts.with_columns(
        *_per_activity(acts, "launch_op_id", ops, pl.col("name").alias("launch_op"), lop_cat.alias("_lop_cat"),
                      lop_rule.alias("_lop_rule"), pl.col("is_wrapper").alias("_lop_wrap"),
                      pl.col("qdq_call").alias("_lop_qdq")),
        *_per_activity(acts, "top_op_id", ops, pl.col("name").alias("top_op"), top_cat.alias("_top_cat"),
                      pl.col("is_composite").alias("_top_comp")))
    # host <-> device copies are memcpys: a trace without any needs no search of every name (+32 bytes a row)
    copies = bool(acts.select((pl.col("kind") == "memcpy").any()).item()) if acts.height else False
    transfer = (pl.col("kind") == "memcpy") & per_value(acts, "name", lambda e: e.str.contains(tax.transfers[0]),
                                                        pl.Boolean) if tax.transfers and copies else pl.lit(False)
    acts = acts.with_columns(transfer.fill_null(False).alias("_transfer"))
    hit = module_of_activities(acts, module_table(linked.trace.python, tax)) if level == "module" else None
    # the folds are row by row: made a block of rows at a time, their texts held for that block only
    blocks = [_fold_block(acts.slice(lo, FOLD_ROWS), ctx, tax, level, engine, hit)
              for lo in range(0, max(acts.height, 1), FOLD_ROWS)]
    folded = pl.concat(blocks).get_columns() if len(blocks) > 1 else blocks[0].get_columns()
    del blocks
    # columns that equal another one are that one, not a copy of its codes (4 bytes a row each; SAME)
    made = {s.name: s for s in folded}
    same = SAME.get(level, {})
    folded = [s if s.name not in same else (made[same[s.name]] if same[s.name] in made else acts[same[s.name]])
              .alias(s.name) for s in folded]
    # a column no row has a value in (``op`` and ``module`` of a trace without ops) as nulls never written
    acts = acts.with_columns(s if s.null_count() < s.len() else pl.repeat(None, s.len(), dtype=s.dtype, eager=True)
                             .alias(s.name) for s in folded)
    if engine:
        acts = acts.with_columns(pl.coalesce("engine_fused", "fused_ops").alias("fused_ops")).drop(
            "engine_category", "engine_rule", "engine_fused")
    acts = acts.drop("_lop_cat", "_lop_rule", "_lop_wrap", "_lop_qdq", "_top_cat", "_top_comp", "_transfer",
                     *(["module_category"] if "module_category" in acts.columns else []))
    # one column at a time: each text is let go as its codes are made (all at once held every text
    # column and its codes together, the classify stage's peak: 8 bytes a row for each)
    for c in _ACTIVITY_TEXT:
        if c in acts.columns and acts.schema[c] == pl.String:
            acts = acts.with_columns(pl.col(c).cast(pl.Categorical))
    return acts


#: rows per block of :func:`_fold_block` (each of its text columns costs 16 bytes a row while made: a
#: block's scratch is a few MB, and the blocks' loop a few hundred iterations at 20 M activities)
FOLD_ROWS = 1 << 16


def _fold_block(part: pl.DataFrame, ctx: Context, tax: Taxonomy, level: str, engine: bool,
                hit: pl.DataFrame | None) -> pl.DataFrame:
    """The columns the rules' folds give ``part`` (a block of the activities' rows): ``launch_category``,
    ``rule``, ``category``, ``op``, ``module``, ``class``, ``evidence`` (``module`` after ``rule`` at the
    module level), in the order classify() has always added them, as categorical codes. The folds read
    texts (the op names among them); made over every activity at once, those texts and the folds' own
    were the classify stage's peak (130-150 MB at 2 M kernels). ``hit``: the module level's
    ``activity_id, module, module_category``."""
    # the op names as text (the op table holds them as categorical codes, schema.py)
    part = part.with_columns(pl.col("launch_op", "top_op").cast(pl.String))
    launch_cat, launch_rule = launch_fold(ctx, engine)
    part = part.with_columns(launch_cat.alias("launch_category"), launch_rule.alias("rule"))
    launch = (pl.col("launch_category"), pl.col("rule"))
    if level == "top":
        cat, rule = level_fold(ctx, "top", launch)
        part = part.with_columns(cat.alias("category"), rule.alias("rule"), pl.col("top_op").alias("op"))
    elif level == "module":
        assert hit is not None
        part = part.join(hit, on="activity_id", how="left", maintain_order="left")
        cat, rule = level_fold(ctx, "module", launch)
        part = part.with_columns(cat.alias("category"), rule.alias("rule"),
                                 pl.coalesce(pl.col("module"), pl.col("launch_op")).alias("op"))
    else:
        part = part.with_columns(pl.col("launch_category").alias("category"), pl.col("launch_op").alias("op"))
    if "module" not in part.columns:
        part = part.with_columns(pl.lit(None, pl.Utf8).alias("module"))
    part = part.with_columns(
        pl.col("category").replace_strict(tax.classes, default="unclassified", return_dtype=pl.Utf8).alias("class"),
        evidence_of(pl.col("rule")).alias("evidence"),
    )
    made = ["launch_category", "rule", *(["module"] if level == "module" else []), "category", "op",
            *([] if level == "module" else ["module"]), "class", "evidence"]
    # the columns classify() takes from another one (``SAME``) and those with no value in the block
    # (``op`` and ``module`` without ops) as nulls never written
    same = SAME.get(level, {})
    out = part.select(pl.col(c).cast(pl.Categorical) if c not in same else pl.lit(None, pl.Categorical).alias(c)
                      for c in made)
    return out.with_columns(pl.repeat(None, out.height, dtype=pl.Categorical, eager=True).alias(c)
                            for c in made if out[c].null_count() == out.height)


#: level -> the columns of :func:`_fold_block` that equal another column, and which: at the launch level
#: the category is the launch category and the op the launching op, at the top level the op the top-level op
SAME = {"launch": {"category": "launch_category", "op": "launch_op"}, "top": {"op": "top_op"}}


#: the text columns link and classify add to every activity, held as categorical codes: 4 bytes a
#: row where a text column holds a 16-byte view each (most of a GPU-only trace's peak memory)
_ACTIVITY_TEXT = ("launch_op", "top_op", "op", "module", "launch_category", "category", "rule", "class",
                  "evidence", "kernel_category", "kernel_evidence", "fused_ops", "attribution")

