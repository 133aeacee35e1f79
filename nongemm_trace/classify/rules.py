"""Name -> category rules. They run once per *unique* name, never per event.

Each function returns ``(category or None, why)`` so the same code answers
"which rule matched" for users (``why`` is a short human-readable reason).
"""

from __future__ import annotations

import re

from .taxonomy import Taxonomy
from .tokens import tokens

_INDUCTOR = re.compile(r"^triton_(poi|red|per|tem)_fused_?(.*?)(?:_\d+)?$")
_BACKWARD_SUFFIX = re.compile(r"_backward(?:_data|_input|_weight|_elemt)?$")
_AUTOGRAD_NODE = re.compile(r"^([A-Z][A-Za-z0-9]*?)Backward\d*$")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _lookup(tax: Taxonomy, name: str) -> tuple[str | None, str]:
    if name in tax.op_full:
        return tax.op_full[name], f"op name '{name}'"
    base = name.rsplit("::", 1)[-1]
    if base in tax.op_base:
        return tax.op_base[base], f"op name '{base}'"
    return None, ""


def op_category(tax: Taxonomy, name: str, use_tokens: bool = True) -> tuple[str | None, str]:
    """Category of an operator (or annotation) name, or None when no rule names it. Token rules
    (``use_tokens``) are for operator names: a user annotation (``MoE[topk=2, …]``) is free text."""
    cat, why = _lookup(tax, name)
    if cat:
        return cat, why
    m = _INDUCTOR.match(name) if tax.fusion_enabled else None
    if m:
        cat, why = fused_category(tax, m.group(1), m.group(2))
        if cat:
            return cat, why
    base = name.rsplit("::", 1)[-1]
    if not tax.derive_backward:
        return _patterns(tax, name, use_tokens)
    stripped = _BACKWARD_SUFFIX.sub("", base)
    if stripped != base:
        cat, why = _lookup(tax, stripped)
        if cat:
            return cat, f"backward of {why}"
    m = _AUTOGRAD_NODE.match(base)
    if m:
        snake = _CAMEL.sub("_", m.group(1)).lower()
        cat, why = _lookup(tax, snake)
        if cat:
            return cat, f"autograd node of {why}"
    return _patterns(tax, name, use_tokens)


def _patterns(tax: Taxonomy, name: str, use_tokens: bool = True) -> tuple[str | None, str]:
    compiled = tax.compiled
    i = compiled.op_patterns.first(name)
    if i is not None:
        pat, cat = tax.op_patterns[i]
        return cat, f"op pattern /{pat.pattern}/"
    if use_tokens and tax.op_token_runs:
        j = compiled.op_runs.first(tokens(name))
        if j is not None:
            run, cat = tax.op_token_runs[j]
            return cat, f"op tokens '{' '.join(run)}'"
    return None, "no op rule"


def fused_ops(tax: Taxonomy, body: str) -> list[str]:
    """Split an Inductor kernel's fused-op list (``_to_copy_add_embedding_mean``) into op
    names, matching the longest vocabulary word at each position (op names contain '_')."""
    out: list[str] = []
    i, n = 0, len(body)
    vocab, lengths = tax.compiled.vocabulary, tax.compiled.vocabulary_lengths  # longest first
    while i < n:
        hit = None
        for length in lengths:
            j = i + length
            if j <= n and (j == n or body[j] == "_") and body[i:j] in vocab:
                hit = body[i:j]
                break
        if hit is None:  # unknown token: skip to the next separator
            j = body.find("_", i + 1)
            out.append(body[i:] if j < 0 else body[i:j])
            i = n if j < 0 else j + 1
        else:
            out.append(hit)
            i += len(hit) + 1
    return [t for t in out if t]


def fused_category(tax: Taxonomy, kind: str, body: str) -> tuple[str | None, str]:
    """Category of an Inductor kernel from its kind (poi/red/per/tem) and fused ops."""
    ops = fused_ops(tax, body)
    cats: dict[str, str] = {}
    for op in ops:
        c = tax.op_base.get(op)
        if kind != "tem" and (op in tax.fusion.epilogue_ops or tax.classes.get(c or "") == "GEMM"):
            cats.setdefault(tax.fusion.epilogue_category, op)
            continue
        if c:
            cats.setdefault(c, op)
    if kind == "tem":
        if "attention" in cats:
            return "attention", f"Inductor template with attention op '{cats['attention']}'"
        return tax.fusion.template_category, "Inductor template kernel (triton_tem): a GEMM template"
    present = set(ops)
    for sig, cat in tax.fusion.signatures:
        if sig and sig <= present:
            return cat, f"Inductor fusion of {'+'.join(sorted(sig))}"
    for cat in tax.fusion.priority:
        if cat in cats:
            return cat, f"Inductor fusion containing '{cats[cat]}' ({cat} ranks first among the fused ops)"
    return None, "Inductor kernel with no known fused op"


def kernel_category(tax: Taxonomy, name: str) -> tuple[str | None, bool, str]:
    """Category of a GPU activity from its kernel name: (category, authoritative, why)."""
    cat, auth, _, why = kernel_verdict(tax, name)
    return cat, auth, why


def kernel_verdict(tax: Taxonomy, name: str) -> tuple[str | None, bool, str, str]:
    """(category, authoritative, evidence, why) of a kernel name: the evidence is ``family``
    (an Inductor kernel, a named kernel family), ``generic`` (a generic word) or ``none``."""
    m = _INDUCTOR.match(name) if tax.fusion_enabled else None
    if m:
        cat, why = fused_category(tax, m.group(1), m.group(2))
        if cat:
            return cat, False, "family", why
    found = tax.compiled.kernel_rule(name, tokens(name))
    if found is not None:
        rule, hit = found
        return rule.category, rule.authoritative, rule.evidence, f"kernel rule {hit} (priority {rule.priority})"
    return None, False, "none", "no kernel rule"


_MODULE = re.compile(r"^nn\.Module: (.*?)(?:_\d+)?$")


def module_class(name: str) -> str | None:
    """``nn.Module: LlamaRMSNorm_0`` -> ``LlamaRMSNorm`` (None for other python events)."""
    m = _MODULE.match(name)
    return m.group(1) if m else None


def module_category(tax: Taxonomy, cls: str) -> tuple[str | None, str]:
    """Category of an nn.Module class name (module level), or None."""
    if cls in tax.module_names:
        return tax.module_names[cls], f"module '{cls}'"
    i = tax.compiled.modules.first(cls)
    if i is not None:
        pat, cat = tax.module_patterns[i]
        return cat, f"module pattern /{pat.pattern}/"
    return None, "no module rule"


def inductor_fused_ops(tax: Taxonomy, name: str) -> list[str] | None:
    """The op names fused into an Inductor kernel (``triton_poi_fused_add_gelu_3`` -> [add, gelu])."""
    m = _INDUCTOR.match(name)
    return fused_ops(tax, m.group(2)) if m else None


def is_wrapper(tax: Taxonomy, name: str, cat: str | None, op_cat: str | None) -> bool:
    """Wrappers are ranges that are not operators (steps, compiled regions, annotations)."""
    if tax.compiled.wrappers.any(name):
        return True
    return cat in tax.annotation_categories and op_cat is None


def is_composite(tax: Taxonomy, name: str) -> bool:
    return name in tax.composite_names or tax.compiled.composite.any(name)
