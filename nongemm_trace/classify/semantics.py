"""Categories that an op's *context* gives: the enclosing operation and the op pattern it is in.

Two rungs of the evidence ladder sit above kernel names (see docs/taxonomy.md):

* **semantics** — a generic implementation op (``clamp_min_``, ``copy_``, ``fill_``,
  ``mul``: categories the taxonomy lists as ``[semantics] generic_categories``) launched
  inside an op that names a specific operation (``relu_``, ``layer_norm``, ``dropout``:
  ``specific_categories``) does that operation's work: ``aten::relu_`` runs as
  ``aten::clamp_min_``, so its kernel is activation, not arithmetic. GEMM ops are not
  specific in this sense: the layout copies a ``matmul`` makes are memory work.
* **dataflow** — an operation written out as a run of sibling calls: RMSNorm as
  ``pow, mean, add, rsqrt, mul`` (Hugging Face Llama, Qwen, Mistral), GELU's tanh form,
  SiLU as ``sigmoid, mul``, the int32-accumulator dequantization after ``_int_mm``. The
  patterns are data (``[[chains]]``); matching is a sort and a few shifted columns per
  sibling group, never a loop per event.

Both results hold for a call and every call nested in it (:func:`nearest_down`).
"""

from __future__ import annotations

import polars as pl

from .taxonomy import Chain, Taxonomy


def nearest_down(ops: pl.DataFrame, value: str) -> pl.DataFrame:
    """``op_id`` and, for each op, the ``value`` column of itself or its nearest ancestor where it
    is not null (one join per tree level: the tree is shallow, the levels wide)."""
    tree = ops.select("op_id", "parent_id", "depth", value)
    if tree.height == 0 or tree[value].null_count() == tree.height:
        return tree.select("op_id", value)
    known = tree.filter(pl.col("depth").is_null() | (pl.col("depth") <= 0)).select("op_id", value)
    parts = [known]
    max_depth = int(tree["depth"].max() or 0)
    for d in range(1, max_depth + 1):
        level = tree.filter(pl.col("depth") == d)
        if level.height == 0:
            break
        level = level.join(known.rename({"op_id": "parent_id", value: "_p"}), on="parent_id", how="left")
        known = level.select("op_id", pl.coalesce(value, "_p").alias(value))
        parts.append(known)
    return pl.concat(parts)


def enclosing_category(ops: pl.DataFrame, tax: Taxonomy) -> pl.DataFrame:
    """``op_id, enclosing_category``: the category of the nearest op at or above each op that names
    a specific operation (null where none does, or where the taxonomy names no such categories)."""
    sem = tax.semantics
    if not sem.specific_categories or ops.height == 0:
        return ops.select("op_id", pl.lit(None, pl.Utf8).alias("enclosing_category"))
    # an operator, not a user annotation (free text that happens to name an operation)
    specific = (pl.col("op_category").is_in(list(sem.specific_categories)) & ~pl.col("is_wrapper").fill_null(False)
                & ~pl.col("is_composite").fill_null(False)
                & ~pl.col("cat").cast(pl.Utf8).is_in(list(tax.annotation_categories)).fill_null(False))
    marked = ops.select("op_id", "parent_id", "depth",
                        pl.when(specific).then(pl.col("op_category")).otherwise(None).alias("enclosing_category"))
    return nearest_down(marked, "enclosing_category")


def chain_category(ops: pl.DataFrame, tax: Taxonomy) -> pl.DataFrame:
    """``op_id, chain_category``: the category of the written-out operation each call belongs to
    (itself or an ancestor being one of the chain's calls), null elsewhere."""
    if not tax.chains or ops.height == 0:
        return ops.select("op_id", pl.lit(None, pl.Utf8).alias("chain_category"))
    base = pl.col("name").cast(pl.Utf8).str.replace(r"^.*::", "")
    words = {w for c in tax.chains for step in (*c.ops, *c.after, *c.follows) for w in step}
    grp = ["pid", "tid", "parent_id"]
    sib = ops.select("op_id", "pid", "tid", "parent_id", "depth", "ts_ns", base.alias("_base"))
    # only sibling groups holding every word of some chain can hold it
    cand = sib.filter(pl.col("_base").is_in(list(words)))
    if cand.height == 0:
        return ops.select("op_id", pl.lit(None, pl.Utf8).alias("chain_category"))
    groups = cand.select(grp).unique()
    sib = sib.join(groups, on=grp, how="semi", nulls_equal=True).sort(grp + ["ts_ns", "op_id"], nulls_last=False)
    hits = []
    for chain in tax.chains:
        hits.append(_chain_hits(sib, chain, grp))
    marked = pl.concat(hits).group_by("op_id").agg(pl.col("chain_category").first())
    flags = ops.select("op_id", "parent_id", "depth").join(marked, on="op_id", how="left")
    return nearest_down(flags, "chain_category")


def _is(col: pl.Expr, step: tuple[str, ...]) -> pl.Expr:
    return col.is_in(list(step)).fill_null(False)


def _chain_hits(sib: pl.DataFrame, chain: Chain, grp: list[str]) -> pl.DataFrame:
    """The calls of ``chain``'s occurrences in the sorted sibling table: ``op_id, chain_category``."""
    name = pl.col("_base")
    n = len(chain.ops)
    start = pl.lit(True)
    for k, step in enumerate(chain.ops):
        start = start & _is(name.shift(-k).over(grp), step)
    if chain.follows:  # the chain must come right after one of these calls (not itself part of it)
        start = start & _is(name.shift(1).over(grp), chain.follows)
    df = sib.with_columns(start.alias("_start"))
    if not df["_start"].any():
        return df.select("op_id", pl.lit(None, pl.Utf8).alias("chain_category")).head(0)
    member = pl.lit(False)
    for k in range(n):
        member = member | pl.col("_start").shift(k).over(grp).fill_null(False)
    # optional calls right after the chain, in order (each only when the ones before it are there)
    for j in range(len(chain.after)):
        starts_here = pl.col("_start").shift(n + j).over(grp).fill_null(False)
        member = member | (starts_here & _tail_ok(chain.after[:j + 1], grp))
    return df.filter(member).select("op_id", pl.lit(chain.category).alias("chain_category"))


def _tail_ok(steps: tuple[tuple[str, ...], ...], grp: list[str]) -> pl.Expr:
    """The last ``len(steps)`` calls up to this row are ``steps`` in order."""
    name = pl.col("_base")
    ok = pl.lit(True)
    last = len(steps) - 1
    for j, step in enumerate(steps):
        ok = ok & _is(name.shift(last - j).over(grp), step)
    return ok
