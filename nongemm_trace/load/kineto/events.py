"""The event structs of a Kineto trace and their decoding (msgspec, typed then loose).

Decoding uses msgspec with typed structs (only the fields we use are
materialised; unknown keys are skipped inside the C decoder). An array whose
events have fields of an unexpected type is decoded a second time loosely, and
the offending events are counted and skipped with a warning instead of failing
the whole file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

import msgspec

from ...errors import TraceError
from .. import roles

Num = Union[int, float, None]
Id = Union[int, str, None]
#: ROCm writes some numeric args as strings ("stream": "0x0"): accepted and parsed.
NumOrText = Union[int, float, str, None]


class Args(msgspec.Struct, gc=False, rename={
    "external_id": "External id",
    "external_id_legacy": "external id",
    "input_dims": "Input Dims",
    "input_type": "Input type",
    "concrete_inputs": "Concrete Inputs",
}):
    external_id: Num = None
    external_id_legacy: Num = None
    correlation: Num = None
    device: NumOrText = None
    stream: NumOrText = None
    bytes: NumOrText = None
    # kept as raw JSON text (msgspec.Raw cannot sit in a Union; empty Raw = absent)
    input_dims: msgspec.Raw = msgspec.Raw()
    input_type: msgspec.Raw = msgspec.Raw()
    concrete_inputs: msgspec.Raw = msgspec.Raw()


class Event(msgspec.Struct, gc=False):
    ph: Optional[str] = None
    cat: Optional[str] = None
    name: Optional[str] = None
    pid: Id = None
    tid: Id = None
    ts: Num = None
    dur: Num = None
    args: Optional[Args] = None


#: the same keys as :class:`Event`, any types: the fallback when the typed decode rejects a field
LooseEvent = msgspec.defstruct("LooseEvent", [(f, Any, None) for f in Event.__struct_fields__])


_EVENTS_TYPED = msgspec.json.Decoder(list[Event])
_EVENT_TYPED = msgspec.json.Decoder(Event)
ENCODER = msgspec.json.Encoder()
_EVENTS_LOOSE = msgspec.json.Decoder(list[LooseEvent])
TOP_DECODER = msgspec.json.Decoder(dict[str, msgspec.Raw])
ANY_DECODER = msgspec.json.Decoder()

EMPTY_ARGS = Args()
SKIPPED = Event()
TIME_LIMIT_US = roles.TIME_LIMIT_US


class MalformedJSON(TraceError):
    """A decode failure that a repair pass may fix (bad UTF-8, NaN/Infinity literals)."""


def short_error(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200]


def decode_events(path: str | Path, raw: Any, malformed: dict[str, int]) -> list[Event]:
    """Decode a JSON array of events (bytes, memoryview or Raw): typed in one C pass; when a
    field has the wrong type, loosely and item by item, so one bad event becomes ``SKIPPED``
    (counted per category in ``malformed``, summed over calls) and keeps the positions equal
    to the file's event indices."""
    try:
        return _EVENTS_TYPED.decode(raw)
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError as exc:
        raise MalformedJSON(path, f"invalid or truncated JSON ({short_error(exc)})") from None
    except RecursionError:
        raise TraceError(path, "JSON nested too deeply") from None
    try:
        loose = _EVENTS_LOOSE.decode(raw)
    except msgspec.ValidationError:
        loose = None  # some items are not objects: go item by item
    except (msgspec.DecodeError, RecursionError) as exc:  # pragma: no cover - typed pass raised first
        raise TraceError(path, f"invalid JSON ({short_error(exc)})") from None
    if loose is None:
        try:
            items = ANY_DECODER.decode(raw)
        except (msgspec.DecodeError, RecursionError) as exc:  # pragma: no cover
            raise TraceError(path, f"invalid JSON ({short_error(exc)})") from None
        if not isinstance(items, list):
            raise TraceError(path, "'traceEvents' is not a list")
        loose = [it if isinstance(it, dict) else None for it in items]
    good: list[Event] = []
    bad = malformed
    for ev in loose:
        if ev is None:
            bad["(not an object)"] = bad.get("(not an object)", 0) + 1
            good.append(SKIPPED)
            continue
        try:
            good.append(_EVENT_TYPED.decode(ENCODER.encode(ev)))
        except (msgspec.ValidationError, msgspec.DecodeError, msgspec.EncodeError, TypeError, ValueError):
            cat = ev.cat if isinstance(ev, LooseEvent) else ev.get("cat")
            cat = cat if isinstance(cat, str) else "?"
            bad[cat] = bad.get(cat, 0) + 1
            good.append(SKIPPED)  # keeps positions equal to the file's event indices
    return good


def malformed_notes(malformed: dict[str, int]) -> list[tuple[str, int, str]]:
    """The anomalies for the events :func:`decode_events` skipped."""
    notes = []
    for cat, n in sorted(malformed.items()):
        if cat == "(not an object)":
            notes.append(("malformed_events", n, f"{n} items of traceEvents are not event objects; skipped"))
        else:
            notes.append(("malformed_events", n, f"{n} '{cat}' events had fields of the wrong type; skipped"))
    return notes
