"""The op tree by the C sweep (``csrc/nongemm_sweep.c``, the top-level module ``_nongemm_sweep``).

It gives the numbers of :func:`.nesting._starts_and_queries` and its as-of joins (each
op's depth and parent, each launch call's innermost op before the containment check)
from one radix sort and one pass, in a fraction of the time and without the tens of MB
of temporary columns. The extension is optional (built at install time where a C
compiler exists); ``NONGEMM_FAST_SWEEP=off`` turns it off (to compare the two paths).
"""

from __future__ import annotations

import polars as pl

from ..core import native
from ..core.frames import ArrowCapsules

#: the interface this module calls (the extension's ``ABI``)
ABI = 3


_SWEEP = native.load("_nongemm_sweep", ABI)


def available() -> bool:
    """The C sweep is built, of this version, and not turned off."""
    return _SWEEP is not None and not native.turned_off("NONGEMM_FAST_SWEEP")


def op_tree(start_k: pl.Series, end_k: pl.Series, neg_dur: pl.Series, op_id: pl.Series, thr: pl.Series,
            query_k: pl.Series, query_thr: pl.Series, threads: int) -> tuple[pl.Series, pl.Series, pl.Series]:
    """(depth, parent_id, hit) in input order, from the packed Int64 keys (``thread * span +
    time - first``) of the ops' starts and ends, their minus-durations, ids and thread numbers
    (below ``threads``), and the queries' packed keys and thread numbers (see the C file)."""
    columns = [s.cast(pl.Int64).rechunk().__arrow_c_stream__()
               for s in (start_k, end_k, neg_dur, op_id, thr, query_k, query_thr)]
    out = _SWEEP.op_tree(*columns, threads)
    depth, parent_id, op = (pl.Series(name, ArrowCapsules(*caps))
                            for name, caps in zip(("depth", "parent_id", "op_id"), out))
    return depth, parent_id, op
