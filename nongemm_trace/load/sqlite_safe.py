"""An SQLite file from someone else's run, opened as untrusted input.

An Nsight Systems export is a database, and a database can hold more than tables: views that
compute without end (a recursive view posing as the kernel table grew 50 MB/s and never
ended), triggers, generated columns calling functions, table names that are SQL (``a"b``,
``x"); DROP TABLE …``), and values of any type in any column. So:

* the bytes are loaded into a private in-memory database (the file itself is never opened by
  SQLite: no journal or WAL next to it is read or written) that is **read only**
  (``query_only``), with ``trusted_schema`` off (views and generated columns may call only
  innocuous functions) and values capped at :data:`MAX_VALUE_BYTES`;
* only **tables** are read (:func:`tables`): a view or anything else under a name the loader
  reads is refused in one line; triggers never fire (nothing is written);
* names are **quoted** (:func:`ident`) and table columns listed with a bound parameter, so no
  name in the file becomes SQL;
* every statement runs under a **time budget** (:func:`budget_seconds`: a minute plus a second
  per 4 MB of database), checked by a progress handler: a query that runs past it is
  interrupted and refused in one line;
* text is decoded with replacement (invalid UTF-8 never raises), and values of the wrong type are
  read as missing (:func:`integer`, :func:`text`) for the loader to skip and count.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path

from ..errors import TraceError

#: the largest string or blob a query may make (a kernel name is a few KB)
MAX_VALUE_BYTES = 64 << 20
#: VM instructions between two looks at the clock
_CHECK_EVERY = 20_000


def budget_seconds(size: int) -> float:
    """How long reading a database of ``size`` bytes may take: a minute plus a second per 4 MB
    (reading a real 100 MB export takes a few seconds)."""
    return 60.0 + size / (4 << 20)


class Budget:
    """The progress handler: interrupts the running statement once the deadline has passed."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.expired = False

    def __call__(self) -> int:
        if time.monotonic() > self.deadline:
            self.expired = True
            return 1
        return 0


def open_untrusted(path: str | Path, data: bytes) -> tuple[sqlite3.Connection, Budget]:
    """``data`` (an SQLite file's bytes) as a read-only private database with the guards above."""
    try:
        con = sqlite3.connect(":memory:")
        if hasattr(con, "deserialize"):
            con.deserialize(data)
        else:  # Python 3.10: copied in from a temporary file with the backup API
            _restore(con, data)
        con.text_factory = lambda b: b.decode("utf-8", "replace")
        con.execute("pragma trusted_schema = off")
        con.execute("pragma query_only = on")
        if sys.version_info >= (3, 11):  # Connection.setlimit
            con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        con.execute("select count(*) from sqlite_master").fetchone()
        budget = Budget(budget_seconds(len(data)))
        con.set_progress_handler(budget, _CHECK_EVERY)
        return con, budget
    except sqlite3.DatabaseError as exc:
        raise TraceError(path, f"unreadable SQLite database ({exc})") from None


def _restore(con: sqlite3.Connection, data: bytes) -> None:
    import os
    import tempfile

    fd, tmp = tempfile.mkstemp(suffix=".sqlite")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        src = sqlite3.connect(f"file:{tmp}?mode=ro", uri=True)
        try:
            src.backup(con)
        finally:
            src.close()
    finally:
        os.unlink(tmp)


def ident(name: str) -> str:
    """``name`` as a quoted SQL identifier (a ``"`` inside doubled)."""
    return '"' + name.replace('"', '""') + '"'


def tables(path: str | Path, con: sqlite3.Connection, read: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """The database's tables and their columns (views, triggers and indexes are not tables). A
    name in ``read`` (the tables a loader reads; a trailing ``*`` matches by prefix) that is a
    view or anything else but a table is refused: a view computes, and an export holds none."""
    rows = con.execute("select type, name from sqlite_master where type in ('table', 'view')").fetchall()
    for kind, name in rows:
        if kind != "table" and any(name.startswith(r[:-1]) if r.endswith("*") else name == r for r in read):
            raise TraceError(path, f"{name} is a {kind}, not a table: an Nsight Systems export holds only tables")
    return {name: [c for (c,) in con.execute("select name from pragma_table_info(?)", (name,))]
            for kind, name in rows if kind == "table" and isinstance(name, str)}


def integer(column: str) -> str:
    """SQL for ``column`` where it holds an integer, else NULL (a text ``'abc'`` or a float
    ``Infinity`` in an integer column is read as missing)."""
    if column == "NULL":
        return column
    return f"(case when typeof({column}) = 'integer' then {column} end)"


def text(column: str) -> str:
    """SQL for ``column`` as text (a blob decoded as UTF-8 with replacement; NULL stays NULL)."""
    if column == "NULL":
        return column
    return f"(case when {column} is null then null else cast({column} as text) end)"


def interrupted(path: str | Path, budget: Budget, exc: sqlite3.DatabaseError) -> TraceError:
    """The one-line error for a failed query: the time budget, or what SQLite said."""
    if budget.expired:
        return TraceError(path, f"reading the Nsight Systems tables took longer than {budget.seconds:.0f} s "
                                f"(a view, generated column or damaged file that does not end?); refused")
    return TraceError(path, f"cannot read the Nsight Systems tables ({exc})")
