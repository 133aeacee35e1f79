"""Decoded events -> the partial columnar tables of one chunk (ops, launches, activities).

Routing is columnar: the category column is mapped to a table in polars and each
table's events are picked with one C-level ``itemgetter`` call, so no Python code
runs per event apart from one attribute read per column. Events without a valid
phase or time are counted per category, never dropped silently.

Timestamps: Kineto writes microseconds with three decimals. They become int64
nanoseconds; durations are converted on their own (never ``round(end) - round(start)``),
so sub-microsecond kernels keep their length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import polars as pl

from .. import roles
from ..roles import PY_ROUTES, ROUTES, STEP_OP, TABLES  # the routing, as data
from .duplicate_keys import Repeats
from .events import EMPTY_ARGS, TIME_LIMIT_US, Event

#: separates raw JSON texts joined into one string; a control byte never appears unescaped in JSON
_SEP = "\x1f"

#: each partial table's text columns, given as categorical codes by both paths (schema.py): their
#: values repeat (kernel and op names, threads, shapes), and a text column costs a 16-byte view a
#: row plus the text (the C scanner's offsets and bytes: 32 bytes a row and more for long kernel
#: names), a categorical one a 4-byte code a row and each distinct text once
_EVENT_TEXTS = ("name", "cat", "pid", "tid")
CATEGORICAL = {
    "ops": (*_EVENT_TEXTS, "input_dims", "input_type", "concrete_inputs"),
    "launches": _EVENT_TEXTS,
    "acts": (*_EVENT_TEXTS, "kind"),
    "py": _EVENT_TEXTS,
    "syncs": (*_EVENT_TEXTS, "kind"),
}


@dataclass
class Tally:
    """What was set aside while routing, summed over chunks."""

    bad_time: dict[str, int] = field(default_factory=dict)
    bad_phase: dict[str, int] = field(default_factory=dict)
    no_cat: int = 0
    other_n: int = 0
    other_ns: int = 0  # whole nanoseconds: the sum is the same in any order (chunks are summed apart)
    other_cats: set[str] = field(default_factory=set)
    #: exact repeats dropped inside chunks, by table (:func:`.build.drop_chunk_repeats`)
    repeats: dict[str, int] = field(default_factory=dict)
    #: names cut to :data:`MAX_NAME_CHARS` (:func:`as_codes`)
    long_names: int = 0
    #: events that write a read key twice (:mod:`.duplicate_keys`)
    duplicate_keys: Repeats = field(default_factory=Repeats)

    def to_dict(self) -> dict[str, Any]:
        return {"bad_time": self.bad_time, "bad_phase": self.bad_phase, "no_cat": self.no_cat,
                "other_n": self.other_n, "other_ns": self.other_ns, "other_cats": sorted(self.other_cats),
                "repeats": self.repeats, "long_names": self.long_names, "duplicate_keys": self.duplicate_keys}

    def add(self, other: dict[str, Any]) -> None:
        """Add another chunk's tally (as :meth:`to_dict` gives it)."""
        for mine, theirs in ((self.bad_time, other["bad_time"]), (self.bad_phase, other["bad_phase"]),
                             (self.repeats, other.get("repeats", {}))):
            for cat, n in theirs.items():
                mine[cat] = mine.get(cat, 0) + n
        self.no_cat += other["no_cat"]
        self.other_n += other["other_n"]
        self.other_ns += other["other_ns"]
        self.other_cats |= set(other["other_cats"])
        self.long_names += other.get("long_names", 0)
        self.duplicate_keys.add(other.get("duplicate_keys") or Repeats())


#: a name longer than this many characters is cut to it, with a warning: no kernel or op name comes
#: near it (the longest in the shared traces has 3,000), and a hostile one of hundreds of MB would be
#: copied by every join and search of the analysis (a 200 MB kernel name cost 35 s)
MAX_NAME_CHARS = 1 << 16


