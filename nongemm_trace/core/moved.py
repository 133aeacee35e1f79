"""Old module paths of modules that moved into the floors' folders (docs/architecture.md, "The
tree"): ``import nongemm_trace.analysis`` or ``from nongemm_trace.check import check`` (scripts and
monkeypatches written before the move) still import the module at its new path, the same module
object, with a :func:`~nongemm_trace.core.deprecation.deprecated` warning naming the new path and the
version the old one goes away in. A moved package moves with its modules: ``nongemm_trace.latency.whatif``
is ``nongemm_trace.analyses.latency.whatif``. The finder is asked before the path finder, so an old
path never loads a second copy of a module from the new folder.

Four old module names are now public functions of the package (``check``, ``compare``, ``explain``,
``annotate``): importing the old module must not replace the function on the package, which the
import system does by setting the submodule as an attribute of its parent; the package binds the
module's function of that name instead (``Package.__setattr__``)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

from .deprecation import REMOVAL, deprecated

#: old module name (under the package) -> its new path
MOVED = {
    "trace": "core.trace", "frames": "core.frames", "native": "core.native", "safe_write": "core.safe_write",
    "analysis": "pipeline.analysis", "selection": "pipeline.selection", "measure": "pipeline.measure",
    "api": "pipeline.api", "launch": "analyses.launch", "weak": "analyses.weak", "convert": "writers.convert",
    "batch": "runs.batch", "batch_workers": "runs.batch_workers", "cli_args": "commands.args",
    "check": "analyses.check", "compare": "analyses.compare", "explain": "analyses.explain",
    "annotate": "writers.annotate", "analyses.annotate": "writers.annotate", "analyses.convert": "writers.convert",
    "flops": "analyses.flops", "latency": "analyses.latency",
}

PACKAGE = __name__.split(".")[0]


def new_path(old: str) -> str | None:
    """The new path (under the package) of old module path ``old``, a module of a moved package
    included; None for a path that did not move."""
    if old in MOVED:
        return MOVED[old]
    parent = next((p for p in sorted(MOVED, key=len, reverse=True) if old.startswith(p + ".")), None)
    return None if parent is None else MOVED[parent] + old[len(parent):]


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """An old path imports the module at its new one: the same module object, its own spec kept."""

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        head, _, tail = fullname.partition(".")
        if head != PACKAGE or new_path(tail) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        new = f"{PACKAGE}.{new_path(spec.name.partition('.')[2])}"
        deprecated(f"{spec.name} (module)", new, REMOVAL)
        module = importlib.import_module(new)
        self._specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = self._specs.pop(module.__name__, module.__spec__)  # importlib set the alias's


class Package(types.ModuleType):
    """The package's module type: a public function keeps its name when its old module is imported."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in MOVED and callable(getattr(value, name, None)):
            value = getattr(value, name)  # the import system binding the old submodule: keep the function
        super().__setattr__(name, value)


def install() -> None:
    """Install the finder once and give the package its module type."""
    if not any(isinstance(f, MovedModules) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModules())
    sys.modules[PACKAGE].__class__ = Package
