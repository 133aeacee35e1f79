"""The optional C extensions (built at install time where a C compiler exists).

Each has a pure-Python (polars) twin that gives the same results; an extension of
another version than its wrapper expects, or one turned off by its environment
variable (to compare the two paths), is not used.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from . import env


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
    return env.is_off("NONGEMM_NATIVE") or env.is_off(variable)


#: the extensions setup.py builds, by what they do
EXTENSIONS = {"_nongemm_scan": "trace scanner", "_nongemm_sweep": "op-tree sweep"}
#: what running without them costs (docs/benchmarks.md has the figures)
WITHOUT = "the pure-Python paths give the same results, slower on big traces (docs/benchmarks.md)"


def built() -> dict[str, bool]:
    """Which extensions are installed (found, not imported: ``--version`` stays instant)."""
    return {name: importlib.util.find_spec(name) is not None for name in EXTENSIONS}


def build_line() -> str:
    """One line for ``--version``: the C build present, partly, or not at all."""
    have = built()
    if all(have.values()):
        return "C extensions: built (" + ", ".join(EXTENSIONS.values()) + ")"
    missing = [EXTENSIONS[n] for n, ok in have.items() if not ok]
    return f"C extensions: not built ({', '.join(missing)}; no C compiler at install?): {WITHOUT}"
