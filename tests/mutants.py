"""Mutants of real traces, and an independent account of what a correct report must count.

Shared by the robustness tests (``test_robustness.py``, hypothesis-driven) and the
reliability census (``bench/reliability.py``). Each mutator takes the parsed
document (or the file's bytes) and a ``random.Random`` and returns a new document
(or bytes); none of them touches the library.
"""

from __future__ import annotations

import copy
import gzip
import io
import json
import math
import random
import re
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

ACTIVITY_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
LIMIT_US = 4e15

# -- document mutators (dict -> dict) -------------------------------------------------------


def _events(doc):
    return doc["traceEvents"]


def _pick(rng, events, n=None, pred=None):
    idx = [i for i, e in enumerate(events) if pred is None or pred(e)]
    if not idx:
        return []
    n = n or rng.randint(1, min(20, len(idx)))
    return rng.sample(idx, min(n, len(idx)))


def drop_or_rename_keys(doc, rng):
    ev = _events(doc)
    for i in _pick(rng, ev, pred=lambda e: isinstance(e, dict) and e):
        key = rng.choice(sorted(ev[i]))
        val = ev[i].pop(key)
        if rng.random() < 0.5:
            ev[i][key.upper() + "_renamed"] = val
    return doc


_BAD_VALUES = ["12.5", None, -5.0, float("nan"), float("inf"), 1e300, -1e300, 9.3e15, [], {}, True, "abc", 2**70]


def wrong_types(doc, rng):
    ev = _events(doc)
    for i in _pick(rng, ev, pred=lambda e: isinstance(e, dict)):
        key = rng.choice(["ts", "dur", "pid", "tid", "name", "cat", "ph", "args"])
        ev[i][key] = copy.deepcopy(rng.choice(_BAD_VALUES))
        if rng.random() < 0.5 and isinstance(ev[i].get("args"), dict):
            ak = rng.choice(["correlation", "External id", "device", "stream", "Input Dims", "bytes"])
            ev[i]["args"][ak] = copy.deepcopy(rng.choice(_BAD_VALUES))
    return doc


def duplicate_events(doc, rng):
    ev = _events(doc)
    for i in _pick(rng, ev):
        ev.append(copy.deepcopy(ev[i]))
    return doc


def unlink_activities(doc, rng):
    ev = _events(doc)
    for i in _pick(rng, ev, pred=lambda e: isinstance(e.get("cat"), str) and e["cat"] in ACTIVITY_CATS):
        args = ev[i].setdefault("args", {})
        if rng.random() < 0.5:
            args.pop("correlation", None)
        else:
            args["External id"] = rng.randint(10**9, 2 * 10**9)
    return doc


def drop_flow_ends(doc, rng):
    doc["traceEvents"] = [e for e in _events(doc) if not (e.get("ph") == "f" and rng.random() < 0.7)]
    return doc


def shuffle_events(doc, rng):
    rng.shuffle(_events(doc))
    return doc


def long_names(doc, rng):
    ev = _events(doc)
    for i in _pick(rng, ev, n=3, pred=lambda e: isinstance(e.get("name"), str)):
        ev[i]["name"] = ev[i]["name"] + "x" * rng.randint(10_000, 300_000)
    return doc


def empty_events(doc, rng):
    doc["traceEvents"] = []
    return doc


def negative_and_huge_times(doc, rng):
    ev = _events(doc)
    for i in _pick(rng, ev, pred=lambda e: "dur" in e):
        e = ev[i]
        choice = rng.randint(0, 3)
        if choice == 0:
            e["dur"] = -abs(float(e["dur"])) - 1
        elif choice == 1:
            e["ts"] = 1e18
        elif choice == 2:
            e["dur"] = 1e17
        else:
            e["ts"] = -1e17
    return doc


DOC_MUTATORS: dict[str, Callable[[dict, random.Random], dict]] = {
    "missing or renamed keys": drop_or_rename_keys,
    "wrong types (strings, null, NaN, huge)": wrong_types,
    "negative or out-of-range ts/dur": negative_and_huge_times,
    "duplicate events": duplicate_events,
    "no correlation / unknown External id": unlink_activities,
    "flows without ends": drop_flow_ends,
    "shuffled event order": shuffle_events,
    "very long names": long_names,
    "empty traceEvents": empty_events,
}

# -- byte mutators (bytes -> bytes) -----------------------------------------------------------


def truncate_json(raw_json: bytes, rng) -> bytes:
    return raw_json[: rng.randint(0, len(raw_json) - 2)]


def flip_gzip_bit(raw_gz: bytes, rng) -> bytes:
    b = bytearray(raw_gz)
    pos = rng.randrange(len(b))
    b[pos] ^= 1 << rng.randrange(8)
    return bytes(b)


