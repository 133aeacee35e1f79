"""The house rules of docs/architecture.md, checked: the import graph of the package has no
cycle and no edge from a lower stage to a higher one (the result models sit just above the
base modules, so they import nothing else), ``link/`` reads only the contract, renderers
(``report/``) read only models, and no module grows past 400 lines; the floors are folders (at
most 12 modules at the package root, each floor folder's modules in its stages), the words live
in ``vocabulary.py`` only, and docs/architecture.md names files that exist. Imports inside functions
count; ``TYPE_CHECKING`` blocks do not."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "nongemm_trace"

#: the stages, lowest first; a module may import its own stage or lower ones only. A floor folder
#: (``FLOORS``) is named once where all its modules share a stage; a dotted name places one module
STAGES = [
    ("base", ("_version", "errors", "vocabulary", "schema", "core", "devices", "examples")),
    ("models", ("models",)),
    ("load", ("load",)),
    ("link", ("link",)),
    ("classify", ("classify",)),
    ("measure", ("metrics", "pipeline", "pipeline.selection", "pipeline.measure", "pipeline.options")),
    ("analysis", ("pipeline.analysis", "pipeline.context")),
    ("analyses", ("pipeline.api", "analyses", "writers", "testing")),
    ("render", ("report",)),
    ("pipelines", ("runs", "report_page", "integrations", "pytest_plugin")),
    ("command line", ("cli", "commands", "__main__", "")),
]

#: the floors of the tree (docs/architecture.md, "The tree"): the stages each folder's modules may sit in
FLOORS = {
    "core": ("base",),
    "pipeline": ("measure", "analysis", "analyses"),
    "analyses": ("analyses",),
    "writers": ("analyses",),
    "runs": ("pipelines",),
    "commands": ("command line",),
}
#: the package root holds the entry points and the base words, nothing else (issue #34)
MAX_ROOT_MODULES = 12


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(PKG)
        if rel.parts[0] == "collectors":
            continue
        name = ".".join(rel.with_suffix("").parts)
        out[name[: -len(".__init__")] if name.endswith(".__init__") else ("" if name == "__init__" else name)] = p
    return out


MODULES = _modules()


def _stage(mod: str) -> int:
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(STAGES):
        for pre in prefixes:
            if (mod == pre or mod.startswith(pre + ".") or (pre == "" and mod == "")) and len(pre) > best:
                best, rank = len(pre), i
    assert rank is not None, f"module {mod!r} is in no stage of this test: add it"
    return rank


#: a result model's notebook view may call its HTML renderer (Jupyter asks the model itself);
#: only from a method named ``_repr_html_`` and only these modules (the HTML renderers)
DISPLAY_HOOK, DISPLAY_RENDERERS = "_repr_html_", {"report.html", "report.html_latency"}


def _imports(mod: str, display_hooks: bool = True, type_only: bool = False) -> set[str]:
    """What ``mod`` imports; ``display_hooks=False`` leaves out the imports inside ``_repr_html_``
    methods that name the HTML renderer; ``type_only=True`` counts the ``TYPE_CHECKING`` imports too."""
    path = MODULES[mod]
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    found: set[str] = set()

    class Visitor(ast.NodeVisitor):
        def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
            if display_hooks or node.name != DISPLAY_HOOK:
                self.generic_visit(node)

        def visit_If(self, node: ast.If) -> None:
            if "TYPE_CHECKING" in ast.unparse(node.test) and not type_only:
                for n in node.orelse:
                    self.visit(n)
                return
            self.generic_visit(node)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - (node.level - 1)]
                target = ".".join(parts + ([node.module] if node.module else []))
            elif node.module and node.module.startswith("nongemm_trace"):
                target = node.module[len("nongemm_trace."):] if node.module != "nongemm_trace" else ""
            else:
                return
            for alias in node.names:
                sub = f"{target}.{alias.name}" if target else alias.name
                found.add(sub if sub in MODULES else target)

        def visit_Import(self, node: ast.Import) -> None:
            for alias in node.names:
                if alias.name.startswith("nongemm_trace."):
                    found.add(alias.name[len("nongemm_trace."):])

    Visitor().visit(ast.parse(path.read_text()))
    found.discard(mod)
    return {m for m in found if m in MODULES}


@cache
def graph() -> dict[str, set[str]]:
    """What each module imports (read on first use, not while every worker collects the tests)."""
    return {m: _imports(m) for m in MODULES}


@cache
def staged() -> dict[str, set[str]]:
    """The graph without the display hooks' imports of the HTML renderer."""
    return {m: _imports(m) - (DISPLAY_RENDERERS - _imports(m, display_hooks=False)) for m in MODULES}