def as_codes(key: str, df: pl.DataFrame, tally: Tally) -> pl.DataFrame:
    """One chunk's table ``key`` with its text columns as categorical codes (:data:`CATEGORICAL`), a name
    longer than :data:`MAX_NAME_CHARS` cut first and counted: a categorical text is kept for the
    life of the process, so a hostile 200 MB name would outlive its cut (both paths call this)."""
    # no name has more characters than bytes: the characters are counted only where a name is long
    if df.height and "name" in df.columns and df.select((pl.col("name").str.len_bytes() > MAX_NAME_CHARS).any()).item():
        long = pl.col("name").str.len_chars() > MAX_NAME_CHARS
        n = df.select(long.sum()).item()
        if n:
            df = df.with_columns(pl.when(long).then(pl.col("name").str.head(MAX_NAME_CHARS))
                                 .otherwise(pl.col("name")).alias("name"))
            tally.long_names += n
    if key == "ops":
        df = step_numbers(df)
    return df.with_columns(pl.col(c).cast(pl.Categorical) for c in CATEGORICAL[key])


#: torch.profiler's step ranges: ``ProfilerStep#N``, one name per step (a number past 18 digits, which no
#: loop reaches, keeps its own name: it would not fit the Int64 ``step_number``)
STEP_NAME = r"^ProfilerStep#(\d{1,18})$"
#: the literal start of every name :data:`STEP_NAME` matches
STEP_PREFIX = "ProfilerStep#"


def step_numbers(ops: pl.DataFrame) -> pl.DataFrame:
    """The ops with each ``ProfilerStep#N`` named :data:`STEP_OP` and its ``N`` in ``step_number``
    (null elsewhere). A categorical text lives as long as the process, and a trace of a million steps
    has a million such names (110 MB of texts, and every table keyed by name a million rows long);
    the steps keep their names (:func:`nongemm_trace.metrics.steps.find_steps` writes them back)."""
    if ops.height == 0 or "name" not in ops.columns:
        return ops.with_columns(pl.lit(None, pl.Int64).alias("step_number"))
    # the regular expression only on the rows that start with the literal prefix: a comparison of a
    # few bytes a row rules out nearly every op (a chunk holds a step or two among thousands), where
    # the expression searched every name
    rows = ops.select(pl.col("name").str.starts_with(STEP_PREFIX)).to_series().arg_true()
    if rows.len() == 0:
        return ops.with_columns(pl.lit(None, pl.Int64).alias("step_number"))
    found = ops["name"].gather(rows).str.extract(STEP_NAME, 1).cast(pl.Int64)
    number = pl.repeat(None, ops.height, dtype=pl.Int64, eager=True).scatter(rows, found)
    return ops.with_columns(number.alias("step_number")).with_columns(
        pl.when(pl.col("step_number").is_not_null()).then(pl.lit(STEP_OP)).otherwise(pl.col("name")).alias("name"))


def _pick(events: Sequence[Event], idx: list[int]) -> list[Event]:
    if not idx:
        return []
    if len(idx) == 1:
        return [events[idx[0]]]
    return list(itemgetter(*idx)(events))


def chunk_tables(events: Sequence[Event], first: int, keep_python: bool, tally: Tally) -> dict[str, pl.DataFrame]:
    """Route one chunk's events (``first`` = the file index of ``events[0]``) to partial tables,
    each with an ``ev_idx`` column (the event's index in the file)."""
    cats = pl.Series("cat", [e.cat for e in events], dtype=pl.Utf8)
    routes = cats.replace_strict(PY_ROUTES if keep_python else ROUTES, default=None, return_dtype=pl.Utf8)
    no_cat = cats.is_null().arg_true().to_list()
    if no_cat:
        tally.no_cat += [e.ph for e in _pick(events, no_cat)].count("X")
    out: dict[str, pl.DataFrame] = {}
    for key in TABLES:
        where = (routes == key).arg_true()
        idx = where.to_list()
        df = _valid(_BUILDERS[key](_pick(events, idx), cats.gather(where), where.cast(pl.Int64) + first), tally)
        out[key] = as_codes(key, df, tally)
    other = (routes == "other").arg_true()
    if other.len():
        _other(_pick(events, other.to_list()), cats.gather(other), tally)
    return out


