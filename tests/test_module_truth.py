"""Module truth: on H200 captures whose every categorized ``nn.Module`` was tagged, the tool agrees
with the module on at least 95 % of each category's GPU time, forward and backward.

The captures (``sample_traces/truth/``, ``bench/capture_module_truth.py``) wrap each categorized
module's forward in a ``truth:<category>:<Class>`` range (Linear/Conv -> gemm, *Norm ->
normalization, GELU/SiLU/ReLU -> activation, Embedding, pooling, Softmax). A forward kernel's
truth is the innermost tag around its launch; a backward kernel's is the tag around the forward op
whose autograd ``Sequence number`` its ``autograd::engine::evaluate_function`` range carries. The
tags are removed before the tool reads the trace, so it sees what a user's capture holds.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest

from nongemm_trace.pipeline.analysis import Analysis

TRUTH = Path(__file__).resolve().parent.parent / "sample_traces" / "truth"
TRACES = sorted(TRUTH.glob("*.json.gz"))
TAG = "truth:"
BACKWARD = "autograd::engine::evaluate_function"
MIN_AGREEMENT = 0.95


def _innermost(ranges: list[tuple[int, int, str]], ts: float) -> str | None:
    """The value of the shortest range holding ``ts`` (ranges: start, end, value)."""
    best = None
    for start, end, value in ranges:
        if start <= ts <= end and (best is None or end - start < best[1] - best[0]):
            best = (start, end, value)
    return best[2] if best else None


def truth_of(events: list[dict]) -> dict[int, tuple[str, str]]:
    """correlation -> (the category its module tag gives, ``forward`` or ``backward``); launches
    outside every tag (and backward launches whose forward op is outside every tag) are absent."""
    tags, backward, forward_seq = defaultdict(list), defaultdict(list), {}
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in ("cpu_op", "user_annotation"):
            continue
        thread, start, end = (e["pid"], e["tid"]), e["ts"], e["ts"] + e["dur"]
        if e["name"].startswith(TAG):
            tags[thread].append((start, end, e["name"].split(":")[1]))
        elif e["name"].startswith(BACKWARD) and "Sequence number" in e.get("args", {}):
            backward[thread].append((start, end, e["args"]["Sequence number"]))
    for e in events:  # the forward ops: those with a sequence number outside every backward range
        seq = e.get("args", {}).get("Sequence number") if e.get("cat") == "cpu_op" else None
        if seq is None or e["name"].startswith(BACKWARD):
            continue
        thread = (e["pid"], e["tid"])
        if _innermost(backward[thread], e["ts"]) is None and seq not in forward_seq:
            forward_seq[seq] = _innermost(tags[thread], e["ts"])
    out = {}
    for e in events:
        if e.get("cat") not in ("cuda_runtime", "cuda_driver") or "correlation" not in e.get("args", {}):
            continue
        thread = (e["pid"], e["tid"])
        cat, where = _innermost(tags[thread], e["ts"]), "forward"
        if cat is None:
            seq = _innermost(backward[thread], e["ts"])
            cat, where = (forward_seq.get(seq) if seq is not None else None), "backward"
        if cat is not None:
            out[e["args"]["correlation"]] = (cat, where)
    return out


def agreement(path: Path, tmp: Path) -> pl.DataFrame:
    """The trace's tagged activities: the tool's ``category`` (read with the tags removed) beside
    the tag's (``truth``) and the pass (``where``)."""
    doc = json.load(gzip.open(path))
    truth = truth_of(doc["traceEvents"])
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith(TAG)]
    stripped = tmp / path.name
    with gzip.open(stripped, "wt") as f:
        json.dump(doc, f)
    acts = Analysis(stripped).activities("launch").select("correlation", "dur_ns", "category", "launch_op", "name")
    labels = pl.DataFrame({"correlation": list(truth), "truth": [c for c, _ in truth.values()],
                           "where": [w for _, w in truth.values()]},
                          schema={"correlation": pl.Int64, "truth": pl.Utf8, "where": pl.Utf8})
    return acts.join(labels, on="correlation", how="inner")


def per_category(got: pl.DataFrame) -> pl.DataFrame:
    """truth (a category), truth_ns, agree_ns, share: how much of the tagged time the tool agrees on."""
    agree = pl.col("dur_ns").filter(pl.col("category") == pl.col("truth")).sum().alias("agree_ns")
    return (got.group_by("truth").agg(pl.col("dur_ns").sum().alias("truth_ns"), agree)
            .with_columns((pl.col("agree_ns") / pl.col("truth_ns")).alias("share")).sort("truth"))


def test_the_captures_are_here_and_cover_vision_language_training_inference():
    names = [p.name for p in TRACES]
    assert len(names) >= 8
    assert sum("train" in n for n in names) >= 3 and sum("infer" in n for n in names) >= 3
    assert any(n.startswith(("resnet", "mobilenet", "vit", "clip")) for n in names)
    assert any(n.startswith(("llama", "bert", "gpt2", "t5", "gemma")) for n in names)


@pytest.mark.parametrize("name", ["llama_bf16_train_bs2_s256", "resnet18_fp32_train_bs16_r160"])
def test_the_backward_is_judged_too(name, tmp_path):
    """A training capture's backward work reaches the truth through its sequence numbers: RMSNorm's
    written-out backward (PowBackward0, MeanBackward1, ...) and BatchNorm's are normalization, a
    Linear's or conv's backward (bias-gradient sums included) GEMM, and the tool agrees."""
    got = agreement(TRUTH / f"{name}.json.gz", tmp_path).filter(pl.col("where") == "backward")
    table = per_category(got)
    assert {"gemm", "normalization"} <= set(table["truth"])
    assert table.filter(pl.col("truth") == "normalization")["truth_ns"].item() > 50_000
    assert table["share"].min() >= MIN_AGREEMENT, table


@pytest.mark.parametrize("path", TRACES, ids=[p.name.split(".")[0] for p in TRACES])
def test_the_tool_agrees_with_the_modules(path, tmp_path):
    got = agreement(path, tmp_path)
    table = per_category(got)
    low = table.filter(pl.col("share") < MIN_AGREEMENT)
    if low.height:
        misses = (got.filter(pl.col("truth").is_in(low["truth"].implode()) & (pl.col("category") != pl.col("truth")))
                  .group_by("truth", "category", "launch_op").agg(pl.col("dur_ns").sum()).sort("dur_ns",
                                                                                               descending=True))
        pytest.fail(f"{path.name}: below {MIN_AGREEMENT:.0%}:\n{low}\nmisses:\n{misses.head(12)}")


if __name__ == "__main__":  # the table in docs/benchmarks.md: PYTHONPATH=. python3 tests/test_module_truth.py
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        print("| capture | category | pass | tagged GPU time (us) | tool agrees |")
        print("|---|---|---|---:|---:|")
        for trace in TRACES:
            got = agreement(trace, Path(tmp))
            for where in ("forward", "backward"):
                part = got.filter(pl.col("where") == where)
                for r in (per_category(part).iter_rows(named=True) if part.height else []):
                    print(f"| {trace.name.split('.')[0]} | {r['truth']} | {where} | {r['truth_ns'] / 1000:,.1f} "
                          f"| {100 * r['share']:.1f} % |")