def _cycles(g: dict[str, set[str]]) -> list[str]:
    """The cycles a depth-first walk of ``g`` meets, each as ``a -> b -> a``."""
    state: dict[str, int] = {}
    cycles = []

    def walk(m: str, path: list[str]) -> None:
        state[m] = 1
        path.append(m)
        for n in sorted(g[m]):
            if state.get(n) == 1:
                cycles.append(" -> ".join(path[path.index(n):] + [n]))
            elif n not in state:
                walk(n, path)
        path.pop()
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            walk(m, [])
    return cycles


def test_no_import_cycles():
    assert _cycles(graph()) == []


def test_type_only_imports_close_one_cycle_only():
    """With the ``TYPE_CHECKING`` imports counted, the one cycle is the table contract's: ``schema.py``
    names the ``Trace`` that ``core/trace.py`` builds from its columns (docs/architecture.md, "The import
    graph, measured"). A stage's annotation names a lower stage's type, never one above it."""
    assert _cycles({m: _imports(m, type_only=True) for m in MODULES}) == ["core.trace -> schema -> core.trace"]


def test_no_import_from_a_lower_stage_to_a_higher_one():
    upward = [f"{m} ({STAGES[_stage(m)][0]}) imports {n} ({STAGES[_stage(n)][0]})"
              for m, deps in staged().items() for n in deps if _stage(n) > _stage(m)]
    assert upward == []


def test_link_reads_only_the_contract():
    for m, deps in graph().items():
        if m == "link" or m.startswith("link."):
            assert not [d for d in deps if d.split(".")[0] in ("load", "classify")], m


def test_renderers_read_only_models():
    """``report/`` renders result models: it imports the models and the base modules, never the code
    that measures (so a renderer cannot recompute what the model holds)."""
    allowed = {name for name, _ in STAGES[:2]}
    for m, deps in graph().items():
        if m == "report" or m.startswith("report."):
            wrong = [d for d in deps if not (d == "report" or d.startswith("report."))
                     and STAGES[_stage(d)][0] not in allowed]
            assert wrong == [], m


def test_no_module_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in PKG.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 400}
    assert long == {}


def test_the_root_holds_few_modules():
    root = sorted(p.name for p in PKG.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


def test_each_floor_folder_holds_its_floor():
    assert [f for f in FLOORS if f not in MODULES] == []
    wrong = [f"{m} ({STAGES[_stage(m)][0]})" for m in MODULES for floor, stages in FLOORS.items()
             if (m == floor or m.startswith(floor + ".")) and STAGES[_stage(m)][0] not in stages]
    assert wrong == []


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def test_the_words_are_spelled_in_vocabulary_only():
    """No module but ``vocabulary.py`` lists the classes, levels, metrics, time bases, evidence rungs or
    attributions as a literal, or writes out a metric's, level's or time basis's text (docstrings may)."""
    from nongemm_trace import vocabulary as V

    words = {"classes": set(V.CLASSES), "levels": set(V.LEVELS), "metrics": set(V.METRICS),
             "time bases": set(V.TIME_BASES), "evidence rungs": set(V.EVIDENCE), "attributions": set(V.ATTRIBUTIONS)}
    texts = {*V.METRICS.values(), *V.LEVELS.values(), *V.TIME_BASES.values()}
    found = []
    for m, path in MODULES.items():
        if m == "vocabulary":
            continue
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) > 1 \
                    and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
                found += [f"{m}:{node.lineno} spells the {what}" for what, w in words.items()
                          if {e.value for e in node.elts} == w]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                found += [f"{m}:{node.lineno} spells {t!r}" for t in texts if t in node.value]
    assert found == []


def test_the_architecture_doc_names_what_exists():
    """docs/architecture.md: every file it names exists (paths from the repository or the package
    root, or a file name found in the package), every floor folder and root module is in it, and
    every ``Analysis`` method it names is one."""
    from nongemm_trace.pipeline.analysis import Analysis

    text = (ROOT / "docs" / "architecture.md").read_text()
    names = set(re.findall(r"[\w./-]*\w\.(?:py|toml|c)\b", text))
    files = {p.name for p in PKG.rglob("*") if p.is_file()}
    missing = sorted(n for n in names if not ((ROOT / n).exists() or (PKG / n).exists()
                                              or ("/" not in n and n in files)))
    assert missing == []
    assert [f for f in FLOORS if f"{f}/" not in text] == []
    assert [p.name for p in PKG.glob("*.py") if p.name not in text] == []
    assert [n for n in re.findall(r"`Analysis\.(\w+)\(", text) if not hasattr(Analysis, n)] == []


def test_the_public_names_resolve_on_their_floors():
    """Every name of ``nongemm_trace.__all__`` imports (the lazy table names the floor modules), and the
    entry points of pyproject.toml name modules that exist."""
    import importlib

    import nongemm_trace

    assert [n for n in nongemm_trace.__all__ if getattr(nongemm_trace, n, None) is None] == []
    text = (ROOT / "pyproject.toml").read_text()
    for module in re.findall(r'^\S+ = "(nongemm_trace[\w.]*)(?::\w+)?"$', text, re.M):
        importlib.import_module(module)


