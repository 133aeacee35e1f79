"""Device peak specs (data: ``peaks.toml``), matched on a trace's ``deviceProperties``.

Every figure is checked when the table is read, the package's and a ``--device-spec`` file alike:
a peak of 0, -1, NaN, infinity, text, a boolean or a list would divide by zero or give negative or
meaningless roofline percentages, so a table holding one is refused in one line that names the TOML
file, the device and the field.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from ..core.reader import read_text
from ..errors import TraceError

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
#: the largest peak accepted, in TFLOP/s or TB/s: a million times today's largest (a figure beyond it is a
#: typo, and 1e308 TFLOP/s would overflow to infinity once in FLOP/s)
MAX_PEAK = 1e9


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    tflops: dict[str, float]
    memory_tbps: float
    source: str

    def peak_flops(self, precision: str) -> float | None:
        """FLOP/s for a precision, falling back to the nearest lower-throughput mode it has."""
        order = {"fp4": ["fp4", "fp8", "bf16"], "fp8": ["fp8", "bf16", "fp16"], "int8": ["int8", "fp8", "bf16"],
                 "bf16": ["bf16", "fp16"], "fp16": ["fp16", "bf16"], "tf32": ["tf32", "fp32"], "fp32": ["fp32"]}
        for p in order.get(precision, [precision]):
            if p in self.tflops:
                return self.tflops[p] * 1e12
        return None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "tflops": dict(self.tflops), "memory_tbps": self.memory_tbps, "source": self.source}


@lru_cache(maxsize=4)
def _table(path: str | None = None) -> dict[str, dict[str, Any]]:
    # a file given is read bounded, whatever the path names (a device, a FIFO)
    text = read_text(path, "device spec") if path else \
        (resources.files("nongemm_trace.devices") / "peaks.toml").read_text()
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TraceError(path or "peaks.toml", f"invalid device spec TOML: {exc}") from None
    return _checked(raw.get("devices", {}), path or "peaks.toml")


def _checked(devs: Any, where: str) -> dict[str, dict[str, Any]]:
    """The ``[devices]`` tables of the file ``where``, each figure a finite number above 0 (up to
    :data:`MAX_PEAK`), ``match`` a list of patterns and ``where`` a table; else one refusal naming the file."""
    if not isinstance(devs, dict):
        raise TraceError(where, f"'devices' is {devs!r:.40}, not a table of [devices.NAME] tables")
    for name, d in devs.items():
        if not isinstance(d, dict):
            raise TraceError(where, f"device {name} is {d!r:.40}, not a table ([devices.{name}] with its figures)")
        if "memory_tbps" not in d or not any(p in d for p in PRECISIONS):
            raise TraceError(where, f"device {name} needs memory_tbps and at least one TFLOP/s figure")
        for key in ("memory_tbps", *(p for p in PRECISIONS if p in d)):
            value = d[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not 0 < value <= MAX_PEAK:
                unit = "TB/s" if key == "memory_tbps" else "TFLOP/s"
                raise TraceError(where, f"device {name}: {key} is {value!r:.40}, not a finite number of {unit} "
                                        f"above 0 (at most {MAX_PEAK:g})")
        match, within = d.get("match", []), d.get("where", {})
        if not isinstance(match, list) or not all(isinstance(p, str) for p in match):
            raise TraceError(where, f"device {name}: match is {match!r:.40}, not a list of name patterns")
        if not isinstance(within, dict):
            raise TraceError(where, f"device {name}: where is {within!r:.40}, not a table of deviceProperties")
    return devs


def _spec(name: str, d: dict[str, Any]) -> DeviceSpec:
    return DeviceSpec(name, {p: float(d[p]) for p in PRECISIONS if p in d}, float(d["memory_tbps"]),
                      str(d.get("source", "")))


def match_device(props: dict[str, Any] | None, override: str | None = None) -> DeviceSpec | None:
    """The spec for a trace's first device. ``override`` is a spec name from the table, or a
    TOML file with one ``[devices.NAME]`` entry."""
    if override:
        if override.endswith(".toml"):
            table = _table(override)
            if len(table) != 1:
                raise TraceError(override, "a --device-spec file must hold exactly one [devices.NAME] table")
            name, d = next(iter(table.items()))
            return _spec(name, d)
        table = _table()
        if override not in table:
            raise TraceError(None, f"unknown device spec '{override}' (known: {', '.join(sorted(table))})")
        return _spec(override, table[override])
    if not props:
        return None
    from .identity import identify

    pname = identify(props) or str(props.get("name", ""))  # an empty or generic name: the part's
    for name, d in _table().items():
        if not any(re.search(p, pname, re.IGNORECASE) for p in d.get("match", [])):
            continue
        where = d.get("where", {})
        if all(props.get(k) == v for k, v in where.items()):
            return _spec(name, d)
    return None


def known_devices() -> list[str]:
    return sorted(_table())
