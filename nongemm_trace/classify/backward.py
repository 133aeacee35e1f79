"""The backward pass takes the categories of the forward pass, through autograd's sequence numbers.

Autograd numbers every node it records: the forward op that made a node carries its
``Sequence number``, and so does the ``autograd::engine::evaluate_function: <Node>`` range
that runs the node in the backward pass. Names alone cannot say what a backward node
differentiates: RMSNorm written out as ``pow, mean, add, rsqrt, mul`` has a backward of
``PowBackward0``, ``MeanBackward1``, ``RsqrtBackward0`` and ``MulBackward0``, each an
arithmetic name, and a Linear's bias gradient is a ``sum`` the engine runs beside
``AddmmBackward0`` (reducing the broadcast bias's gradient to its shape). The number says
which forward op each node belongs to, and that op's category *in its context* (the
written-out operation or the specific op around it, as the forward pass was classified) is
the category of the generic work in the node's range.

Only a forward op of a specific category or a GEMM passes its category on: a generic forward
op (``add``, ``copy_``) says nothing its backward's own names do not. Everything generic in
the range counts: the node's own calls and what the engine runs beside it for the node's
outputs (reducing a broadcast gradient to its input's shape, summing the gradients of a
tensor's several consumers when the last of them arrives). A residual stream's gradient sum
thus counts with the node in whose range it runs (a norm's or a Linear's), as a module hook
sees it. The match is per process; a number that forward ops of more than one thread carry
is ambiguous (autograd counts per thread) and matches nothing.
"""

from __future__ import annotations

import polars as pl

from ..core.frames import nearest_down, starts_with
from .ladder import call_category
from .taxonomy import Taxonomy

#: the wrapper range autograd's engine opens around each node it runs
BACKWARD_NODE = "autograd::engine::evaluate_function"


def forward_context(tax: Taxonomy) -> pl.Expr:
    """An op's category in the forward pass: qdq dataflow, then a written-out operation or the
    specific op around a generic call, then its name's (the launch-level ladder, read per op)."""
    return call_category(tax.semantics.generic_categories, backward=False)


def backward_category(ops: pl.DataFrame, tax: Taxonomy) -> pl.DataFrame:
    """``op_id, backward_category``: for every op in a backward node's range, the forward-context
    category of the forward op with the node's sequence number (null: unmatched; ops outside every
    backward range may be left out, as for :func:`~nongemm_trace.core.frames.add_columns`)."""
    def none() -> pl.DataFrame:
        return ops.select("op_id", pl.lit(None, pl.Utf8).alias("backward_category")).head(0)

    # which categories are generic is the taxonomy's [semantics] word: without it (the paper's
    # taxonomy) there is no rule
    if (not tax.semantics.generic_categories or "seq" not in ops.columns or ops.height == 0
            or ops["seq"].null_count() == ops.height):
        return none()
    wrapper = starts_with(ops, "name", BACKWARD_NODE) & pl.col("seq").is_not_null()
    marked = ops.select("op_id", "parent_id", "depth", pl.when(wrapper).then(pl.col("seq")).alias("_bseq"))
    inside = nearest_down(marked, "_bseq")["_bseq"]  # nearest_down keeps the rows' order
    del marked
    if inside.null_count() == inside.len():
        return none()
    # the process and thread as categorical codes, taken once for both sides (equal texts, equal
    # codes while both are held): the group-by and the join run on integers, not on texts
    threads = ops.select(pl.col("pid").cast(pl.Categorical).to_physical().alias("_pid"),
                         pl.col("tid").cast(pl.Categorical).to_physical().alias("_tid"))
    # the forward ops: numbered, outside every backward range; the outermost one of each number
    # speaks for it (aten::linear, not the aten::t it runs under the same number). Their context is
    # worked out on them alone, and the answer joined to the ops inside backward ranges alone
    fwd = (ops.lazy().with_columns(threads).filter(pl.col("seq").is_not_null() & pl.lit(inside).is_null())
           .select("_pid", "_tid", "depth", "ts_ns", "seq", forward_context(tax).alias("_fwd")).collect()
           .sort("depth", "ts_ns")
           .group_by("_pid", "seq", maintain_order=True)
           .agg(pl.col("_fwd").first(), pl.col("_tid").n_unique().alias("_threads"))
           .filter((pl.col("_threads") == 1) & pl.col("_fwd").is_not_null()
                   & ~pl.col("_fwd").is_in(list(tax.semantics.generic_categories)))
           .select("_pid", pl.col("seq").alias("_bseq"), pl.col("_fwd").alias("backward_category")))
    # (in any order: the caller adds the column by op id; joined by the streaming engine, whose
    # scratch memory is a fraction of the in-memory join's)
    got = ops.select("op_id").with_columns(threads["_pid"], inside.alias("_bseq")).lazy() \
        .filter(pl.col("_bseq").is_not_null()).join(fwd.lazy(), on=["_pid", "_bseq"], how="inner") \
        .select("op_id", "backward_category").collect(engine="streaming")
    return got  # the ops inside backward ranges whose number a forward op speaks for (the rest: null)