def _valid(df: pl.DataFrame, tally: Tally) -> pl.DataFrame:
    """Keep complete ('X') events with a finite, plausible ts and dur; count the rest per category;
    then convert times to int64 ns."""
    if df.height == 0:
        return _finish(df)
    is_x = pl.col("ph") == "X"
    ok_time = (pl.col("ts").is_not_null() & pl.col("dur").is_not_null() & (pl.col("dur") >= 0)
               & (pl.col("dur") < TIME_LIMIT_US) & (pl.col("ts") > -TIME_LIMIT_US) & (pl.col("ts") < TIME_LIMIT_US))
    flags = df.select(is_x.fill_null(False).alias("x"), ok_time.fill_null(False).alias("t"))
    if not (flags["x"].all() and flags["t"].all()):
        marked = df.select("cat").with_columns(flags)
        for cat, n in marked.filter(~pl.col("x")).group_by("cat").len().iter_rows():
            tally.bad_phase[cat] = tally.bad_phase.get(cat, 0) + n
        for cat, n in marked.filter(pl.col("x") & ~pl.col("t")).group_by("cat").len().iter_rows():
            tally.bad_time[cat] = tally.bad_time.get(cat, 0) + n
        df = df.filter(flags["x"] & flags["t"])
    return _finish(df)


def ns_expr(col: str) -> pl.Expr:
    """Microsecond floats -> int64 nanoseconds, rounded to the nearest ns.

    The integer and fractional microseconds are scaled apart: ``x * 1000`` on an
    epoch-based timestamp (~1.7e15 us) would exceed float64's 53-bit mantissa and
    move times by up to 128 ns, enough to break the nesting of sub-microsecond ops.
    """
    whole = pl.col(col).floor()
    frac_ns = ((pl.col(col) - whole) * 1000.0).round(0)
    return whole.cast(pl.Int64, strict=False) * 1000 + frac_ns.cast(pl.Int64, strict=False)


