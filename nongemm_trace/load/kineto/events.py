"""The event structs of a Kineto trace and their decoding (msgspec, typed then loose).

Decoding uses msgspec with typed structs (only the fields we use are
materialised; unknown keys are skipped inside the C decoder). An array whose
events have fields of an unexpected type is decoded a second time item by item,
and the offending events are counted and skipped with a warning instead of
failing the whole file. This is the reference grammar: the C scanner accepts only
what these decoders accept, and gives the same values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from ...errors import TraceError
from .. import roles

Num = int | float | None
Id = int | str | None
#: ROCm writes some numeric args as strings ("stream": "0x0"): accepted and parsed.
NumOrText = int | float | str | None


class Args(msgspec.Struct, gc=False, rename={
    "external_id": "External id",
    "external_id_legacy": "external id",
    "input_dims": "Input Dims",
    "input_type": "Input type",
    "concrete_inputs": "Concrete Inputs",
    "wait_record_corr": "wait_on_cuda_event_record_corr_id",
    "seq": "Sequence number",
}):
    external_id: Num = None
    external_id_legacy: Num = None
    correlation: Num = None
    device: NumOrText = None
    stream: NumOrText = None
    bytes: NumOrText = None
    # autograd's sequence number: a forward op and the backward node that differentiates it share it
    seq: NumOrText = None  # a malformed number is read as none, not a reason to drop the op
    # cuda_sync events: what kind of synchronization, and the stream / event record it waits on
    cuda_sync_kind: str | None = None
    wait_on_stream: NumOrText = None
    wait_record_corr: NumOrText = None
    # metadata events' names (process_name, thread_name): kept as written (not decoded: any value, at any
    # depth) only so that the search for keys written twice (.duplicate_keys) knows this "name" is not an
    # event's
    name: msgspec.Raw = msgspec.Raw()
    # kept as raw JSON text (msgspec.Raw cannot sit in a Union; empty Raw = absent)
    input_dims: msgspec.Raw = msgspec.Raw()
    input_type: msgspec.Raw = msgspec.Raw()
    concrete_inputs: msgspec.Raw = msgspec.Raw()


class Event(msgspec.Struct, gc=False):
    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: Id = None
    tid: Id = None
    ts: Num = None
    dur: Num = None
    args: Args | None = None


#: the same keys as :class:`Event`, any types: the fallback when the typed decode rejects a field
LooseEvent = msgspec.defstruct("LooseEvent", [(f, Any, None) for f in Event.__struct_fields__])


_EVENTS_TYPED = msgspec.json.Decoder(list[Event])
_EVENT_TYPED = msgspec.json.Decoder(Event)
ENCODER = msgspec.json.Encoder()
_LOOSE_EVENT = msgspec.json.Decoder(LooseEvent)
#: the items of an events array, each as its own text (the fallback decodes them one by one)
_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
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
    field has the wrong type, item by item from each item's own text, so one bad event becomes
    ``SKIPPED`` (counted per category in ``malformed``, summed over calls), the positions stay
    the file's event indices, and the other events (their raw ``args`` texts included) are
    decoded exactly as the one pass would. Input that is not JSON raises :class:`MalformedJSON`
    wherever the decode finds it (a repair may fix it, a chunk cut in a string is decoded whole)."""
    try:
        return _EVENTS_TYPED.decode(raw)
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError as exc:
        raise MalformedJSON(path, f"invalid or truncated JSON ({short_error(exc)})") from None
    except RecursionError:
        raise TraceError(path, "JSON nested too deeply") from None
    try:  # the typed pass stops at the first ill-typed field: the rest may still be invalid JSON
        items = _ITEMS.decode(raw)
    except msgspec.ValidationError:
        raise TraceError(path, "'traceEvents' is not a list") from None
    except msgspec.DecodeError as exc:
        raise MalformedJSON(path, f"invalid or truncated JSON ({short_error(exc)})") from None
    except RecursionError:
        raise TraceError(path, "JSON nested too deeply") from None
    good: list[Event] = []
    bad = malformed
    for item in items:
        try:
            good.append(_EVENT_TYPED.decode(item))
            continue
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            pass
        cat = _category(item)
        bad[cat] = bad.get(cat, 0) + 1
        good.append(SKIPPED)  # keeps positions equal to the file's event indices
    return good


def _category(item: msgspec.Raw) -> str:
    """The category an ill-typed item is counted under: its ``cat`` when that is a string, "?"
    when it has none, "(not an object)" for numbers, strings, lists and nulls."""
    try:
        loose = _LOOSE_EVENT.decode(item)
    except msgspec.ValidationError:
        return "(not an object)"
    except (msgspec.DecodeError, RecursionError):  # pragma: no cover - the item decoded as JSON already
        return "?"
    cat = getattr(loose, "cat", None)  # a struct built at run time (msgspec.defstruct): mypy sees no fields
    return cat if isinstance(cat, str) else "?"


def malformed_notes(malformed: dict[str, int]) -> list[tuple[str, int, str]]:
    """The anomalies for the events :func:`decode_events` skipped."""
    notes = []
    for cat, n in sorted(malformed.items()):
        if cat == "(not an object)":
            notes.append(("malformed_events", n, f"{n} items of traceEvents are not event objects; skipped"))
        else:
            notes.append(("malformed_events", n, f"{n} '{cat}' events had fields of the wrong type; skipped"))
    return notes
