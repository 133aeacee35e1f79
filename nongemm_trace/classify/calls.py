"""Call-level rules: categories that belong to one call of an op, not to its name.

Quantization leaves no marker in a trace. FP8 / int8 dynamic quantization is plain
``abs``/``amax``/``div``/``clamp``/``to``/``copy_`` ops; what makes them
quantize/dequantize work is their dataflow:

* a **low-precision cast**: a ``to`` / ``_to_copy`` / ``copy_`` (…) call whose input
  types name an 8- or 4-bit type (``c10::Float8_e4m3fn``, ``signed char``,
  ``c10::qint8`` …), or whose dtype argument (``Concrete Inputs``) is one;
* the **scale computation** that feeds it: the run of sibling calls right before
  the cast that starts at an abs-max (``abs``/``amax``/``aminmax``) and holds only
  scale arithmetic and views (``div``, ``mul``, ``clamp``, ``reciprocal``, ``to`` …).

Both, and every call nested in them, are ``qdq``. The vocabulary is data (the
taxonomy's ``[qdq]`` section). Runs are found with forward/backward fills over
sibling groups (columnar, no per-event loop).
"""

from __future__ import annotations

import polars as pl

from ..core.frames import nearest_down, per_value
from .taxonomy import Taxonomy


def qdq_calls(ops: pl.DataFrame, tax: Taxonomy) -> pl.DataFrame:
    """Return ``op_id, qdq_call`` (true for calls inside a quantize/dequantize dataflow)."""
    q = tax.qdq
    if ops.height == 0 or not q.cast_ops:
        return ops.select("op_id", pl.lit(False).alias("qdq_call"))
    # most traces hold no low-precision cast: find that out on the cast-named calls alone, by the
    # distinct names (a million ``ProfilerStep#N`` mapped to their text five times took 3 s, +130 MB)
    names = ops.select(pl.col("name").unique())
    cast_names = names.filter(pl.col("name").cast(pl.String).str.replace(r"^.*::", "").is_in(list(q.cast_ops)))["name"]
    if cast_names.len() == 0:
        return ops.select("op_id", pl.lit(False).alias("qdq_call"))
    base = per_value(ops, "name", lambda e: e.str.replace(r"^.*::", ""), pl.String)
    types_hit = pl.col("input_type").cast(pl.Utf8).fill_null("").str.contains(q.type_pattern)
    # the second Concrete Input (the dtype code of to / _to_copy), read with a regex rather than
    # decoding every op's JSON list
    codes = pl.col("concrete_inputs").cast(pl.Utf8).str.extract(r'^\[\s*"[^"]*"\s*,\s*"(-?\d+)"', 1)
    code_hit = base.is_in(list(q.dtype_arg_ops)) & codes.is_in([str(c) for c in q.dtype_codes]).fill_null(False)
    is_cast = base.is_in(list(q.cast_ops)) & (types_hit | code_hit)
    casts = ops.filter(pl.col("name").is_in(cast_names.implode())).filter(is_cast)
    if casts.height == 0:  # no low-precision cast anywhere: nothing to trace back
        return ops.select("op_id", pl.lit(False).alias("qdq_call"))
    df = ops.select(
        "op_id", "pid", "tid", "parent_id", "ts_ns", "depth",
        pl.col("op_id").is_in(casts["op_id"].implode()).alias("_cast"),
        base.is_in(list(q.chain_start_ops)).alias("_start"),
        base.is_in(list(q.chain_ops) + list(q.chain_start_ops) + list(q.cast_ops)).alias("_chain"),
    )
    grp = ["pid", "tid", "parent_id"]
    # only sibling groups that hold a cast can hold a scale chain
    with_cast = df.filter(pl.col("_cast")).select(grp).unique()
    rest = df.join(with_cast, on=grp, how="anti", nulls_equal=True).select(
        "op_id", "parent_id", "depth", pl.lit(False).alias("qdq_self"))
    df = df.join(with_cast, on=grp, how="semi", nulls_equal=True)
    df = df.sort(grp + ["ts_ns", "op_id"], nulls_last=False).with_row_index("_pos")
    pos = pl.col("_pos").cast(pl.Int64)
    df = df.with_columns(
        pl.when(~pl.col("_chain")).then(pos).forward_fill().over(grp).alias("_last_break"),
        pl.when(pl.col("_start")).then(pos).forward_fill().over(grp).alias("_last_start"),
        pl.when(pl.col("_cast")).then(pos).backward_fill().over(grp).alias("_next_cast"),
        pl.when(~pl.col("_chain")).then(pos).backward_fill().over(grp).alias("_next_break"),
    )
    in_chain = (
        pl.col("_chain")
        & pl.col("_last_start").is_not_null()
        & (pl.col("_last_start") > pl.col("_last_break").fill_null(-1))
        & pl.col("_next_cast").is_not_null()
        & (pl.col("_next_cast") < pl.col("_next_break").fill_null(2**62))
    )
    df = df.with_columns((pl.col("_cast") | in_chain).alias("qdq_self"))
    flags = pl.concat([df.select("op_id", "parent_id", "depth", "qdq_self"), rest])
    # a call inside a qdq call is qdq: the flag goes down the tree
    marked = flags.select("op_id", "parent_id", "depth",
                          pl.when(pl.col("qdq_self")).then(True).otherwise(None).alias("qdq_call"))
    return nearest_down(marked, "qdq_call").with_columns(pl.col("qdq_call").fill_null(False))
