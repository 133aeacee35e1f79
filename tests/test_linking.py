"""Linking GPU activities to launch calls and ops, on real traces and edge cases."""

from __future__ import annotations

import polars as pl
from conftest import LAUNCH_CATS, ns, raw_events, shared

import nongemm_trace
from nongemm_trace.link.nesting import innermost_containing, op_tree
from nongemm_trace.load import load_trace

ALEXNET = "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"


def test_old_trace_external_id_collisions_are_not_trusted():
    """alexnet (HTA test data): kernels' External id is their correlation id and often names an
    unrelated op. No activity may be linked to an op that does not contain its launch call."""
    path = shared("external", "hta", ALEXNET)
    events = raw_events(str(path))
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    by_ext = {e["args"]["External id"]: e for e in ops if "External id" in e.get("args", {})}
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("ph") == "X" and e.get("cat") in LAUNCH_CATS and "correlation" in e.get("args", {})}
    acts = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]

    def contains(op, call):
        return (op["pid"] == call["pid"] and op["tid"] == call["tid"] and ns(op["ts"]) <= ns(call["ts"])
                and ns(call["ts"]) + ns(call["dur"]) <= ns(op["ts"]) + ns(op["dur"]))

    # the trap is real: trusting External id would link activities to ops that do not contain the launch
    naive_bad = sum(1 for a in acts if a["args"].get("External id") in by_ext
                    and a["args"]["correlation"] in launches
                    and not contains(by_ext[a["args"]["External id"]], launches[a["args"]["correlation"]]))
    assert naive_bad >= 10

    rep = nongemm_trace.analyze(path)
    trace = load_trace(path)
    op_rows = {r["op_id"]: r for r in trace.ops.iter_rows(named=True)}
    linked = rep.kernels.filter(pl.col("launch_op_id").is_not_null())
    assert linked.height >= 90
    for k in linked.iter_rows(named=True):
        op = op_rows[k["launch_op_id"]]
        call = launches[k["correlation"]]
        assert op["tid"] == str(call["tid"]) and op["pid"] == str(call["pid"])
        assert op["ts_ns"] <= ns(call["ts"]) and ns(call["ts"]) + ns(call["dur"]) <= op["end_ns"]
    assert rep.attribution.get("external_id", 0) == 0  # every External id here is a correlation id


def test_cuda_graph_replay_attributed_to_graph_launch():
    path = shared("h200", "llama_1b_bf16_bs1_s2048__compiled_cudagraphs.json.gz")
    rep = nongemm_trace.analyze(path)
    g = rep.kernels.filter(pl.col("attribution") == "graph_launch")
    assert g.height == 268
    assert set(g["launch_name"].unique()) == {"cudaGraphLaunch"}
    assert set(g["launch_op"].unique()) == {"Torch-Compiled Region: 0/0"}
    # the replaying op is a wrapper: categories come from kernel names, never unclassified here
    assert g.filter(pl.col("category") == "unclassified").height == 0
    assert set(g["rule"].unique()) <= {"kernel_name", "activity_kind"}
    assert any(w.code == "graph_replay" for w in rep.warnings)


def test_activities_without_launch_call_are_flagged_and_classified():
    path = shared("h200x2", "bert_ddp_train_rank0.json.gz")
    rep = nongemm_trace.analyze(path)
    none = rep.kernels.filter(pl.col("attribution") == "none")
    assert none.height > 0
    assert none["launch_op"].null_count() == none.height
    share = none["dur_ns"].sum() / rep.gpu_time_ns
    assert 0.01 < share < 0.5
    assert none.filter(pl.col("category") == "unclassified")["dur_ns"].sum() < 0.01 * none["dur_ns"].sum()


def test_legacy_categories_and_lowercase_external_id_load():
    path = shared("external", "hta", "trace_file_list__inference_rank_1.json.gz")
    rep = nongemm_trace.analyze(path)
    assert rep.gpu_activities == 4
    assert rep.attribution == {"launch_only": 4}  # Runtime calls found, no ops recorded
    assert rep.kernels["launch_name"].null_count() == 0


def test_rocm_hip_launches_link():
    path = shared("external", "tracelens", "torch_compile_triton__trace.json.gz")
    rep = nongemm_trace.analyze(path)
    assert rep.kernels["launch_name"].str.starts_with("hip").all()
    assert rep.attribution == {"external_id": rep.gpu_activities}
    assert rep.kernels.filter(pl.col("name").str.starts_with("Cijk_"))["class"].unique().to_list() == ["GEMM"]


def test_cu_launch_kernel_ex_and_inductor_ops_link():
    path = shared("external", "tracelens", "b200__eager_trace.json.gz")
    rep = nongemm_trace.analyze(path)
    names = set(rep.kernels["launch_name"].drop_nulls().unique())
    assert {"cuLaunchKernelEx", "cudaLaunchKernelExC"} <= names
    assert rep.kernels.filter(pl.col("launch_name") == "cuLaunchKernelEx")["launch_op"].null_count() == 0


def test_inductor_triton_kernels_link_to_their_launch_op():
    path = shared("h200", "gpt2_fp32_bs8_s128__compiled.json.gz")
    rep = nongemm_trace.analyze(path)
    tri = rep.kernels.filter(pl.col("name").str.starts_with("triton_"))
    assert tri.height > 0
    assert (tri["launch_op"] == tri["name"]).all()  # Inductor launches through a cpu_op named after the kernel