def test_moved_modules_import_by_their_old_path_as_the_same_module():
    """A script written against the flat root (``import nongemm_trace.analysis``, a monkeypatch of
    its ``load_trace``) reaches the module on its floor; the public functions are not shadowed."""
    import importlib
    import subprocess
    import sys
    import warnings

    import nongemm_trace
    from nongemm_trace.core.moved import MOVED

    for old, new in MOVED.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            moved = importlib.import_module(f"nongemm_trace.{old}")
        assert moved is importlib.import_module(f"nongemm_trace.{new}"), old
        assert moved.__spec__.name == f"nongemm_trace.{new}", old
    assert callable(nongemm_trace.check) and callable(nongemm_trace.compare)
    # in a fresh interpreter, the old path first (no new-path import before it)
    code = ("import nongemm_trace.analysis as A, nongemm_trace.pipeline.analysis as B, nongemm_trace; "
            "from nongemm_trace.check import check; "
            "assert A is B and callable(nongemm_trace.explain) and nongemm_trace.check is check")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_every_registered_analysis_has_a_json_and_a_terminal_renderer():
    """An analysis is reachable from the command line and the library only through its renderers: each
    registered one draws its model at a terminal and writes its JSON document."""
    from nongemm_trace.analyses import specs
    from nongemm_trace.report import formats

    assert specs(), "no analysis registered"
    missing = [f"{s.name} ({s.model}): {sorted({'json', 'table'} - set(formats(s.model)))}" for s in specs()
               if not {"json", "table"} <= set(formats(s.model))]
    assert missing == []


def test_registration_refuses_a_second_analysis_or_renderer_of_one_name():
    from dataclasses import replace

    import pytest

    from nongemm_trace.analyses import spec
    from nongemm_trace.analyses.registry import register
    from nongemm_trace.report.registry import renders

    with pytest.raises(ValueError, match="registered already"):
        register(replace(spec("launch"), help="another launch"))
    with pytest.raises(ValueError, match="registered already"):
        renders("launch", "json")(lambda model, view: "")


#: the modules that may import by a computed name: the loader of the C extensions, and the finder that
#: maps the old module paths to the new ones (its job is the import machinery itself)
DYNAMIC_IMPORTERS = {"core.native", "core.moved"}


def test_no_importlib_outside_the_native_loader():
    """Every import is a static statement (ruff, mypy and these tests see it), except in the native
    loader: ``importlib`` is used only for its ``resources`` (data files), and nothing calls ``__import__``."""
    found = []
    for m, path in MODULES.items():
        if m in DYNAMIC_IMPORTERS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import) and any(a.name.startswith("importlib") for a in node.names):
                found.append(f"{m}:{node.lineno} import importlib")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("importlib") \
                    and (node.module != "importlib" or any(a.name != "resources" for a in node.names)):
                found.append(f"{m}:{node.lineno} from {node.module} import …")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "__import__":
                found.append(f"{m}:{node.lineno} __import__")
    assert found == []


#: private names of other libraries that a module reads on purpose: argparse keeps its subparsers and
#: actions private (the parser's error for an unknown option of a subcommand needs them), the process
#: ends with ``os._exit`` where the interpreter's teardown must not run, and Ray's key-value store of a
#: cluster (where a task's memory kill is told) has no public name
FOREIGN_PRIVATES = {"_exit", "_getframe", "_actions", "_SubParsersAction", "_internal_kv_put", "_internal_kv_get",
                    "_internal_kv_del"}


def test_no_module_reads_another_modules_private_names():
    """A leading underscore means "this module's own": no module imports another's private name
    (``from .html import _table``) or reads a private attribute of something that is not itself
    (``other._cache``; ``self._x`` and ``cls._x`` are the object's own)."""
    found = []
    for m, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("nongemm_trace")):
                found += [f"{m}:{node.lineno} imports {a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")) \
                    and node.attr not in FOREIGN_PRIVATES:
                found.append(f"{m}:{node.lineno} reads .{node.attr}")
    assert found == []


def test_every_environment_switch_is_declared_once():
    """``NONGEMM_*`` switches are named, typed and documented in ``core/env.py``; every one a module names
    is declared there, and no other module reads ``os.environ`` for one."""
    from nongemm_trace.core.env import SWITCHES

    named, direct = set(), []
    for m, path in MODULES.items():
        text = path.read_text()
        named |= set(re.findall(r"\bNONGEMM_[A-Z_]+[A-Z]\b", text))
        if m != "core.env":
            direct += [f"{m}: {line.strip()}" for line in text.splitlines()
                       if re.search(r"environ(\.get)?[\[(]\s*[\"']NONGEMM_", line)]
    assert sorted(named - set(SWITCHES)) == []
    assert direct == []
