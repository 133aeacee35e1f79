"""The C scanner extension (``_nongemm_scan``), the routing it is given, and how the loader
may decode chunks side by side. Its results become tables in :mod:`.fast_scan`."""

from __future__ import annotations

import os
from typing import Any

from ...core import env, native
from .. import roles

#: the result layout the loader reads (the extension's ``ABI``)
ABI = 10
SCANNER: Any = native.load("_nongemm_scan", ABI)
#: the scanner's tables, in its order: the loader's TABLES, then other accelerators' events
TABLE_CODES = {key: code for code, key in enumerate((*roles.TABLES, "other"))}


def available() -> bool:
    """The C scanner is built, of this version, and not turned off (``NONGEMM_FAST_SCAN=off``)."""
    return SCANNER is not None and not native.turned_off("NONGEMM_FAST_SCAN")


def _routes(keep_python: bool) -> tuple[tuple[str, int, str | None], ...]:
    routes = roles.PY_ROUTES if keep_python else roles.ROUTES
    return tuple((cat, TABLE_CODES[key], roles.ACTIVITY_KIND.get(cat)) for cat, key in routes.items())


#: the scanner's routing argument: (category, table, activity kind) for each tabled category
ROUTES = {keep: _routes(keep) for keep in (False, True)}


def threads_allowed() -> bool:
    """Whether chunks may be scanned by threads side by side: on a machine with two or more cores,
    unless ``NONGEMM_SCAN_THREADS=off`` (a batch worker sets it: the batch already runs one trace
    per core)."""
    if env.is_off("NONGEMM_SCAN_THREADS"):
        return False
    return (os.cpu_count() or 1) >= 2
