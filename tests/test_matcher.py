"""The compiled name rules (classify/matcher.py) give the rule-by-rule loops' answers, reason
included, on real kernel and op names and on names made to hit the index's edges."""

from __future__ import annotations

import gzip
import re

import polars as pl
import pytest
from conftest import REPO

from nongemm_trace.classify.matcher import AnyPattern, RunIndex
from nongemm_trace.classify.rules import kernel_verdict, module_category, op_category
from nongemm_trace.classify.taxonomy import extend_taxonomy, load_taxonomy
from nongemm_trace.classify.tokens import TokenIndex, has_run, tokens


def _reference_kernel(tax, name):
    """The loop the compiled rules replace: every rule in order, its pattern then its runs."""
    toks = TokenIndex(tokens(name))
    for rule in tax.kernel_rules:
        hit = rule.match(name, toks)
        if hit is not None:
            return rule.category, rule.authoritative, rule.evidence, f"kernel rule {hit} (priority {rule.priority})"
    return None, False, "none", "no kernel rule"


def _reference_op(tax, name):
    for pat, cat in tax.op_patterns:
        if pat.search(name):
            return cat, f"op pattern /{pat.pattern}/"
    toks = TokenIndex(tokens(name))
    for run, cat in tax.op_token_runs:
        if toks.has(run):
            return cat, f"op tokens '{' '.join(run)}'"
    return None, "no op rule"


def _names() -> list[str]:
    with gzip.open(REPO / "tests" / "data" / "labelled_kernels.csv.gz", "rb") as fh:
        labelled = pl.read_csv(fh.read())
    names = set(labelled["name"].to_list()) | set(labelled["launch_op"].drop_nulls().to_list())
    # every token of every run of the default taxonomy, alone, doubled, as a prefix and with a suffix
    tax = load_taxonomy("default")
    for rule in tax.kernel_rules:
        for run in rule.runs:
            words = [w.rstrip("*") for w in run]
            names |= {"_".join(words), "x_" + "_".join(words) + "_y", "_".join(words[:-1]),
                      "_".join(w + "zz" for w in words), "_".join(words + words), " ".join(words[1:])}
    return sorted(n for n in names if n)


NAMES = _names()


@pytest.mark.parametrize("taxonomy", ["default", "ispass25"])
def test_kernel_verdicts_equal_the_rule_by_rule_loop(taxonomy):
    tax = load_taxonomy(taxonomy)
    assert len(NAMES) > 1000
    differ = [n for n in NAMES if _reference_kernel(tax, n) != kernel_verdict(tax, n)[:4]
              and not n.startswith("triton_")]  # Inductor names are decided before the kernel rules
    assert differ == []


@pytest.mark.parametrize("taxonomy", ["default", "ispass25"])
def test_op_patterns_and_tokens_equal_the_loop(taxonomy):
    tax = load_taxonomy(taxonomy)
    from nongemm_trace.classify.rules import _patterns

    assert [n for n in NAMES if _patterns(tax, n) != _reference_op(tax, n)] == []
    assert sum(op_category(tax, n)[0] is not None for n in NAMES) > 50  # the comparison is not vacuous


def test_a_user_rule_in_front_wins_and_patterns_that_cannot_be_joined_still_match():
    """User rules come first (their place decides), including a pattern with a backreference and
    one with its own flags, which the joined alternation cannot take."""
    base = load_taxonomy("default")
    assert kernel_verdict(base, "cuApplyLayerNorm")[0] == "normalization"  # base.compiled is built first
    tax = extend_taxonomy(base, kernels=[("applylayer", "other", 1000)], op_patterns=[(r"^(ab)\1$", "other")])
    assert kernel_verdict(tax, "cuApplyLayerNorm")[:2] == ("other", False)
    assert kernel_verdict(base, "cuApplyLayerNorm")[0] == "normalization"
    assert op_category(tax, "abab") == ("other", r"op pattern /^(ab)\1$/")
    assert tax.compiled.op_patterns.joined is None  # the backreference keeps them apart
    pats = AnyPattern([re.compile("q"), re.compile("soft", re.IGNORECASE)])
    assert pats.joined is None and pats.first("SoftMax") == 1 and pats.first("abc") is None


def test_run_index_takes_the_smallest_key_and_wildcards_by_prefix():
    index = RunIndex([(3, ("gemm*",)), (1, ("layer", "norm")), (2, ("norm",)), (0, ("a*", "b*"))])
    assert index.first(("x", "layer", "norm")) == 1
    assert index.first(("x", "norm")) == 2
    assert index.first(("s", "16816", "gemmk")) == 3
    assert index.first(("fbgemm",)) is None
    assert index.first(("ax", "bx", "gemm")) == 0
    assert index.first(("ax",)) is None
    for toks in [("ax", "bx"), ("gemm",), ("norm", "layer")]:
        assert (index.first(toks) is not None) == any(has_run(toks, r) for r in
                                                     [("gemm*",), ("layer", "norm"), ("norm",), ("a*", "b*")])


def test_module_patterns_keep_their_order():
    tax = load_taxonomy("default")
    for cls, _ in [(n, c) for n, c in tax.module_names.items()][:20]:
        assert module_category(tax, cls)[0] == tax.module_names[cls]
    for pat, _cat in tax.module_patterns:
        probe = next((n for n in NAMES if pat.search(n)), None)
        if probe is not None:
            first = next(c for p, c in tax.module_patterns if p.search(probe))
            assert module_category(tax, probe)[0] == first
