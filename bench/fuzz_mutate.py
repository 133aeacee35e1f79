"""The structure-aware mutations of bench/fuzz.py: slices of real traces, written out the ways
JSON writers do, then broken the ways hostile or broken writers break them."""

from __future__ import annotations

import copy
import gzip
import json
import random
import re
import zlib
from pathlib import Path

#: real traces of several stacks (CUDA, ROCm strings and ids, Inductor, CPU only, MTIA, graphs)
SOURCES = [
    "h200/bert_base_fp32_bs8_s128__eager.json.gz",
    "h200/bert_base_fp32_bs8_s128__compiled.json.gz",
    "h200/llama_1b_bf16_bs1_s2048__compiled_cudagraphs.json.gz",
    "external/hta/amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "external/hta/mtia_trace_single_rank__mtia_rank_0.json.gz",
    "external/hta/cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "external/hta/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "external/hta/critical_path__cuda_event_sync__event_sync_trace.json.gz",
]
FIELDS = ["ph", "cat", "name", "pid", "tid", "ts", "dur"]
ARGS = ["External id", "external id", "correlation", "device", "stream", "bytes", "Input Dims", "Input type",
        "Concrete Inputs"]
HOSTILE_VALUES = [
    None, True, False, "", "3", "0x10", "X", "kernel", [], {}, [1, 2], {"a": 1}, 0, -1, -0.0, 0.5, 1.5, 3.25,
    2**53 + 1, 2**63 - 1, 2**63, -2**63, -2**63 - 1, 2**64, 10**30, -10**30, 1e300, -1e300, 1e19, -1e19, 9.3e18,
    4e15, -4e15, 3999999999999999.5, 4e15 - 1, 1e-320, 5e-324, 1.7976931348623157e308, 123456789.123456789,
    1e22, 1e23, 0.1234567890123456789, 1700000000000000.123,
]
#: number spellings written into the text as they are (JSON and not JSON)
NUMBER_TEXTS = [b"NaN", b"Infinity", b"-Infinity", b"1E3", b"1e+3", b"-0", b"0.0000001", b"1e-400", b"1e400",
                b"123456789012345678901234567890", b"-123456789012345678901234567890.5", b"01", b"+1", b".5",
                b"1.", b"0x10", b"1e", b"--1", b"18446744073709551616", b"9223372036854775808",
                b"-9223372036854775809", b"1.000000000000000000000000000001", b"4e15", b"3.99999999999999e15"]
STRING_TEXTS = ["x}, {", '}, {"ph": "X", "cat": "kernel"', "\"traceEvents\": [", "a\\b", "\u00e9\u4e2d\U0001f600",
                "\ud800", "\udfff", "\x00\x01\x1f", "\u2028", "}\n,\n{", "]}", "x" * 3000]
WHITESPACE = [b" ", b"\t", b"\n", b"\r", b"\f", b"\v", b"\xa0", b"\x00", b"\x1c", b"\r\n", b"  \n\t"]


def seeds(traces: Path, rng: random.Random, per_trace: int = 30) -> list[dict]:
    """Documents of 3-30 consecutive events of the real traces, with their metadata."""
    out = []
    found = [traces / rel for rel in SOURCES if (traces / rel).exists()]
    # without ../shared (a clone elsewhere): the real traces the repository ships
    for p in found or sorted((Path(__file__).resolve().parent.parent / "sample_traces").glob("*.json.gz")):
        doc = json.loads(gzip.decompress(p.read_bytes()))
        events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
        meta = {k: v for k, v in doc.items() if k != "traceEvents" and len(json.dumps(v)) < 4000} \
            if isinstance(doc, dict) else {}
        for _ in range(per_trace):
            n = rng.randint(3, 30)
            at = rng.randrange(max(1, len(events) - n))
            out.append({"meta": meta, "events": copy.deepcopy(events[at:at + n])})
    if not out:
        raise SystemExit(f"no seed traces under {traces}")
    return out


# -- structured mutations (on the decoded events) -------------------------------------------

def _an_event(events, rng):
    objs = [e for e in events if isinstance(e, dict)]
    return rng.choice(objs) if objs else None


def m_value(doc, rng):
    ev = _an_event(doc["events"], rng)
    if ev is None:
        return "no event"
    v = rng.choice(HOSTILE_VALUES)
    if rng.random() < 0.6:
        key = rng.choice(FIELDS)
        ev[key] = v
    else:
        key = "args." + rng.choice(ARGS)
        ev.setdefault("args", {})
        if isinstance(ev["args"], dict):
            ev["args"][key[5:]] = v
    return f"value {key}={v!r:.40}"


