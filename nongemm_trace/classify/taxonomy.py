"""Taxonomies are TOML data files: read once, validated, versioned by name.

A taxonomy names each category's class, the op names and patterns of each category, the wrapper
patterns (ranges that are not operators), the kernel-name rules, and the Inductor fusion rules. A user
file may say ``extends = "default"`` (or a path): its lists are added in front of the parent's (user
rules win), its scalars replace the parent's."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from ..core.reader import read_text
from ..errors import TraceError
from ..vocabulary import BUILTIN_CATEGORIES, CLASSES, KERNEL_EVIDENCE, LEVELS, METRICS, either
from .engine_rules import EngineRules, engine_rules
from .matcher import Compiled, run_reason
from .tokens import TokenIndex, parse_runs


@dataclass(frozen=True)
class KernelRule:
    """A kernel-name rule: a regular expression (``pattern``) and/or identifier-token runs
    (``tokens``, see :mod:`.tokens`); either matching is a hit."""

    pattern: re.Pattern | None
    category: str
    priority: int
    authoritative: bool
    order: int
    runs: tuple[tuple[str, ...], ...] = ()
    evidence: str = "family"

    def match(self, name: str, toks: TokenIndex) -> str | None:
        """What of this rule matched ``name`` (whose tokens are ``toks``), or None: the rule-by-rule
        reference of :meth:`.matcher.Compiled.kernel_rule`, which decides in one pass over the tokens."""
        if self.pattern is not None and self.pattern.search(name):
            return f"/{self.pattern.pattern}/"
        for run in self.runs:
            if toks.has(run):
                return run_reason(run)
        return None


@dataclass(frozen=True)
class FusionRules:
    priority: tuple[str, ...]
    template_category: str
    epilogue_ops: frozenset[str]
    epilogue_category: str
    signatures: tuple[tuple[frozenset[str], str], ...]


@dataclass(frozen=True)
class QdqRules:
    """Quantize/dequantize dataflow vocabulary (see :mod:`nongemm_trace.classify.calls`)."""

    cast_ops: frozenset[str] = frozenset()
    dtype_arg_ops: frozenset[str] = frozenset()
    dtype_codes: frozenset[int] = frozenset()
    type_pattern: str = "(?!)"
    chain_start_ops: frozenset[str] = frozenset()
    chain_ops: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Semantics:
    """Which op categories are generic implementations, and which name a specific operation
    whose generic callees take its category (see :mod:`.semantics`)."""

    generic_categories: frozenset[str] = frozenset()
    specific_categories: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Chain:
    """An operation written out as consecutive sibling calls (see :mod:`.semantics`): each step is
    a set of alternative op base names."""

    category: str
    ops: tuple[tuple[str, ...], ...]
    after: tuple[tuple[str, ...], ...] = ()
    follows: tuple[str, ...] = ()
    name: str = ""


@dataclass(frozen=True)
class Taxonomy:
    """One taxonomy, as read and validated; frozen, since loaded taxonomies are cached and shared
    (:func:`extend_taxonomy` makes a new one)."""

    name: str
    version: str
    description: str
    classes: dict[str, str]
    op_full: dict[str, str]
    op_base: dict[str, str]
    op_patterns: list[tuple[re.Pattern, str]]
    wrapper_patterns: list[re.Pattern]
    annotation_categories: frozenset[str]
    composite_names: frozenset[str]
    composite_patterns: list[re.Pattern]
    kernel_rules: list[KernelRule]
    fusion: FusionRules
    activity_kinds: dict[str, str]
    #: (pattern, category) of the memcpys between host and device (``[transfers]``), or None
    transfers: tuple[str, str] | None = None
    qdq: QdqRules = field(default_factory=QdqRules)
    module_names: dict[str, str] = field(default_factory=dict)
    module_patterns: list[tuple[re.Pattern, str]] = field(default_factory=list)
    default_level: str = "launch"
    default_metric: str = "gpu"
    derive_backward: bool = True
    top_fallback: bool = True
    fusion_enabled: bool = True
    source: str = ""
    vocabulary: tuple[str, ...] = field(default=())
    #: (token run, category) of op names, tried after the op patterns (see :mod:`.tokens`)
    op_token_runs: tuple[tuple[tuple[str, ...], str], ...] = ()
    semantics: Semantics = field(default_factory=Semantics)
    chains: tuple[Chain, ...] = ()
    #: deployment stacks (TensorRT layers, ONNX Runtime nodes): see :class:`EngineRules`
    engines: EngineRules = field(default_factory=lambda: EngineRules())

    @cached_property
    def compiled(self) -> Compiled:
        """The name rules compiled for speed (:mod:`.matcher`), built on first use."""
        return Compiled(self)

    @property
    def categories(self) -> tuple[str, ...]:
        """The categories this taxonomy declares (its ``[classes]`` table), in its order."""
        return tuple(self.classes)

    def class_of(self, category: str) -> str:
        return self.classes.get(category, "unclassified")

    def __repr__(self) -> str:
        """One line of counts (the generated repr printed every rule: 57,150 characters for the default)."""
        ops = len(self.op_full) + len(self.op_base) + len(self.op_patterns) + len(self.op_token_runs)
        return (f"Taxonomy(name={self.name!r}, version={self.version!r}, categories={len(self.classes)}, "
                f"op_rules={ops}, kernel_rules={len(self.kernel_rules)}, source={Path(self.source).name!r})")


def builtin_names() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("nongemm_trace.taxonomy").iterdir()
                  if p.name.endswith(".toml"))


def load_taxonomy(name_or_path: str | Path = "default") -> Taxonomy:
    """Load a built-in taxonomy by name, or a TOML file by path."""
    return _load(str(name_or_path))


@lru_cache(maxsize=16)
def _load(spec: str) -> Taxonomy:
    raw, where = _read(spec)
    merged = _resolve(raw, where, depth=0)
    return _build(merged, where)


def _read(spec: str) -> tuple[dict[str, Any], str]:
    p = Path(spec)
    if spec.endswith(".toml") or p.exists():
        text = read_text(p, "taxonomy")  # bounded, whatever the path names (a device, a FIFO)
        where = str(p)
    else:
        res = resources.files("nongemm_trace.taxonomy") / f"{spec}.toml"
        if not res.is_file():
            raise TraceError(None, f"unknown taxonomy '{spec}' (built-in: {', '.join(builtin_names())}; "
                                   "or give a .toml path)")
        text = res.read_text(encoding="utf-8")
        where = f"builtin:{spec}"
    try:
        return tomllib.loads(text), where
    except tomllib.TOMLDecodeError as exc:
        raise TraceError(where, f"invalid taxonomy TOML: {exc}") from None


def _resolve(raw: dict[str, Any], where: str, depth: int) -> dict[str, Any]:
    parent_spec = raw.get("extends")
    if not parent_spec:
        return raw
    if depth > 8:
        raise TraceError(where, "taxonomy 'extends' chain is too deep (a cycle?)")
    parent, pwhere = _read(str(parent_spec))
    parent = _resolve(parent, pwhere, depth + 1)
    return _merge(parent, raw)


def _merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base[k], v) if k in base else v
        return out
    if isinstance(base, list) and isinstance(over, list):
        return list(over) + list(base)  # user rules first: they win
    return over


def _compile(pattern: str, where: str, what: str, flags: int = 0) -> re.Pattern:
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise TraceError(where, f"bad regular expression in {what}: {pattern!r} ({exc})") from None


def _check_category(known: tuple[str, ...], cat: Any, where: str, what: str) -> str:
    if cat not in known:
        raise TraceError(where, f"unknown category {cat!r} in {what} (declared in [classes]: {', '.join(known)})")
    return cat


def _build(raw: dict[str, Any], where: str) -> Taxonomy:
    # [classes] declares the categories: every other table may name only these
    classes = dict(raw.get("classes", {}))
    for cat, cls in classes.items():
        if not isinstance(cat, str) or not cat.strip():
            raise TraceError(where, f"[classes]: a category name must be a non-empty string, not {cat!r}")
        if cls not in CLASSES:
            raise TraceError(where, f"unknown class {cls!r} for category {cat!r} (known: {', '.join(CLASSES)})")
    missing = [c for c in BUILTIN_CATEGORIES if c not in classes]
    if missing:
        raise TraceError(where, f"[classes] lacks categories the classifier itself names: {', '.join(missing)}")
    known = tuple(classes)

    op_full: dict[str, str] = {}
    op_base: dict[str, str] = {}
    op_patterns: list[tuple[re.Pattern, str]] = []
    op_token_runs: list[tuple[tuple[str, ...], str]] = []
    for cat, spec in raw.get("ops", {}).items():
        _check_category(known, cat, where, "[ops]")
        for n in spec.get("names", []):
            target = op_full if "::" in n else op_base
            target.setdefault(n, cat)  # first (user) entry wins
        for pat in spec.get("patterns", []):
            op_patterns.append((_compile(pat, where, f"[ops.{cat}] patterns"), cat))
        op_token_runs.extend((run, cat) for run in parse_runs(spec.get("tokens", [])))

    wr = raw.get("wrappers", {})
    comp = raw.get("composite", {})
    kernel_rules = []
    for i, k in enumerate(raw.get("kernels", [])):
        if ("pattern" not in k and "tokens" not in k) or "category" not in k:
            raise TraceError(where, f"kernel rule #{i + 1} needs 'pattern' or 'tokens', and 'category'")
        toks = k.get("tokens", [])
        if not isinstance(toks, list) or not all(isinstance(t, str) for t in toks):
            raise TraceError(where, f"kernel rule #{i + 1}: 'tokens' must be a list of strings")
        evidence = str(k.get("evidence", "family"))
        if evidence not in KERNEL_EVIDENCE:
            raise TraceError(where, f"kernel rule #{i + 1}: evidence must be one of {', '.join(KERNEL_EVIDENCE)}")
        kernel_rules.append(KernelRule(
            pattern=_compile(k["pattern"], where, f"kernel rule #{i + 1}", re.IGNORECASE) if "pattern" in k else None,
            category=_check_category(known, k["category"], where, f"kernel rule #{i + 1}"),
            priority=int(k.get("priority", 0)), authoritative=bool(k.get("authoritative", False)), order=i,
            runs=parse_runs(toks), evidence=evidence))
    kernel_rules.sort(key=lambda r: (-r.priority, r.order))

    fz = raw.get("fusion", {})
    prio = tuple(fz.get("priority", []))
    for c in prio:
        _check_category(known, c, where, "[fusion] priority")
    sigs = [(frozenset(s.get("ops", [])), _check_category(known, s.get("category"), where, "[fusion] signature"))
            for s in fz.get("signatures", [])]
    fusion = FusionRules(
        priority=prio,
        template_category=_check_category(known, fz.get("template_category", "gemm"), where, "[fusion]"),
        epilogue_ops=frozenset(fz.get("epilogue_ops", [])),
        epilogue_category=_check_category(known, fz.get("epilogue_category", "arithmetic"), where, "[fusion]"),
        signatures=tuple(sigs),
    )
    kinds = {k: _check_category(known, v, where, "[activity_kinds]") for k, v in raw.get("activity_kinds", {}).items()}
    tr = raw.get("transfers")
    transfers = (_compile(tr.get("pattern", "(?!)"), where, "[transfers] pattern").pattern,
                 _check_category(known, tr.get("category"), where, "[transfers]")) if tr else None
    module_names: dict[str, str] = {}
    module_patterns: list[tuple[re.Pattern, str]] = []
    for cat, spec in raw.get("modules", {}).items():
        _check_category(known, cat, where, "[modules]")
        for n in spec.get("names", []):
            module_names.setdefault(n, cat)
        for pat in spec.get("patterns", []):
            module_patterns.append((_compile(pat, where, f"[modules.{cat}] patterns"), cat))
    default_level = str(raw.get("default_level", "launch"))
    if default_level not in LEVELS:
        raise TraceError(where, f"default_level must be {either(LEVELS)}, not {default_level!r}")
    default_metric = str(raw.get("default_metric", "gpu"))
    if default_metric not in METRICS:
        raise TraceError(where, f"default_metric must be {either(METRICS)}, not {default_metric!r}")
    qd = raw.get("qdq", {})
    qdq = QdqRules(
        cast_ops=frozenset(qd.get("cast_ops", [])),
        dtype_arg_ops=frozenset(qd.get("dtype_arg_ops", [])),
        dtype_codes=frozenset(int(c) for c in qd.get("dtype_codes", [])),
        type_pattern=_compile(qd.get("type_pattern", "(?!)"), where, "[qdq] type_pattern").pattern,
        chain_start_ops=frozenset(qd.get("chain_start_ops", [])),
        chain_ops=frozenset(qd.get("chain_ops", [])),
    )
    sm = raw.get("semantics", {})
    semantics = Semantics(
        generic_categories=frozenset(_check_category(known, c, where, "[semantics]")
                                     for c in sm.get("generic_categories", [])),
        specific_categories=frozenset(_check_category(known, c, where, "[semantics]")
                                      for c in sm.get("specific_categories", [])),
    )
    chains = []
    for i, c in enumerate(raw.get("chains", [])):
        what = f"chain #{i + 1}"
        if not c.get("ops") or "category" not in c:
            raise TraceError(where, f"{what} needs 'ops' (a list of op names) and 'category'")
        steps = lambda key, c=c: tuple(tuple(str(s).split("|")) for s in c.get(key, []))  # noqa: E731
        chains.append(Chain(category=_check_category(known, c["category"], where, what), ops=steps("ops"),
                            after=steps("after"), follows=tuple(c.get("follows", [])), name=str(c.get("name", what))))
    vocab = tuple(sorted(set(op_base) | {n.split("::")[-1] for n in op_full}, key=len, reverse=True))
    engines = engine_rules(raw, lambda cat, what: _check_category(known, cat, where, what), where)
    return Taxonomy(
        name=str(raw.get("name", Path(where).stem)),
        version=str(raw.get("version", "0")),
        description=str(raw.get("description", "")),
        classes=classes,
        op_full=op_full,
        op_base=op_base,
        op_patterns=op_patterns,
        wrapper_patterns=[_compile(p, where, "[wrappers] patterns") for p in wr.get("patterns", [])],
        annotation_categories=frozenset(wr.get("annotation_categories", [])),
        composite_names=frozenset(comp.get("names", [])),
        composite_patterns=[_compile(p, where, "[composite] patterns") for p in comp.get("patterns", [])],
        kernel_rules=kernel_rules,
        fusion=fusion,
        activity_kinds=kinds,
        transfers=transfers,
        qdq=qdq,
        module_names=module_names,
        module_patterns=module_patterns,
        default_level=default_level,
        default_metric=default_metric,
        derive_backward=bool(raw.get("derive_backward", True)),
        top_fallback=bool(raw.get("top_fallback", True)),
        fusion_enabled=bool(fz.get("enabled", True)),
        source=where,
        vocabulary=vocab,
        op_token_runs=tuple(op_token_runs),
        semantics=semantics,
        chains=tuple(chains),
        engines=engines,
    )


def extend_taxonomy(
    base: Taxonomy,
    *,
    name: str | None = None,
    ops: dict[str, str] | None = None,
    op_patterns: list[tuple[str, str]] | None = None,
    kernels: list[tuple[str, str, int]] | None = None,
    modules: dict[str, str] | None = None,
    wrappers: list[str] | None = None,
) -> Taxonomy:
    """A new taxonomy: ``base`` plus rules given in Python; the new rules win.

    ``ops`` maps op names (full ``ns::name`` or base names) to categories;
    ``op_patterns`` and ``wrappers`` are regular expressions; ``kernels`` are
    ``(pattern, category, priority)`` tuples (case-insensitive); ``modules`` maps
    nn.Module class names to categories. ``base`` itself is not changed.
    """
    where = f"python rules on {base.name}"
    known = base.categories
    op_full, op_base = dict(base.op_full), dict(base.op_base)
    for n, cat in (ops or {}).items():
        (op_full if "::" in n else op_base)[n] = _check_category(known, cat, where, f"op {n!r}")
    extra = [KernelRule(_compile(p, where, "kernel rule", re.IGNORECASE),
                        _check_category(known, c, where, f"kernel rule {p!r}"),
                        int(prio), False, -1 - i) for i, (p, c, prio) in enumerate(kernels or [])]
    module_names = dict(base.module_names)
    for n, cat in (modules or {}).items():
        module_names[n] = _check_category(known, cat, where, f"module {n!r}")
    tax = replace(
        base,
        name=name or f"{base.name}+custom",
        op_full=op_full,
        op_base=op_base,
        op_patterns=[(_compile(p, where, "op pattern"), _check_category(known, c, where, f"op pattern {p!r}"))
                     for p, c in (op_patterns or [])] + list(base.op_patterns),
        kernel_rules=sorted(extra + list(base.kernel_rules), key=lambda r: (-r.priority, r.order)),
        module_names=module_names,
        wrapper_patterns=[_compile(p, where, "wrapper") for p in (wrappers or [])] + list(base.wrapper_patterns),
        vocabulary=tuple(sorted(set(op_base) | {n.split("::")[-1] for n in op_full}, key=len, reverse=True)),
    )
    return tax
