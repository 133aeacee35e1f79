"""Keys written twice inside one event: read as JSON parsers read them (the last value), and reported.

JSON leaves an object with a repeated key undefined; msgspec, Python's ``json`` and every browser
take the last value. A hostile or broken writer can use that to hide work: a kernel event with a
second ``"cat": "cpu_op"`` is read as an op, a second ``dur`` lengthens it a million times. The
loader keeps the parsers' reading and says so: a ``duplicate_keys`` warning counts the events in
which a key that decides what an event is and where its time goes (:data:`WATCHED`: the event's
``ph``, ``cat``, ``name``, ``pid``, ``tid``, ``ts``, ``dur``, ``args``, and its args' ``External
id``, ``correlation``, ``device`` and ``stream``) is written more than once, names the keys and gives
the time those events hold as read.

Both load paths find the same events: the C scanner gives up on a chunk where a key it reads repeats
(or any key is escaped), so such a chunk is decoded here as on the Python path, and whether an event
is reported depends on its own text only. Finding them costs little where there are none: each
watched key's occurrences in the chunk's text are counted (``bytes.count``) against the events that
hold it (each holder writes it at least once); only a chunk with more occurrences than holders (a
repeat, a null value, the key nested deeper, as a metadata event's ``args.name``) or with an escaped
character has its items' texts searched (in polars), and only items that write a suspect key twice
are parsed with their pairs kept. On the Python path the twelve counts cost two to three times the
chunk's msgspec decode (a load of 32 MB of JSON: 0.27 -> 0.94 s); decoding the events as dicts to
compare their keys, or one regular expression for all keys, cost more. The C path runs it only on
chunks the scanner gave up on, so it pays nothing on a trace without repeated keys.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import msgspec
import polars as pl

from .events import TIME_LIMIT_US, Args, Event

#: the event's keys the loader reads, and the keys of its ``args`` that decide an activity's link and
#: stream (as written in the file -> the field they fill)
EVENT_KEYS: tuple[str, ...] = Event.__struct_fields__
ARGS_KEYS: dict[str, str] = {key: field for key, field in zip(Args.__struct_encode_fields__, Args.__struct_fields__)
                             if key in ("External id", "correlation", "device", "stream")}
WATCHED = (*EVENT_KEYS, *(f"args.{key}" for key in ARGS_KEYS))
#: an escaped character in a key (``"c\u0061t"`` is ``"cat"``): its text is no longer counted
_ESCAPE = b"\\u00"
#: the items of an events array, each as its own text, and what joins them (never unescaped in JSON)
_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
_SEP = b"\x1f"
_EMPTY_RAW = msgspec.Raw()


@dataclass
class Repeats:
    """Events with a read key written twice, summed over chunks: how many, the nanoseconds they hold as
    read, and how often each key (``args.correlation`` for an ``args`` key) repeats."""

    events: int = 0
    ns: int = 0
    keys: dict[str, int] = field(default_factory=dict)

    def add(self, other: Repeats) -> None:
        self.events += other.events
        self.ns += other.ns
        for key, n in other.keys.items():
            self.keys[key] = self.keys.get(key, 0) + n

    def note(self) -> tuple[str, int, str] | None:
        """The warning, or None when no event repeats a key."""
        if not self.events:
            return None
        keys = ", ".join(sorted(self.keys))
        return ("duplicate_keys", self.events,
                f"{self.events} events have a key written twice ({keys}): each key is read with its last "
                f"value, as JSON parsers do; {self.ns / 1000:,.1f} us of event time in them as read")


def find(raw: Any, events: Sequence[Event], into: Repeats) -> None:
    """Add to ``into`` the events of the JSON array ``raw`` (bytes-like) that repeat a read key;
    ``events`` are its items as decoded (:func:`.events.decode_events`, one per item)."""
    text = raw if isinstance(raw, bytes) else bytes(raw)
    suspects = _suspect_keys(text, events)
    if not suspects:
        return
    items = _ITEMS.decode(raw)
    for i in _candidates(items, suspects, escaped=_ESCAPE in text):
        repeated = _repeated_keys(bytes(items[i]))
        if repeated:
            into.events += 1
            into.ns += _dur_ns(events[i].dur)
            for key in repeated:
                into.keys[key] = into.keys.get(key, 0) + 1


def _candidates(items: list[msgspec.Raw], suspects: list[str], escaped: bool) -> list[int]:
    """The positions of the items whose text writes a suspect key at least twice (or, ``escaped``,
    holds an escape): counted in polars over the items' texts joined and split again, not item by item."""
    texts = pl.Series([_SEP.join(items).decode("utf-8", "replace")], dtype=pl.Utf8).str.split(_SEP.decode()) \
        .explode()
    hit = pl.lit(False)
    for key in suspects:
        hit = hit | (pl.col("t").str.count_matches(f'"{key}"', literal=True) > 1)
    if escaped:
        hit = hit | pl.col("t").str.contains(_ESCAPE.decode(), literal=True)
    return pl.DataFrame({"t": texts}).select(hit.arg_true()).to_series().to_list()


def _suspect_keys(text: bytes, events: Sequence[Event]) -> list[str]:
    """The watched keys written more often in ``text`` than there are events (or args) holding them (each
    holder writes its key at least once); every one when a character is escaped (a key's text may
    then be spelt otherwise). ``bytes.count`` per key, and the holders read in C (``attrgetter``)."""
    if _ESCAPE in text:
        return [*EVENT_KEYS, *ARGS_KEYS]
    written = {key: text.count(b'"%s"' % key.encode()) for key in (*EVENT_KEYS, *ARGS_KEYS)}
    args = list(filter(None, map(attrgetter("args"), events)))
    if written["name"]:  # a metadata event writes a second "name" in its args (an empty text: none)
        written["name"] -= len(args) - list(map(attrgetter("name"), args)).count(_EMPTY_RAW)
    out = [key for key in EVENT_KEYS if written[key] and written[key] > _holding(events, key)]
    return out + [key for key, attr in ARGS_KEYS.items() if written[key] and written[key] > _holding(args, attr)]


def _holding(objs: Sequence[Any], attr: str) -> int:
    """How many of ``objs`` hold a value (not null) in ``attr``."""
    return len(objs) - list(map(attrgetter(attr), objs)).count(None)


class _Pairs(list):
    """An object's (key, value) pairs in the order written (``json``'s ``object_pairs_hook``)."""


def _repeated_keys(body: bytes) -> list[str]:
    """The watched keys the event ``body`` writes more than once (``args.KEY`` for its last ``args``)."""
    try:
        obj = json.loads(body, object_pairs_hook=_Pairs)
    except (ValueError, RecursionError):
        return []
    if not isinstance(obj, _Pairs):
        return []
    out = _twice([k for k, _ in obj], EVENT_KEYS)
    args = next((v for k, v in reversed(obj) if k == "args"), None)
    if isinstance(args, _Pairs):
        out += [f"args.{k}" for k in _twice([k for k, _ in args], ARGS_KEYS)]
    return out


def _twice(keys: list[str], read: Any) -> list[str]:
    seen: set[str] = set()
    twice: list[str] = []
    for k in keys:
        if k in read:
            if k in seen and k not in twice:
                twice.append(k)
            seen.add(k)
    return twice


def _dur_ns(dur: Any) -> int:
    """An event's duration as read, in nanoseconds (0 when it is not a valid one)."""
    if isinstance(dur, bool) or not isinstance(dur, (int, float)) or not math.isfinite(dur) \
            or not 0 <= dur < TIME_LIMIT_US:
        return 0
    return round(dur * 1000)