def test_top_level_op_skips_wrappers_and_is_outermost():
    path = shared("h200", "bert_base_fp32_bs8_s128__eager.json.gz")
    rep = nongemm_trace.analyze(path, level="top")
    addmm = rep.kernels.filter(pl.col("launch_op") == "aten::addmm")
    assert addmm.height > 0
    assert set(addmm["top_op"].unique()) == {"aten::linear"}
    assert (rep.kernels["op"] == rep.kernels["top_op"]).all()
    assert not rep.kernels["top_op"].drop_nulls().str.starts_with("## ").any()


# -- hand-made edge cases for the nesting sweep -------------------------------------------

def _ops(rows):
    df = pl.DataFrame(rows, schema={"pid": pl.Utf8, "tid": pl.Utf8, "ts_ns": pl.Int64, "dur_ns": pl.Int64},
                      orient="row")
    return df.with_columns((pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns")).with_row_index("op_id")


def test_nesting_depth_parent_and_ties():
    ops = _ops([
        ("1", "1", 0, 100),   # 0 root
        ("1", "1", 0, 50),    # 1 child starting at the same time (shorter = inner)
        ("1", "1", 50, 50),   # 2 sibling starting where 1 ends, ending with the root
        ("1", "1", 60, 10),   # 3 grandchild
        ("1", "2", 10, 10),   # 4 another thread: its own root
        ("1", "1", 70, 0),    # 5 zero-length: outside the tree
    ])
    tree, bad, _ = op_tree(ops)
    t = {r["op_id"]: (r["depth"], r["parent_id"]) for r in tree.iter_rows(named=True)}
    assert t[0] == (0, None) and t[1] == (1, 0) and t[2] == (1, 0) and t[3] == (2, 2) and t[4] == (0, None)
    assert t[5] == (None, None) and bad == 0
    pts = pl.DataFrame({"qid": [0, 1, 2, 3, 4], "pid": ["1"] * 5, "tid": ["1", "1", "1", "2", "3"],
                        "ts_ns": [5, 50, 65, 12, 0], "end_ns": [6, 55, 66, 13, 1]})
    hit = dict(innermost_containing(tree, pts).iter_rows())
    assert hit == {0: 1, 1: 2, 2: 3, 3: 4, 4: None}


def test_overlapping_ops_never_contain_a_call_they_do_not_cover():
    ops = _ops([("1", "1", 0, 100), ("1", "1", 50, 100)])  # overlap without nesting
    tree, bad, _ = op_tree(ops)
    assert bad == 1
    pts = pl.DataFrame({"qid": [0], "pid": ["1"], "tid": ["1"], "ts_ns": [120], "end_ns": [125]})
    hit = dict(innermost_containing(tree, pts).iter_rows())
    assert hit[0] in (None, 1)
    if hit[0] is not None:
        row = tree.filter(pl.col("op_id") == hit[0]).row(0, named=True)
        assert row["ts_ns"] <= 120 and 125 <= row["end_ns"]


def test_xpu_runtime_launches_link(tmp_path):
    """No real XPU trace is in the shared collection: a minimal hand-made one, shaped like
    Kineto's XPU output (launches under the xpu_runtime category)."""
    import json
    doc = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 10,
         "args": {"External id": 5}},
        {"ph": "X", "cat": "xpu_runtime", "name": "urEnqueueKernelLaunch", "pid": 1, "tid": 1, "ts": 2, "dur": 1,
         "args": {"correlation": 9, "External id": 5}},
        {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 1, "ts": 4, "dur": 3,
         "args": {"correlation": 9, "External id": 5, "device": 0}}]}
    p = tmp_path / "xpu.json"
    p.write_text(json.dumps(doc))
    rep = nongemm_trace.analyze(p)
    assert rep.attribution == {"external_id": 1}
    assert rep.kernels["launch_op"].to_list() == ["aten::mm"]


def test_a_reused_correlation_id_is_counted_and_the_earliest_call_used(tmp_path):
    """Two launch calls with one correlation id: one duplicate counted (the distinct ids are the
    calls kept), the kernel linked to the earlier call's op."""
    import json

    from nongemm_trace.link import link
    doc = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "args": {}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 20, "dur": 10, "args": {}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2, "dur": 1,
         "args": {"correlation": 9}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 22, "dur": 1,
         "args": {"correlation": 9}},
        {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": 40, "dur": 3,
         "args": {"correlation": 9, "device": 0, "stream": 7}}]}
    p = tmp_path / "dup.json"
    p.write_text(json.dumps(doc))
    linked = link(load_trace(p))
    assert [(a.code, a.count) for a in linked.anomalies if a.code == "duplicate_correlation"] == \
        [("duplicate_correlation", 1)]
    assert nongemm_trace.analyze(p).kernels["launch_op"].to_list() == ["aten::mm"]


def test_tree_sweep_queries_equal_innermost_containing():
    """The launch calls answered inside the op-tree sweep get the same ops as a separate sweep."""
    trace = load_trace(shared("h200", "bert_base_train_bs8_s128__eager.json.gz"))
    pts = trace.launches.select(pl.col("launch_id").alias("qid"), "pid", "tid", "ts_ns", "end_ns")
    _, _, hits = op_tree(trace.ops, pts)
    alone = innermost_containing(trace.ops, pts)
    assert hits.sort("qid").equals(alone.sort("qid"))
    assert hits["op_id"].null_count() < hits.height // 10  # most launch calls sit inside an op
