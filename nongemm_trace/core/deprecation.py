"""One way to retire a name: the old module path or function keeps working for a release, with a
``DeprecationWarning`` that names the new one and the version it goes away in.

The warning is attributed to the first frame outside the import machinery and this package, so that
Python's default filters show it where the user's own code (``__main__``, a test) used the old name.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from types import FrameType

_PACKAGE_DIR = str(Path(__file__).resolve().parent.parent)

#: the release that drops the names retired so far: the aliases name it rather than spell it, so the
#: timetable is one line
REMOVAL = "0.3"


def _caller_stacklevel() -> int:
    """The stacklevel of the first caller that is neither importlib nor nongemm_trace itself."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith("<frozen importlib") or name.startswith(_PACKAGE_DIR)):
            return level
        frame, level = frame.f_back, level + 1
    return level


def deprecated(old: str, new: str, removal: str) -> None:
    """Warn that ``old`` is now ``new`` and goes away in version ``removal``."""
    warnings.warn(f"{old} is deprecated: use {new} (the old name goes away in nongemm-trace {removal})",
                  DeprecationWarning, stacklevel=_caller_stacklevel())