def _value_start(raw_json: bytes, key: bytes, rng) -> int:
    """Offset just after ``"key":`` (and any spaces) of a random occurrence."""
    hits = [m.end() for m in re.finditer(b'"' + key + b'":\\s*', raw_json)]
    return rng.choice(hits)


def non_utf8(raw_json: bytes, rng) -> bytes:
    # put invalid bytes inside a string value (an event name)
    j = _value_start(raw_json, b"name", rng) + 1
    return raw_json[:j] + b"\xff\xfe\xc3" + raw_json[j:]


def nan_literals(raw_json: bytes, rng) -> bytes:
    j = _value_start(raw_json, b"dur", rng)
    k = j
    while raw_json[k:k + 1] not in (b",", b"}"):
        k += 1
    return raw_json[:j] + rng.choice([b"NaN", b"Infinity", b"-Infinity"]) + raw_json[k:]


def nesting_bomb(depth: int = 1_000_000) -> bytes:
    return b'{"traceEvents": [{"ph": "X", "cat": "kernel", "args": ' + b"[" * depth + b"]" * depth + b"}]}"


# -- the independent account ----------------------------------------------------------------


def finite(x):
    """What the reader promises for NaN/Infinity literals: they are read as null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [finite(v) for v in x]
    return x


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _int_or_none(x) -> bool:
    return x is None or (isinstance(x, int) and not isinstance(x, bool)) or (isinstance(x, float) and math.isfinite(x))


def _ns(x) -> int:
    from decimal import Decimal
    return int((Decimal(repr(float(x))) * 1000).to_integral_value())


def valid_activities(doc: Any) -> tuple[int, int, int]:
    """(valid activity events after de-duplication, their summed ns, activity-category events dropped):
    what any correct reader must count, from the document alone."""
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    seen = set()
    n = tot = dropped = 0
    for e in events:
        if not isinstance(e, dict) or not isinstance(e.get("cat"), str) or e["cat"] not in ACTIVITY_CATS:
            continue
        ok = e.get("ph") == "X" and _num(e.get("ts")) and _num(e.get("dur"))
        ok = ok and 0 <= e["dur"] < LIMIT_US and -LIMIT_US < e["ts"] < LIMIT_US
        ok = ok and all(e.get(k) is None or (isinstance(e.get(k), (int, str)) and not isinstance(e.get(k), bool))
                        for k in ("pid", "tid"))
        ok = ok and (e.get("name") is None or isinstance(e.get("name"), str))
        args = e.get("args")
        ok = ok and (args is None or isinstance(args, dict))
        if ok and isinstance(args, dict):
            ok = all(_int_or_none(args.get(k)) for k in ("External id", "external id", "correlation",
                                                          "Sequence number", "Fwd thread id"))
            ok = ok and all(_int_or_none(args.get(k)) or isinstance(args.get(k), str)
                            for k in ("device", "stream", "bytes"))
        if not ok:
            dropped += 1
            continue
        a = args or {}
        key = (e.get("name") or "", str(e.get("pid", "")), str(e.get("tid", "")), _ns(e["ts"]), _ns(e["dur"]),
               a.get("correlation"), a.get("device"), a.get("stream"))
        if key in seen:
            dropped += 1
            continue
        seen.add(key)
        n += 1
        tot += _ns(e["dur"])
    return n, tot, dropped


# -- running the CLI in-process -------------------------------------------------------------


def run_cli(path: Path, *extra: str) -> tuple[int, str, str]:
    from nongemm_trace.cli import main
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["analyze", str(path), "--format", "json", *extra])
    return code, out.getvalue(), err.getvalue()


def write_doc(doc: Any, path: Path, gz: bool = False) -> Path:
    data = json.dumps(doc).encode()  # writes NaN/Infinity for non-finite floats, as Python does
    path.write_bytes(gzip.compress(data, 1) if gz else data)
    return path


def check_outcome(code: int, out: str, err: str, path: Path) -> dict | None:
    """Either a report (returned as a dict, invariants checked) or a clean refusal (None)."""
    assert "Traceback" not in err and "Traceback" not in out
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert str(path) in lines[0], lines[0]
        assert "unexpected failure" not in lines[0], lines[0]  # a bug, not a refusal
        assert out == ""
        return None
    assert code == 0, (code, err)
    d = json.loads(out)
    cats = d["categories"]
    if d["metric"] == "gpu":
        assert sum(round(c["gpu_time_us"] * 1000) for c in cats) == round(d["gpu_time_us"] * 1000)
        assert sum(c["activities"] for c in cats) == d["gpu_activities"]
    return d
