"""Small polars helpers shared by the pipeline stages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import polars as pl

from . import env


def int_scalar(value: Any) -> int:
    """A polars aggregate (``s.sum()``, ``s.max()``, ``df.item()``) as an ``int``: polars types every scalar
    as one broad union (numbers, dates, strings, lists), which ``int()`` does not take; this is the
    plain ``int()`` the call sites did, typed."""
    return int(value)


def number(value: Any) -> float:
    """A polars numeric aggregate, unchanged (an int stays an int), typed as the number it is."""
    return value


class ArrowCapsules:
    """A column from the C extensions (an Arrow ``(schema, array)`` PyCapsule pair) as an Arrow
    PyCapsule producer: polars takes its buffers without copying them and without pyarrow
    (whose import alone costs 40-90 MB of memory)."""

    __slots__ = ("_capsules",)

    def __init__(self, schema: Any, array: Any) -> None:
        self._capsules = (schema, array)

    def __arrow_c_array__(self, requested_schema: Any = None) -> tuple[Any, Any]:
        return self._capsules


def starts_with(df: pl.DataFrame, col: str, prefix: str) -> pl.Expr:
    """Whether each row's text in ``col`` starts with ``prefix``: a text or categorical column
    (the op table's names are categorical, schema.py), without a text copy of every row."""
    e = pl.col(col)
    return e.cat.starts_with(prefix) if df.schema[col] == pl.Categorical else e.str.starts_with(prefix)


def per_value(df: pl.DataFrame, col: str, fn: Any, dtype: Any) -> pl.Expr:
    """``fn`` (text expression -> expression of ``dtype``) of each row's ``col``, worked out once per
    distinct value and mapped back (``col`` text or categorical: no text copy of every row)."""
    uniq = df.select(pl.col(col).unique()).to_series()
    got = pl.DataFrame({col: uniq.cast(pl.String)}).select(fn(pl.col(col)).cast(dtype)).to_series()
    if uniq.dtype == pl.Categorical:  # mapped back by code: integers, not every distinct text
        return _by_code(col, uniq.to_physical(), got, dtype, df.height)
    return pl.col(col).replace_strict(uniq, got, default=None, return_dtype=dtype)


def _by_code(col: str, codes: pl.Series, got: pl.Series, dtype: Any, rows: int) -> pl.Expr:
    """:func:`per_value`'s mapping back for a categorical ``col``: ``got`` (the answer for each of the
    distinct ``codes``) written into a table indexed by code, and each row's answer gathered from it
    by its code (a lookup by position, where a replacement hashed every row's code); a null row
    takes the null value's answer, as the replacement gives it. Codes spread far (a process that
    holds many categorical texts) keep the replacement: the table would outgrow the column."""
    table = _code_table(codes, got, dtype, rows)
    if table is None:
        return pl.col(col).to_physical().replace_strict(codes, got, default=None, return_dtype=dtype)
    out = pl.lit(table.alias(col)).gather(pl.col(col).to_physical())
    at_null = got.filter(codes.is_null())
    if at_null.len() and at_null[0] is not None:
        out = pl.when(pl.col(col).is_null()).then(pl.lit(at_null[0], dtype)).otherwise(out)
    return out.alias(col)


def _code_table(codes: pl.Series, values: pl.Series, dtype: Any, rows: int) -> pl.Series | None:
    """A table indexed by categorical code holding ``values`` (one per distinct code of ``codes``; a null
    code's value is left out), to gather each row's answer by its code; None where the codes spread far
    past ``rows`` (a process that holds many categorical texts): the table would outgrow the column."""
    known = codes.is_not_null()
    top = int_scalar(codes.max() or 0)
    if top > 2 * rows + (1 << 16):
        return None
    table = pl.repeat(None, top + 1, dtype=dtype, eager=True)
    return table.scatter(codes.filter(known), values.filter(known)) if known.any() else table


def int_of_text(df: pl.DataFrame, col: str) -> pl.Expr:
    """``col`` (text or categorical: a thread or process id) as Int64, null where it is no integer;
    once per distinct value (polars casts no categorical to a number, and a text copy of a whole
    column is what the categorical saves)."""
    return per_value(df, col, lambda e: e.cast(pl.Int64, strict=False), pl.Int64)


def appearance_codes(*columns: pl.Series) -> list[pl.Series]:
    """Each value of ``columns`` (text or categorical) as a small integer (UInt32), one numbering for
    all of them, in the order values first appear (the first column's rows, then the next one's):
    sorting and joining on integers is several times faster than on text, and the numbers depend
    on the rows alone, not on the categorical codes polars gave the values (those depend on what
    else the process holds as categorical; thread numbers order ties downstream)."""
    codes = [c.cast(pl.Categorical).to_physical() for c in columns]
    seen = pl.concat(codes).unique(maintain_order=True)
    numbers = pl.int_range(seen.len(), dtype=pl.UInt32, eager=True)
    # a table indexed by categorical code, gathered by each row's code: a lookup by position where a
    # replacement hashed every row's code to find its number; a null (no code) is numbered too
    table = _code_table(seen, numbers, pl.UInt32, sum(c.len() for c in codes))
    if table is None:  # codes spread far (a process of many texts)
        return [c.replace_strict(seen, numbers, return_dtype=pl.UInt32).alias(col.name)
                for c, col in zip(codes, columns)]
    null_number = seen.is_null().arg_true()
    out = [table.gather(c) for c in codes]
    if null_number.len():
        out = [o.fill_null(null_number.cast(pl.UInt32)[0]) for o in out]
    return [o.alias(col.name) for o, col in zip(out, columns)]


def as_text(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with its categorical columns as text: a table joined with, or concatenated to, text
    columns from elsewhere (another loader's table, a result model) must match their type."""
    cats = [c for c, t in df.schema.items() if t == pl.Categorical]
    return df.with_columns(pl.col(cats).cast(pl.String)) if cats else df


def add_columns(df: pl.DataFrame, right: pl.DataFrame, on: str | list[str], *,
                nulls_equal: bool = False) -> pl.DataFrame:
    """``df`` with the non-key columns of ``right`` added by a left join on ``on``, rows kept in
    order. Only the key columns go through the join; the rest of ``df`` is not copied (a
    plain join followed by a sort would copy every column of a table of millions of rows twice)."""
    keys = [on] if isinstance(on, str) else list(on)
    filled = [c for c in right.columns if c not in keys and right[c].null_count() < right.height]
    if len(filled) + len(keys) < right.width:
        # columns with no value to attach (a trace without launch calls, kernels no rule fuses): nulls
        # made as such, where a join or a scatter writes a null per row and column
        nulls = {s.name: s for s in _nulls(df.height, right.drop(*keys, *filled).schema)}
        got = add_columns(df.select(keys), right.select(*keys, *filled), keys, nulls_equal=nulls_equal) \
            if filled else df.select(keys)
        return df.with_columns(got[c] if c in filled else nulls[c] for c in right.columns if c not in keys)
    if len(keys) == 1 and is_row_index(df[keys[0]]):
        return _scatter_columns(df, right, keys[0])
    got = df.select(keys).join(right, on=keys, how="left", nulls_equal=nulls_equal, maintain_order="left")
    if got.height != df.height:
        raise ValueError("add_columns: the right table's keys are not unique")
    return df.with_columns(got.drop(keys))


def lookup_columns(df: pl.DataFrame, key: str, table: pl.DataFrame, table_key: str) -> pl.DataFrame:
    """``df`` with the other columns of ``table`` for each row's ``key`` (a left join of ``df[key]``
    on ``table[table_key]``, unique there; rows kept in order, null where no row matches). When
    ``table_key`` is the row number (the loader numbers every table), the columns are gathered:
    no hash table over a table of millions of rows for a few hundred thousand lookups."""
    if table.height == 0:
        # nothing to find (a trace without ops): the join below would copy every column of ``df``
        return df.with_columns(_nulls(df.height, table.drop(table_key).schema))
    if is_row_index(table[table_key]):
        idx = df[key].cast(pl.Int64)
        idx = pl.select(pl.when((idx >= 0) & (idx < table.height)).then(idx)).to_series()
        return df.with_columns(table[c].gather(idx) for c in table.columns if c != table_key)
    return df.join(table.rename({table_key: key}), on=key, how="left", maintain_order="left")


def _nulls(height: int, schema: pl.Schema) -> list[pl.Series]:
    """A column of nulls per ``schema`` entry, made as such: its values are never written (pages the
    system gives only when touched), where a join or a gather writes a value per row."""
    return [pl.repeat(None, height, dtype=t, eager=True).alias(c) for c, t in schema.items()]


def is_row_index(s: pl.Series) -> bool:
    """``s`` is 0, 1, ..., n-1 (the id column the loader numbers every table with). Every fast path
    that gathers by row number asks here; ``NONGEMM_ROW_INDEX=off`` sends them all down their
    general paths (joins), to compare the two."""
    if env.is_off("NONGEMM_ROW_INDEX"):
        return False
    n = s.len()
    if n == 0 or s.null_count() or not s.dtype.is_integer() or not (s[0] == 0 and s[n - 1] == n - 1):
        return False
    # one pass a block: each block against its row numbers in one expression (the comparison and its
    # test fused): the differences of the whole column at once were 15 bytes a row of scratch memory,
    # asked for by every fast path at the measure stage's peak, and the differences block by block
    # took four passes over a block (and four calls into polars) where one does
    dtype: Any = s.dtype  # an integer type (checked above), as polars' typing wants it
    return all(pl.select((pl.lit(s.slice(lo, _ROW_BLOCK)) == pl.int_range(lo, min(lo + _ROW_BLOCK, n), dtype=dtype))
                         .all()).item() for lo in range(0, n, _ROW_BLOCK))


#: rows per block of :func:`is_row_index`'s check (its row numbers' scratch memory: a few MB at most)
_ROW_BLOCK = 1 << 18


def _scatter_columns(df: pl.DataFrame, right: pl.DataFrame, key: str) -> pl.DataFrame:
    """:func:`add_columns` when ``df[key]`` is the row number: the right table's rows are written
    to their positions (no hashing, no join of millions of keys); absent rows stay null."""
    idx = right[key]
    if idx.null_count():
        idx_ok = right.filter(pl.col(key).is_not_null())
        right, idx = idx_ok, idx_ok[key]
    if idx.n_unique() != idx.len():
        raise ValueError("add_columns: the right table's keys are not unique")
    in_range = (idx >= 0) & (idx < df.height)
    if not in_range.all():
        right = right.filter(in_range)
        idx = right[key]
    cols = []
    for name, dtype in right.drop(key).schema.items():
        base = pl.repeat(None, df.height, dtype=dtype, eager=True).alias(name)
        cols.append(base.scatter(idx.cast(pl.Int64), right[name]) if idx.len() else base)
    return df.with_columns(cols)


def nearest_down(ops: pl.DataFrame, value: str) -> pl.DataFrame:
    """``op_id`` and, for each op of an op tree (``op_id, parent_id, depth``), the ``value`` column
    of itself or its nearest ancestor where it is not null. Level by level from the shallowest valued
    op, each level joined only with the valued ops of the level above (the tree is shallow, the valued ops few)."""
    tree = ops.select("op_id", "parent_id", "depth", value)
    if tree.height and is_row_index(tree["op_id"]):
        return tree.select("op_id", _nearest_by_jumping(tree, value).alias(value))
    has = tree.filter(pl.col(value).is_not_null())
    if has.height == 0:
        return tree.select("op_id", value)
    top = int_scalar(has["depth"].min() or 0)
    levels = tree.filter(pl.col("depth") > top).partition_by("depth", as_dict=True)
    known = has.filter(pl.col("depth").is_null() | (pl.col("depth") <= top)).select("op_id", value)
    parts = [known]
    for d in range(top + 1, int_scalar(tree["depth"].max() or 0) + 1):
        level = levels.get((d,))
        if level is None:
            break
        own = level.filter(pl.col(value).is_not_null()).select("op_id", value)
        kids = level.filter(pl.col(value).is_null()).select("op_id", "parent_id").join(
            known.rename({"op_id": "parent_id"}), on="parent_id", how="inner").select("op_id", value)
        known = pl.concat([own, kids])
        parts.append(known)
    got = pl.concat(parts)
    return tree.select("op_id").join(got, on="op_id", how="left", maintain_order="left")


def _nearest_by_jumping(tree: pl.DataFrame, value: str) -> pl.Series:
    """:func:`nearest_down` when op ids are row numbers, by pointer jumping: each op holds the
    nearest value between itself and an ancestor (that one excluded), and the ancestor pointer
    doubles its reach each round: two gathers of one column a round, where the levels' joins
    copied the tree's columns (40 MB at 200 MB of JSON). An op outside the tree (no depth) keeps
    its own value, as the levels give it."""
    anc = tree["parent_id"].cast(pl.Int64)
    best = tree[value]
    while anc.null_count() < anc.len():
        best = pl.select(pl.coalesce(best, best.gather(anc))).to_series()
        anc = anc.gather(anc)
    return pl.select(pl.when(tree["depth"].is_null()).then(tree[value]).otherwise(best)).to_series()


def outermost_up(ops: pl.DataFrame, skip: str, out: str) -> pl.DataFrame:
    """``ops`` (an op tree: ``op_id, parent_id, depth``) with ``out``: the outermost op on the path from
    the root to each op (the op itself included) whose boolean ``skip`` column is false; null when
    the whole path is skipped (a zero-length op, outside the tree, is
    its own). Resolved one depth level at a time, top-down, with joins; by pointer jumping when op
    ids are row numbers."""
    if ops.height and is_row_index(ops["op_id"]):
        return ops.with_columns(_outermost_by_jumping(ops, skip).alias(out))
    ops = ops.with_columns(pl.lit(None, pl.UInt32).alias(out))
    if ops.height == 0 or ops["depth"].drop_nulls().len() == 0:
        return ops.with_columns(pl.when(~pl.col(skip)).then(pl.col("op_id")).alias(out))
    max_depth = int_scalar(ops["depth"].max())
    known = ops.filter(pl.col("depth") == 0).select(
        "op_id", pl.when(~pl.col(skip)).then(pl.col("op_id")).otherwise(None).alias(out))
    resolved = [known]
    for d in range(1, max_depth + 1):
        level = ops.filter(pl.col("depth") == d).select("op_id", "parent_id", skip)
        if level.height == 0:
            break
        level = level.join(known.rename({"op_id": "parent_id", out: "_ptop"}), on="parent_id", how="left")
        known = level.select(
            "op_id",
            pl.coalesce("_ptop", pl.when(~pl.col(skip)).then(pl.col("op_id"))).alias(out),
        )
        resolved.append(known)
    ops = add_columns(ops.drop(out), pl.concat(resolved), "op_id")
    # zero-length ops are outside the tree: they are their own top if real
    return ops.with_columns(
        pl.when(pl.col("depth").is_null() & ~pl.col(skip)).then(pl.col("op_id"))
        .otherwise(pl.col(out)).alias(out)
    )


def _outermost_by_jumping(ops: pl.DataFrame, skip: str) -> pl.Series:
    """:func:`outermost_up` when op ids are row numbers, by pointer jumping: each op holds the
    outermost real op between itself and an ancestor, and the ancestor pointer doubles its
    reach each round (log2 of the depth rounds of two gathers, instead of a join per level)."""
    anc = ops["parent_id"].cast(pl.Int64)
    best = pl.select(pl.when(~ops[skip]).then(ops["op_id"])).to_series()
    while anc.null_count() < anc.len():
        best = pl.select(pl.coalesce(best.gather(anc), best)).to_series()
        anc = anc.gather(anc)
    return best.cast(pl.UInt32)


def walk_up(ops: pl.DataFrame, rows: pl.DataFrame, key: str = "op_id", *,
            distinct: bool = False) -> Iterator[pl.DataFrame]:
    """``rows`` (a table with an op id in ``key``) again for each level of the op tree (``op_id,
    parent_id``) above them: first with ``key`` replaced by each op's parent, then by its parent's
    parent, and so on; rows that reach a root stop. ``distinct``: each level's rows taken once (for
    a set of ops, not a table of rows per op). Parents are gathered by row number when op ids are
    row numbers, else joined: the one place an op-tree walk upwards takes that fast path."""
    columns = rows.columns
    if ops.height and is_row_index(ops["op_id"]):
        parent = ops["parent_id"]

        def up(df: pl.DataFrame) -> pl.DataFrame:
            return df.with_columns(parent.gather(df[key]).alias(key))
    else:
        parents = ops.select(pl.col("op_id").alias(key), pl.col("parent_id").alias("_parent"))

        def up(df: pl.DataFrame) -> pl.DataFrame:
            return df.join(parents, on=key).drop(key).rename({"_parent": key}).select(columns)
    level = rows
    for _ in range(ops.height):  # a path in a tree is shorter than its op count (a cycle cannot hang it)
        level = up(level).filter(pl.col(key).is_not_null())
        if distinct:
            level = level.unique()
        if level.height == 0:
            return
        yield level


def strict_ancestors(ops: pl.DataFrame, ids: pl.Series) -> pl.Series:
    """The ``op_id`` of every op of the tree (``op_id, parent_id``) that is a proper ancestor of one of
    ``ids``, each level's ops taken once."""
    start = ops.filter(pl.col("op_id").is_in(ids.implode())).select("op_id")
    found = list(walk_up(ops, start, distinct=True))
    if not found:
        return pl.Series("op_id", [], dtype=ops.schema["op_id"])
    return pl.concat(found).unique()["op_id"]