def _finish(df: pl.DataFrame) -> pl.DataFrame:
    """Float microseconds -> ts_ns/dur_ns/end_ns in the tables' column order."""
    rest = [c for c in df.columns if c not in ("ph", "ts", "dur", "name", "cat", "pid", "tid", "ev_idx")]
    return df.select(
        "name", "cat", "pid", "tid", ns_expr("ts").alias("ts_ns"), ns_expr("dur").alias("dur_ns"), *rest, "ev_idx",
    ).with_columns((pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns")).select(
        "name", "cat", "pid", "tid", "ts_ns", "dur_ns", *rest, "end_ns", "ev_idx")


def _other(evs: list[Event], cat: pl.Series, tally: Tally) -> None:
    """Device events of other accelerators: counted and summed for a warning, not tabled."""
    _other_frame(pl.DataFrame({"ph": [e.ph for e in evs], "ts": _floats([e.ts for e in evs]),
                               "dur": _floats([e.dur for e in evs]), "cat": cat}), tally)


def _other_frame(df: pl.DataFrame, tally: Tally) -> None:
    count_other(df.filter((pl.col("ph") == "X") & pl.col("ts").is_not_null() & (pl.col("dur") >= 0)
                          & (pl.col("dur") < TIME_LIMIT_US)), tally)


def count_other(ok: pl.DataFrame, tally: Tally) -> None:
    """Other accelerators' complete events with valid times (columns cat, dur): counted and summed."""
    tally.other_n += ok.height
    tally.other_ns += int(ok.select((pl.col("dur") * 1000.0).round(0).cast(pl.Int64).sum()).item() or 0)
    tally.other_cats |= set(ok["cat"].unique().to_list())


def _floats(values: list[Any]) -> pl.Series:
    return pl.Series(values, dtype=pl.Float64, strict=False)


def _ids(values: list[Any]) -> pl.Series:
    """pid / tid values (ints, or strings such as "Spans") as text, converted in bulk when all are ints."""
    try:
        return pl.Series(values, dtype=pl.Int64).cast(pl.Utf8).fill_null("")
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        return pl.Series(["" if v is None else str(v) for v in values], dtype=pl.Utf8)


def _parse_int(v: Any) -> Any:
    if isinstance(v, str):
        try:
            return int(v, 0)
        except ValueError:
            return None
    return v


def _int(values: list[Any]) -> pl.Series:
    """Ints (or floats, or ROCm's "0x0" strings) -> Int64, null where absent or unparsable."""
    try:  # the common case: ints and nulls only
        return pl.Series(values, dtype=pl.Int64)
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        pass
    s = pl.Series([_parse_int(v) for v in values], dtype=pl.Float64, strict=False)
    return s.cast(pl.Int64, strict=False)


def _raw_texts(raws: list[Any]) -> pl.Series:
    """Raw JSON fragments -> a text column (null where absent): joined in C, split in polars."""
    if not raws:
        return pl.Series([], dtype=pl.Utf8)
    text = _SEP.encode().join(raws).decode("utf-8", "replace")
    s = pl.Series([text], dtype=pl.Utf8).str.split(_SEP).explode()
    return pl.select(pl.when(s.str.len_bytes() > 0).then(s)).to_series()


def _common(evs: list[Event], cat: pl.Series, ev_idx: pl.Series) -> dict[str, pl.Series]:
    phs = [e.ph for e in evs]
    n_x = phs.count("X")  # C-level; almost always every event
    return {
        "ph": pl.repeat("X", n_x, dtype=pl.Utf8, eager=True) if n_x == len(phs) else pl.Series(phs, dtype=pl.Utf8),
        "name": pl.Series([e.name for e in evs], dtype=pl.Utf8).fill_null(""),
        "cat": cat,
        "pid": _ids([e.pid for e in evs]),
        "tid": _ids([e.tid for e in evs]),
        "ts": _floats([e.ts for e in evs]),
        "dur": _floats([e.dur for e in evs]),
        "ev_idx": ev_idx.alias("ev_idx"),
    }


def _ext_ids(args: list[Any]) -> pl.Series:
    """``External id``, or the legacy lowercase ``external id`` where only that is present."""
    ext = _int([a.external_id for a in args])
    if ext.null_count():
        legacy = _int([a.external_id_legacy for a in args])
        ext = ext.fill_null(legacy)
    return ext


def _args(evs: list[Event]) -> list[Any]:
    return [e.args or EMPTY_ARGS for e in evs]


def op_table(evs: list[Event], cat: pl.Series, ev_idx: pl.Series) -> pl.DataFrame:
    cols = _common(evs, cat, ev_idx)
    args = _args(evs)
    cols["external_id"] = _ext_ids(args)
    # shapes, dtypes and scalar arguments: categorical, as every text column (chunk_tables)
    cols["input_dims"] = _raw_texts([a.input_dims for a in args]).cast(pl.Categorical)
    cols["input_type"] = _raw_texts([a.input_type for a in args]).cast(pl.Categorical)
    cols["concrete_inputs"] = _raw_texts([a.concrete_inputs for a in args]).cast(pl.Categorical)
    cols["seq"] = _int([a.seq for a in args])
    return pl.DataFrame(cols)


def python_table(evs: list[Event], cat: pl.Series, ev_idx: pl.Series) -> pl.DataFrame:
    cols = _common(evs, cat, ev_idx)
    cols["external_id"] = _ext_ids(_args(evs))
    return pl.DataFrame(cols)


def launch_table(evs: list[Event], cat: pl.Series, ev_idx: pl.Series) -> pl.DataFrame:
    cols = _common(evs, cat, ev_idx)
    args = _args(evs)
    cols["external_id"] = _ext_ids(args)
    cols["correlation"] = _int([a.correlation for a in args])
    return pl.DataFrame(cols)


def activity_table(evs: list[Event], cat: pl.Series, ev_idx: pl.Series) -> pl.DataFrame:
    cols = _common(evs, cat, ev_idx)
    args = _args(evs)
    cols["kind"] = cat.replace_strict(roles.ACTIVITY_KIND, return_dtype=pl.Utf8)
    cols["external_id"] = _ext_ids(args)
    cols["correlation"] = _int([a.correlation for a in args])
    cols["device"] = _int([a.device for a in args])
    cols["stream"] = _int([a.stream for a in args])
    cols["bytes"] = _int([a.bytes for a in args])
    return pl.DataFrame(cols)


def sync_table(evs: list[Event], cat: pl.Series, ev_idx: pl.Series) -> pl.DataFrame:
    """``cuda_sync`` events: the synchronizing call (``correlation``), its kind, and what it waits on."""
    cols = _common(evs, cat, ev_idx)
    args = _args(evs)
    cols["external_id"] = _ext_ids(args)
    cols["kind"] = pl.Series([a.cuda_sync_kind for a in args], dtype=pl.Utf8)
    cols["correlation"] = _int([a.correlation for a in args])
    cols["device"] = _int([a.device for a in args])
    cols["stream"] = _int([a.stream for a in args])
    cols["wait_on_stream"] = _int([a.wait_on_stream for a in args])
    cols["wait_on_cuda_event_record_corr_id"] = _int([a.wait_record_corr for a in args])
    return pl.DataFrame(cols)


_BUILDERS = {"ops": op_table, "launches": launch_table, "acts": activity_table, "py": python_table,
             "syncs": sync_table}
