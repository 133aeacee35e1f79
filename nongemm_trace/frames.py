"""Small polars helpers shared by the pipeline stages."""

from __future__ import annotations

import polars as pl


def add_columns(df: pl.DataFrame, right: pl.DataFrame, on: str | list[str], *, nulls_equal: bool = False) -> pl.DataFrame:
    """``df`` with the non-key columns of ``right`` added by a left join on ``on``, rows kept in
    order. Only the key columns go through the join; the rest of ``df`` is not copied (a
    plain join followed by a sort would copy every column of a table of millions of rows twice)."""
    keys = [on] if isinstance(on, str) else list(on)
    got = df.select(keys).join(right, on=keys, how="left", nulls_equal=nulls_equal, maintain_order="left")
    if got.height != df.height:
        raise ValueError("add_columns: the right table's keys are not unique")
    return df.with_columns(got.drop(keys))
