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
  patterns are data (``[[chains]]``); matching is one sort of the sibling calls and a few
  shifted columns, never a loop per event.

Both results hold for a call and every call nested in it (:func:`~nongemm_trace.core.frames.nearest_down`).
"""

from __future__ import annotations

import polars as pl

from ..core.frames import nearest_down
from .taxonomy import Chain, Taxonomy


def enclosing_category(ops: pl.DataFrame, tax: Taxonomy) -> pl.DataFrame:
    """``op_id, enclosing_category``: the category of the nearest op at or above each op that names
    a specific operation (null where none does, or where the taxonomy names no such categories)."""
    sem = tax.semantics
    if not sem.specific_categories or ops.height == 0:
        return ops.select("op_id", pl.lit(None, pl.Utf8).alias("enclosing_category"))
    # an operator, not a user annotation (free text that happens to name an operation)
    specific = (pl.col("op_category").is_in(list(sem.specific_categories)) & ~pl.col("is_wrapper").fill_null(False)
                & ~pl.col("is_composite").fill_null(False)
                & ~pl.col("cat").is_in(list(tax.annotation_categories)).fill_null(False))
    marked = ops.select("op_id", "parent_id", "depth",
                        pl.when(specific).then(pl.col("op_category")).otherwise(None).alias("enclosing_category"))
    return nearest_down(marked, "enclosing_category")


def chain_category(ops: pl.DataFrame, tax: Taxonomy) -> pl.DataFrame:
    """``op_id, chain_category``: the category of the written-out operation each call belongs to
    (itself or an ancestor being one of the chain's calls), null elsewhere."""
    if not tax.chains or ops.height == 0:
        return ops.select("op_id", pl.lit(None, pl.Utf8).alias("chain_category"))
    grp = ["pid", "tid", "parent_id"]
    # base names (the part after the last ::) worked out once per distinct name, not per call
    names = ops.group_by("name").len().with_columns(pl.col("name").cast(pl.Utf8)).with_columns(
        pl.col("name").str.replace(r"^.*::", "").alias("_base"))
    # counted for the chains' words only: a trace may hold a million distinct names (ProfilerStep#N)
    words = sorted({w for c in tax.chains for step in (*c.ops, *c.after, c.follows) for w in step})
    counts = dict(names.filter(pl.col("_base").is_in(words)).group_by("_base").agg(pl.col("len").sum()).iter_rows())
    viable = [c for c in tax.chains if all(any(counts.get(w, 0) for w in step)
                                           for step in (*c.ops, *((c.follows,) if c.follows else ())))]
    if not viable:  # some step of every chain never occurs: no chain can
        return ops.select("op_id", pl.lit(None, pl.Utf8).alias("chain_category"))
    base = pl.col("name").replace_strict(names["name"], names["_base"], return_dtype=pl.Utf8)  # text or categorical
    sib = ops.select("op_id", "pid", "tid", "parent_id", "depth", "ts_ns", base.alias("_base"))
    hits = []
    for chain in viable:
        steps = (*chain.ops, chain.follows) if chain.follows else chain.ops
        # a chain can only be in a sibling group that holds its rarest step: those groups alone
        rarest = min(steps, key=lambda step: sum(counts.get(w, 0) for w in step))
        groups = sib.filter(pl.col("_base").is_in(list(rarest))).select(grp).unique()
        part = sib.join(groups, on=grp, how="semi", nulls_equal=True).sort(grp + ["ts_ns", "op_id"], nulls_last=False)
        # sorted by group: a group number lets plain shifts stand in for per-group windows
        changed = pl.any_horizontal([pl.col(c).ne_missing(pl.col(c).shift(1)) for c in grp])
        part = part.with_columns(changed.fill_null(True).cum_sum().alias("_g"))
        hits.append(_chain_hits(part, chain))
    marked = pl.concat(hits).group_by("op_id").agg(pl.col("chain_category").first())
    flags = ops.select("op_id", "parent_id", "depth").join(marked, on="op_id", how="left")
    return nearest_down(flags, "chain_category")


def _at(k: int, step: tuple[str, ...]) -> pl.Expr:
    """The sibling ``k`` rows on (``k`` < 0: before) is in the same group and one of ``step``."""
    same = pl.col("_g").shift(-k) == pl.col("_g")
    return (same & pl.col("_base").shift(-k).is_in(list(step))).fill_null(False)


def _chain_hits(sib: pl.DataFrame, chain: Chain) -> pl.DataFrame:
    """The calls of ``chain``'s occurrences in the sorted sibling table: ``op_id, chain_category``."""
    n = len(chain.ops)
    start = pl.lit(True)
    for k, step in enumerate(chain.ops):
        start = start & _at(k, step)
    if chain.follows:  # the chain must come right after one of these calls (not itself part of it)
        start = start & _at(-1, chain.follows)
    df = sib.select("op_id", "_g", "_base", start.alias("_start"))
    if not df["_start"].any():
        return df.select("op_id", pl.lit(None, pl.Utf8).alias("chain_category")).head(0)
    member = pl.lit(False)
    for k in range(n):
        member = member | pl.col("_start").shift(k).fill_null(False)
    # optional calls right after the chain, in order (each only when the ones before it are there)
    for j in range(len(chain.after)):
        ok = (pl.col("_start").shift(n + j) & (pl.col("_g").shift(n + j) == pl.col("_g"))).fill_null(False)
        for i, step in enumerate(chain.after[:j + 1]):
            ok = ok & _at(i - j, step)
        member = member | ok
    return df.filter(member).select("op_id", pl.lit(chain.category).alias("chain_category"))
