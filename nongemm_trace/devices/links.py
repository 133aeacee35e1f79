"""The link a device's collectives run over (data: ``links.toml``, keyed by ``peaks.toml``'s names)."""

from __future__ import annotations

import sys
from functools import lru_cache
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from . import match_device


@lru_cache(maxsize=1)
def _links() -> dict[str, dict[str, Any]]:
    return tomllib.loads((resources.files("nongemm_trace.devices") / "links.toml").read_text())["links"]


def link_of(props: dict[str, Any] | None) -> dict[str, Any] | None:
    """``{device, gbps, link, source}`` for a trace's device properties; None where the device or its
    link is not known (a CPU-only run, a part the tables do not hold)."""
    spec = match_device(props)
    if spec is None or spec.name not in _links():
        return None
    d = _links()[spec.name]
    return {"device": spec.name, "gbps": float(d["gbps"]), "link": str(d["link"]), "source": str(d["source"])}