def m_drop(doc, rng):
    ev = _an_event(doc["events"], rng)
    if not ev:
        return "no event"
    key = rng.choice(list(ev))
    del ev[key]
    return f"drop {key}"


def m_string(doc, rng):
    ev = _an_event(doc["events"], rng)
    if ev is None:
        return "no event"
    key = rng.choice(["name", "cat", "ph", "pid", "tid"])
    s = rng.choice(STRING_TEXTS)
    ev[key] = (ev.get(key) if isinstance(ev.get(key), str) and rng.random() < 0.5 else "") + s
    return f"string {key}"


def m_deep(doc, rng):
    """A value nested ``depth`` levels deep (written into the text after serialising: json.dumps
    recurses)."""
    ev = _an_event(doc["events"], rng)
    if ev is None:
        return "no event"
    depth = rng.choice([2, 30, 250, 255, 256, 257, 300, 600, 2000, 50000])
    marker = f"@@DEEP{depth}:{rng.randrange(4)}@@"
    where = rng.choice(["args.Input Dims", "args.deep", "extra", "args.Concrete Inputs"])
    if where.startswith("args."):
        ev.setdefault("args", {})
        if isinstance(ev["args"], dict):
            ev["args"][where[5:]] = marker
    else:
        ev[where] = marker
    return f"deep {where} {depth}"


def _nest(m: re.Match) -> bytes:
    depth, kind = int(m.group(1)), int(m.group(2))
    inner = [b"[]", b"{}", b"1", b'"x"'][kind]
    opens = b"".join(b"[" if i % 3 else b'{"k":' for i in range(depth))
    closes = b"".join(b"]" if i % 3 else b"}" for i in reversed(range(depth)))
    return opens + inner + closes


_DEEP = re.compile(rb'"@@DEEP(\d+):(\d)@@"')


def m_items(doc, rng):
    item = rng.choice([1, "s", None, [], [{"ph": "X"}], True, 2.5])
    doc["events"].insert(rng.randint(0, len(doc["events"])), item)
    return f"item {item!r}"


def m_shape(doc, rng):
    """The document's shape: the key's place, its value's type, a bare array."""
    kind = rng.choice(["meta last", "events null", "events object", "bare array", "no events", "empty"])
    doc["shape"] = kind
    return f"shape {kind}"


STRUCTURED = [m_value, m_value, m_value, m_drop, m_string, m_string, m_deep, m_items, m_shape]


def serialize(doc, rng) -> bytes:
    events, meta = doc["events"], dict(doc["meta"])
    style = rng.choice([dict(), dict(), dict(separators=(",", ":")), dict(indent=1)])
    ascii_ = rng.random() < 0.5

    def dump(v):
        return json.dumps(v, ensure_ascii=ascii_, allow_nan=True, **style).encode("utf-8", "surrogatepass")
    shape = doc.get("shape")
    if shape == "bare array":
        return dump(events)
    if shape == "events null":
        events = None
    elif shape == "events object":
        events = {"0": events}
    if shape == "no events":
        return dump(meta)
    if shape == "empty":
        events = []
    # one event per line, as Kineto writes them, or the dumper's own layout
    if rng.random() < 0.5 and isinstance(events, list):
        body = b"[\n" + b",\n".join(json.dumps(e, ensure_ascii=ascii_, allow_nan=True).encode("utf-8", "surrogatepass")
                                   for e in events) + b"\n]"
    else:
        body = dump(events)
    parts = [b'"traceEvents": ' + body] + [dump(k) + b": " + dump(v) for k, v in meta.items()]
    if shape == "meta last" or rng.random() < 0.5:
        parts = parts[1:] + parts[:1] if rng.random() < 0.5 else parts
    else:
        parts = parts[1:] + parts[:1]
    return b"{\n" + b",\n".join(parts) + b"\n}\n"


# -- text mutations (on the bytes) -------------------------------------------------------------

def t_whitespace(data: bytes, rng) -> tuple[bytes, str]:
    spots = [i + 1 for i, c in enumerate(data) if c in b",:[{"]
    if not spots:
        return data, "no spot"
    at = rng.choice(spots)
    w = rng.choice(WHITESPACE)
    return data[:at] + w + data[at:], f"whitespace {w!r}"


def t_number(data: bytes, rng) -> tuple[bytes, str]:
    keys = [b'"ts": ', b'"dur": ', b'"ts":', b'"dur":', b'"External id": ', b'"correlation": ', b'"pid": ']
    key = rng.choice(keys)
    at = [i for i in range(len(data)) if data.startswith(key, i)]
    if not at:
        return data, "no number"
    i = rng.choice(at) + len(key)
    j = i
    while j < len(data) and data[j:j + 1] not in b",}\n":
        j += 1
    num = rng.choice(NUMBER_TEXTS)
    return data[:i] + num + data[j:], f"number {num!r}"


