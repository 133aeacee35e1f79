"""Names searched over the whole column (classify/vector_match.py) and the op-name table built
without running the rules on the names no rule can name (classify/__init__.py) give the answers
of the rule-by-rule code, on the shared traces' names and on names made to differ where Python's
and Rust's regular expressions do."""

from __future__ import annotations

import random
import re

import polars as pl
import pytest
from conftest import kineto_traces

from nongemm_trace.classify import op_name_table
from nongemm_trace.classify.matcher import AnyPattern
from nongemm_trace.classify.rules import is_composite, is_wrapper, op_category
from nongemm_trace.classify.taxonomy import load_taxonomy
from nongemm_trace.classify.vector_match import any_match, rust_source
from nongemm_trace.load import load_trace

_WORDS = ["ProfilerStep#", "## forward ##", "aten::mm", "mm", "nn.Module: Linear_", "triton_poi_fused_add_",
          "AddBackward", "layer_norm_backward", "Torch-Compiled Region: ", "CompiledFunction", "softmax", "x::relu",
          "a:::b", "", "attention", "MoE[topk=", "rms_norm", "é", "a<b", "tab\there", "line\n", "\x1c", "aten::_mm"]


def _names(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(_WORDS) + str(rng.randint(0, 99)) + rng.choice(["", "::gelu", " block", "_backward", "_mm"])
            for _ in range(n)]


def _reference_table(tax, ops: pl.DataFrame) -> pl.DataFrame:
    """The table as built before: the rules run on every unique (name, cat)."""
    uniq = ops.select(pl.col("name").cast(pl.String), pl.col("cat").cast(pl.String)).unique()
    rows = []
    for name, cat in uniq.iter_rows():
        oc, _ = op_category(tax, name, use_tokens=cat not in tax.annotation_categories)
        rows.append((name, cat, oc, is_wrapper(tax, name, cat, oc), is_composite(tax, name)))
    return pl.DataFrame(rows, schema={"name": pl.Utf8, "cat": pl.Utf8, "op_category": pl.Utf8,
                                      "is_wrapper": pl.Boolean, "is_composite": pl.Boolean}, orient="row")


def _same_table(tax, ops: pl.DataFrame) -> None:
    want = _reference_table(tax, ops).sort("name", "cat", nulls_last=True)
    got = op_name_table(tax, ops).with_columns(pl.col("name", "cat").cast(pl.String)).sort("name", "cat",
                                                                                            nulls_last=True)
    assert got.equals(want)


@pytest.mark.parametrize("taxonomy", ["default", "ispass25"])
def test_op_name_table_equals_the_rules_on_random_names(taxonomy):
    tax = load_taxonomy(taxonomy)
    names = _names(6000)
    rng = random.Random(1)
    cats = [rng.choice(["user_annotation", "gpu_user_annotation", "cpu_op", "python_function", None]) for _ in names]
    _same_table(tax, pl.DataFrame({"name": names, "cat": cats}, schema_overrides={"cat": pl.Categorical}))


def test_op_name_table_equals_the_rules_on_the_shared_traces():
    paths = kineto_traces()
    if not paths:
        pytest.skip("needs the shared traces")
    taxes = [load_taxonomy("default"), load_taxonomy("ispass25")]
    for path in paths[:12]:
        ops = load_trace(str(path)).ops
        for tax in taxes:
            _same_table(tax, ops)


@pytest.mark.parametrize("taxonomy", ["default", "ispass25"])
def test_any_match_equals_python_re(taxonomy):
    tax = load_taxonomy(taxonomy)
    names = pl.Series(_names(4000, seed=2) + [None])
    for patterns in (tax.compiled.op_patterns, tax.compiled.wrappers, tax.compiled.composite):
        want = [patterns.any(n or "") for n in names.to_list()]
        assert any_match(patterns, names).to_list() == want


@pytest.mark.filterwarnings("ignore::FutureWarning")  # Python's warning on "[[" and "--" in a class
@pytest.mark.parametrize("source", [r"\<mm", r"mm\>", r"[[:alpha:]]+", r"a{,3}b", r"(?=mm)", r"(mm)\1", r"a&&b",
                                    r"[a-z--m]", "é", r"\x41", r"\Z", r"(?i)mm", r"\b{start}"])
def test_patterns_that_may_differ_in_rust_are_searched_by_python(source):
    patterns = AnyPattern([re.compile(source)])
    assert rust_source(patterns) is None
    names = pl.Series(["a<mm", "mm>b", "abc", "aaab", "xmm", "mmmm", "a&&b", "z", "é", "A", "mm\n", "MM", "start"])
    assert any_match(patterns, names).to_list() == [patterns.any(n) for n in names.to_list()]


def test_plain_patterns_are_searched_by_polars():
    patterns = AnyPattern([re.compile(p) for p in (r"^aten::_?embedding", r"_mm$", r"\bconv\d+", r"a\.b")])
    assert rust_source(patterns) is not None
    names = pl.Series(["aten::embedding", "aten::_embedding_bag", "x_mm", "x_mm\n", "conv2d", "xconv2", "a.b", "axb",
                       "é_mm", "\u0663conv1"])
    assert any_match(patterns, names).to_list() == [patterns.any(n) for n in names.to_list()]


def test_a_million_step_names_do_not_run_the_rules_per_name(monkeypatch):
    """Step markers and other annotations no rule names are found over the column: the per-name
    rules (16 us a name: a million ``ProfilerStep#N`` took 16 s) run for none of them."""
    import nongemm_trace.classify as classify

    calls = []
    real = classify.op_category
    monkeypatch.setattr(classify, "op_category", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    n = 50_000
    ops = pl.DataFrame({"name": [f"ProfilerStep#{i}" for i in range(n)] + ["aten::mm"],
                        "cat": ["user_annotation"] * n + ["cpu_op"]}, schema_overrides={"cat": pl.Categorical})
    got = op_name_table(load_taxonomy("default"), ops)
    assert calls == ["aten::mm"]
    steps = got.filter(pl.col("name").cast(pl.String).str.starts_with("ProfilerStep#"))
    assert steps.height == n and steps["is_wrapper"].all() and steps["op_category"].is_null().all()


def test_qdq_pass_maps_no_call_name_where_no_call_is_cast_named(monkeypatch):
    """Without a cast-named call (``to``, ``_to_copy``, ``copy_``) the qdq pass ends on the distinct
    names: it never maps every call's name to text (a million step names: 3 s, +130 MB)."""
    from nongemm_trace.classify import calls

    def refuse(*a, **k):
        raise AssertionError("every call's name mapped")

    monkeypatch.setattr(calls, "per_value", refuse)
    n = 50_000
    ops = pl.DataFrame({"op_id": pl.int_range(n + 1, dtype=pl.UInt32, eager=True),
                        "name": [f"ProfilerStep#{i}" for i in range(n)] + ["aten::mm"]},
                       schema_overrides={"name": pl.Categorical})
    got = calls.qdq_calls(ops, load_taxonomy("default"))
    assert got.height == n + 1 and not got["qdq_call"].any()
