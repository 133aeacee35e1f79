"""A device's part name from its properties, where the trace's name is empty or generic.

vLLM's ROCm traces write an empty ``deviceProperties.name`` (and older ROCm ones "AMD Radeon
Graphics"), so reports said "unknown device" and the device peaks matched nothing, although the
properties (compute units, architecture version, memory) name the part. The parts and their
properties are data (``identity.toml``); this module only compares.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: names that say no more than the vendor: the properties are asked instead
GENERIC_NAMES = ("", "AMD Radeon Graphics")
_GIB = 1 << 30


@lru_cache(maxsize=1)
def _parts() -> dict[str, dict[str, Any]]:
    text = (resources.files("nongemm_trace.devices") / "identity.toml").read_text(encoding="utf-8")
    return dict(tomllib.loads(text).get("parts", {}))


def identify(props: dict[str, Any] | None) -> str | None:
    """The part whose ``where`` properties all equal ``props``' and whose memory range holds its
    ``totalGlobalMem``; None when the name is specific already, or no part (or several) fits."""
    if not isinstance(props, dict) or str(props.get("name") or "").strip() not in GENERIC_NAMES:
        return None
    mem = props.get("totalGlobalMem")
    fits = [name for name, d in _parts().items()
            if all(props.get(k) == v for k, v in d.get("where", {}).items())
            and isinstance(mem, (int, float)) and d["memory_gib"][0] * _GIB <= mem <= d["memory_gib"][1] * _GIB]
    return fits[0] if len(fits) == 1 else None