def t_dup_key(data: bytes, rng) -> tuple[bytes, str]:
    kind = rng.choice(["event", "top events", "top meta"])
    if kind == "top events":
        extra = rng.choice([b'"traceEvents": [], ', b'"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "x", '
                                                      b'"pid": 1, "tid": 1, "ts": 1, "dur": 1}], '])
        if rng.random() < 0.5:
            return data.replace(b"{", b"{" + extra, 1), "dup traceEvents first"
        end = data.rstrip().rfind(b"}")
        return data[:end] + b", " + extra.rstrip(b", ") + data[end:], "dup traceEvents last"
    if kind == "top meta":
        return data.replace(b"{", b'{"schemaVersion": 1, "schemaVersion": 2, ', 1), "dup meta key"
    at = [i for i in range(len(data)) if data.startswith(b'{"ph"', i) or data.startswith(b'{"name"', i)]
    if not at:
        return data, "no event"
    i = rng.choice(at) + 1
    dup = rng.choice([b'"ts": 5, ', b'"dur": 1, ', b'"cat": "kernel", ', b'"args": {}, ', b'"ph": "i", '])
    return data[:i] + dup + data[i:], f"dup key {dup!r}"


def t_escape(data: bytes, rng) -> tuple[bytes, str]:
    """A character of a string written as an escape, or raw invalid UTF-8 / control bytes in it."""
    quotes = [i for i, c in enumerate(data) if c == 0x22]
    if len(quotes) < 2:
        return data, "no string"
    i = rng.choice(quotes[:-1]) + 1
    bad = rng.choice([b"\\u0041", b"\\u00e9", b"\\ud83d\\ude00", b"\\ud800", b"\\udc00x", b"\\/", b"\\x41",
                      b"\\", b"\xff", b"\xc3\x28", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0\x80", b"\xc0\xaf",
                      b"\x01", b"\x7f", b"\\u004"])
    return data[:i] + bad + data[i:], f"escape {bad!r}"


def t_truncate(data: bytes, rng) -> tuple[bytes, str]:
    at = rng.randrange(1, len(data))
    return data[:at], f"truncate {at}"


def t_flip(data: bytes, rng) -> tuple[bytes, str]:
    at = rng.randrange(len(data))
    b = rng.choice([0x22, 0x5C, 0x7B, 0x7D, 0x5B, 0x5D, 0x2C, 0x3A, rng.randrange(256)])
    return data[:at] + bytes([b]) + data[at + 1:], f"flip {at}"


TEXTUAL = [t_whitespace, t_number, t_number, t_dup_key, t_escape, t_escape, t_truncate, t_flip]


def gzipped(data: bytes, rng) -> tuple[bytes, str]:
    kind = rng.choice(["one member", "members", "bad crc", "truncated", "garbage after", "zero padding",
                       "bad header"])
    if kind == "members":
        cut = rng.randrange(1, len(data))
        return gzip.compress(data[:cut]) + gzip.compress(data[cut:]), "gzip members"
    z = gzip.compress(data, mtime=0)
    if kind == "bad crc":
        i = len(z) - rng.randrange(1, 9)
        return z[:i] + bytes([z[i] ^ (1 << rng.randrange(8))]) + z[i + 1:], "gzip bad crc/size"
    if kind == "truncated":
        return z[:rng.randrange(10, len(z))], "gzip truncated"
    if kind == "garbage after":
        return z + rng.choice([b"garbage", b"\x1f", b"\x1f\x8b\x08", zlib.compress(b"x")]), "gzip garbage after"
    if kind == "zero padding":
        return z + b"\x00" * rng.randint(1, 600), "gzip zero padding"
    if kind == "bad header":
        return z[:3] + bytes([0xFF]) + z[4:], "gzip bad header flags"
    return z, "gzip"


def mutate(seed: dict, rng: random.Random) -> tuple[bytes, str]:
    """One hostile input from a seed document: (its bytes, what was done)."""
    doc = copy.deepcopy(seed)
    done = []
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        done.append(rng.choice(STRUCTURED)(doc, rng))
    data = _DEEP.sub(_nest, serialize(doc, rng))
    for _ in range(rng.choice([0, 0, 1, 1, 2])):
        data, what = rng.choice(TEXTUAL)(data, rng)
        done.append(what)
    if rng.random() < 0.2:
        data, what = gzipped(data, rng)
        done.append(what)
    if not data:
        data = b" "
    return data, "; ".join(done) or "none (the seed as written)"
