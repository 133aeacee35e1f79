"""The optional C extensions (built at install time where a C compiler exists).

Each has a pure-Python (polars) twin that gives the same results; an extension of
another version than its wrapper expects, or one turned off by its environment
variable (to compare the two paths), is not used.
"""

from __future__ import annotations

import importlib
import os
from typing import Any


def load(module: str, abi: int) -> Any:
    """The extension module if it is built and of this ABI, else None."""
    try:
        ext = importlib.import_module(module)
    except ImportError:
        return None
    return ext if getattr(ext, "ABI", None) == abi else None


def turned_off(variable: str) -> bool:
    """The environment says not to use an extension (``VAR=off``, ``0``, ``false``, ``no``), or not to
    use any (``NONGEMM_NATIVE=off``: every C path off, the pure-Python reference paths only)."""
    return any(os.environ.get(v, "on").strip().lower() in ("0", "off", "false", "no")
               for v in ("NONGEMM_NATIVE", variable))
