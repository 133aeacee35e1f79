"""Phases of a serving run (issue #45 item 2): iterations split into prefill / decode / mixed / other,
and a device told by its properties where its name is empty.

The serving traces are TraceLens's vLLM and SGLang decode traces (one iteration each, a HIP-graph
replay); the generate() loops are sample_traces/serving/ (their batch, prompt and new tokens are in
their names, the capture script's arguments). Every figure is checked against the raw JSON read
with the standard library (conftest's reader), never against the library's own tables."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import REPO, SAMPLES, ns, raw_events, shared

import nongemm_trace
from nongemm_trace.devices import match_device
from nongemm_trace.devices.identity import identify
from nongemm_trace.models.report import Report

K2 = "external2/kineto"
SGLANG = (K2, "tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz")
VLLM = (K2, "tracelens__inference__vllm_decode_full__graph_execution.json.gz")
QWEN_FORWARD = (K2, "tracelens__mi300__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
GENERATE = sorted((SAMPLES / "serving").glob("*_generate_*.json.gz"))
GRAPH_CAPTURE = SAMPLES / "serving" / "llama_decode_graph_capture.json.gz"
GRAPH_REPLAY = SAMPLES / "serving" / "llama_decode_graph_replay.json.gz"
ACTIVITY = {"kernel", "gpu_memcpy", "gpu_memset"}


def _doc(path) -> dict:
    return nongemm_trace.analyze(str(path)).to_dict()


def _sums_hold(doc: dict) -> None:
    """Per phase: the classes sum to the phase's GPU time, the categories listed are non-GEMM ones
    (at most three, largest first); over the phases, no more GPU time or activities than the run."""
    names = {c["category"]: c["class"] for c in doc["categories"]}
    for p in doc["phases"]:
        assert p["phase"] in ("prefill", "decode", "mixed", "other")
        assert ns(sum(c["time_us"] for c in p["classes"])) == ns(p["gpu_time_us"])
        assert len(p["categories"]) <= 3 and all(names[c["category"]] == "non-GEMM" for c in p["categories"])
        times = [c["time_us"] for c in p["categories"]]
        assert times == sorted(times, reverse=True)
        assert p["iteration_us"] == pytest.approx(p["time_us"] / p["iterations"], abs=1e-3)
    assert sum(ns(p["gpu_time_us"]) for p in doc["phases"]) <= ns(doc["gpu_time_us"])
    assert sum(p["activities"] for p in doc["phases"]) <= doc["gpu_activities"]


def _raw_iteration(path, prefix: str) -> tuple[int, int, int, int]:
    """From the raw events: the one annotation named ``prefix…``, its span extended to the end of
    the device work whose launch call starts inside it (start, end ns), and that work's count and
    GPU time."""
    ev = raw_events(str(path))
    (mark,) = [e for e in ev if e.get("cat") == "user_annotation" and e.get("name", "").startswith(prefix)]
    lo, hi = ns(mark["ts"]), ns(mark["ts"]) + ns(mark["dur"])
    inside = {e["args"]["correlation"] for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")
              and lo <= ns(e["ts"]) < hi and "correlation" in e.get("args", {})}
    work = [e for e in ev if e.get("cat") in ACTIVITY and e.get("args", {}).get("correlation") in inside]
    end = max([hi, *(ns(e["ts"]) + ns(e["dur"]) for e in work)])
    return lo, end, len(work), sum(ns(e["dur"]) for e in work)


@pytest.mark.parametrize("which,prefix,engine", [(SGLANG, "step[DECODE", "sglang"), (VLLM, "execute_32_", "vllm")],
                         ids=["sglang", "vllm"])
def test_a_serving_decode_step_is_one_decode_iteration(which, prefix, engine):
    path = shared(*which)
    doc = _doc(path)
    assert doc["phase_engine"] == engine
    (p,) = doc["phases"]
    assert (p["phase"], p["iterations"], p["batch"], p["tokens"]) == ("decode", 1, 32, 32)
    lo, end, count, gpu = _raw_iteration(path, prefix)
    assert ns(p["time_us"]) == end - lo  # the host span, on to the end of the replayed graph
    assert (p["activities"], ns(p["gpu_time_us"])) == (count, gpu)
    _sums_hold(doc)


@pytest.mark.parametrize("path", GENERATE, ids=[p.name[:30] for p in GENERATE])
def test_a_generate_loop_is_one_prefill_then_a_decode_per_new_token(path):
    batch, prompt, new = (int(x) for x in re.search(r"_bs(\d+)_p(\d+)_n(\d+)", path.name).groups())
    doc = _doc(path)
    assert doc["phase_engine"] == "generate"
    got = {p["phase"]: p for p in doc["phases"]}
    assert set(got) == {"prefill", "decode"}
    assert (got["prefill"]["iterations"], got["prefill"]["batch"], got["prefill"]["tokens"]) == \
        (1, batch, batch * prompt)
    # the first new token comes from the prefill's logits, each other one from a decode step
    assert (got["decode"]["iterations"], got["decode"]["batch"], got["decode"]["tokens"]) == \
        (new - 1, batch, batch * (new - 1))
    # the forward passes cover the profiled generate() call: from its first embedding to its end
    ev = raw_events(str(path))
    (step,) = [e for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep")]
    first = min(ns(e["ts"]) for e in ev if e.get("name") == "aten::embedding")
    total = sum(ns(p["time_us"]) for p in doc["phases"])
    assert total <= ns(step["ts"]) + ns(step["dur"]) - first
    assert total >= 0.9 * (ns(step["ts"]) + ns(step["dur"]) - first)
    _sums_hold(doc)


@pytest.mark.parametrize("which", [QWEN_FORWARD, ("h200", "bert_base_fp32_bs8_s128__eager.json.gz"),
                                   ("h200", "gpt2_fp32_bs8_s128__compiled.json.gz")],
                         ids=["qwen-forward", "bert", "gpt2-compiled"])
def test_a_forward_pass_that_never_decodes_has_no_phases(which):
    doc = _doc(shared(*which))
    assert "phases" not in doc


def _capture_windows(ev: list) -> list[tuple]:
    """(pid, tid, start, end) of each begin-capture .. end-capture span of a thread, from the raw calls."""
    calls = sorted((e for e in ev if e.get("cat") == "cuda_runtime"
                    and e.get("name") in ("cudaStreamBeginCapture", "cudaStreamEndCapture")), key=lambda e: e["ts"])
    out, open_at = [], {}
    for e in calls:
        key = (e["pid"], e["tid"])
        if e["name"] == "cudaStreamBeginCapture":
            open_at.setdefault(key, ns(e["ts"]))
        elif key in open_at:
            out.append((*key, open_at.pop(key), ns(e["ts"]) + ns(e["dur"])))
    return out


def test_a_decode_step_captured_into_a_cuda_graph_is_no_iteration():
    """The GPU capture of a Llama-shaped decode step (bench/capture_serving.py, H100): one forward pass
    over one token per sequence, recorded inside torch.cuda.graph, its launches run nothing. It is a
    capture, not a decode iteration; the replays of that graph have no generate() marks either."""
    ev = raw_events(str(GRAPH_CAPTURE))
    (win,) = _capture_windows(ev)
    embeds = [e for e in ev if e.get("name") == "aten::embedding"]
    assert embeds and all(win[2] <= ns(e["ts"]) < win[3] for e in embeds)
    assert not [e for e in ev if e.get("cat") == "kernel" and win[2] <= ns(e["ts"]) < win[3]]
    assert "phases" not in _doc(GRAPH_CAPTURE)


def _raw_replay_writes(ev) -> list[tuple]:
    """(pid, tid, ts ns, batch, query) of each write of integer token ids ``[batch, query]`` (an
    ``aten::copy_`` of ``long int``/``int``) that the next graph launch of its thread follows, with no
    other such write between them: a replay's input, read from the raw events."""
    writes = sorted((e["pid"], e["tid"], ns(e["ts"]), *e["args"]["Input Dims"][0]) for e in ev
                    if e.get("cat") == "cpu_op" and e.get("name") == "aten::copy_"
                    and (e.get("args") or {}).get("Input type", [None])[0] in ("long int", "int")
                    and len((e["args"].get("Input Dims") or [[]])[0]) == 2)
    launches = [(e["pid"], e["tid"], ns(e["ts"])) for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")
                and re.fullmatch(r"(cuda|hip|cu)GraphLaunch(_v\d+)?(_ptsz)?", e.get("name", ""))]
    kept = set()
    for pid, tid, t in launches:
        before = [w for w in writes if (w[0], w[1]) == (pid, tid) and w[2] <= t]
        if before:
            kept.add(before[-1])
    return sorted(kept, key=lambda w: w[2])


def test_a_loop_of_decode_graph_replays_is_one_decode_iteration_per_replay():
    """The replays of that decode graph (3 profiled steps of ``g.replay()``, bench/capture_serving.py):
    no annotation and no op of the forward pass (the graph runs its kernels), but the token ids
    ``[8, 1]`` written into the graph's static input before each replay say one query token for each of
    8 sequences. Each write opens a decode iteration, running to the next write (the last: to the end
    of the thread's ops after it), and its work is the kernels its replay launched."""
    ev = raw_events(str(GRAPH_REPLAY))
    writes = _raw_replay_writes(ev)
    assert [w[3:] for w in writes] == [(8, 1)] * 3
    doc = _doc(GRAPH_REPLAY)
    assert doc["phase_engine"] == "replay"
    (p,) = doc["phases"]
    assert (p["phase"], p["iterations"], p["batch"], p["tokens"]) == ("decode", 3, 8, 24)
    thread = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "cpu_op"
              and (e["pid"], e["tid"]) == writes[-1][:2] and ns(e["ts"]) >= writes[-1][2]]
    end = max(ns(e["ts"]) + ns(e["dur"]) for e in thread)
    lo = writes[0][2]
    inside = {e["args"]["correlation"] for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")
              and lo <= ns(e["ts"]) < end and "correlation" in e.get("args", {})}
    work = [e for e in ev if e.get("cat") in ACTIVITY and e.get("args", {}).get("correlation") in inside]
    # the spans tile the loop: from the first write to the later of the last op's end and the last work's
    assert ns(p["time_us"]) == max(end, *(ns(e["ts"]) + ns(e["dur"]) for e in work)) - lo
    assert (p["activities"], ns(p["gpu_time_us"])) == (len(work), sum(ns(e["dur"]) for e in work))
    replayed = sum(1 for e in ev if e.get("cat") == "kernel" and e["args"].get("correlation") in {
        g["args"]["correlation"] for g in ev if g.get("name") == "cudaGraphLaunch"})
    assert replayed > 0 and p["activities"] >= replayed
    _sums_hold(doc)


def test_replays_of_a_prompt_alone_are_no_generation(tmp_path):
    """The same replay trace with its written token ids made ``[8, 16]`` (16 query tokens: prompts):
    graph replays that never decode are an inference, as torch.compile's CUDA graphs of one forward pass
    (the H200 Llama's, whose inputs are a tensor list) are: no phases."""
    import gzip

    doc = json.loads(gzip.decompress(GRAPH_REPLAY.read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("name") == "aten::copy_" and (e.get("args") or {}).get("Input Dims") == [[8, 1], [8, 1], []]:
            e["args"]["Input Dims"] = [[8, 16], [8, 16], []]
    dst = tmp_path / GRAPH_REPLAY.name
    dst.write_bytes(gzip.compress(json.dumps(doc).encode()))
    assert "phases" not in _doc(dst)
    assert "phases" not in _doc(SAMPLES / "llama_1b_bf16_bs1_s2048__compiled_cudagraphs.json.gz")


def test_phases_are_in_the_json_of_the_command_and_read_back():
    path = shared(*VLLM)
    out = subprocess.run([sys.executable, "-m", "nongemm_trace", "analyze", str(path), "--format", "json"],
                         capture_output=True, text=True, cwd=REPO, check=True).stdout
    doc = json.loads(out)
    assert [set(p) >= {"phase", "iterations", "time_us", "classes"} for p in doc["phases"]] == [True]
    assert Report.from_dict(doc).to_dict()["phases"] == doc["phases"]
    table = subprocess.run([sys.executable, "-m", "nongemm_trace", "analyze", str(path)],
                           capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert "Phases" in table and "decode" in table


def test_a_device_without_a_name_is_told_by_its_properties():
    path = shared(*VLLM)
    (props, *_) = json.loads(json.dumps(_raw_props(path)))
    assert props["name"] == ""
    doc = _doc(path)
    assert (doc["device"]["name"], doc["device"]["name_from"]) == ("AMD Instinct MI300X", "properties")
    assert match_device(props).name == "MI300X"  # its peaks too
    # the memory tells parts of one die apart; a named device keeps its name; no fit: no name
    assert identify({**props, "totalGlobalMem": 256 << 30}) == "AMD Instinct MI325X"
    assert identify({**props, "name": "AMD Instinct MI300X VF"}) is None
    assert identify({**props, "numSms": 999}) is None
    # one MI250 GCD and an MI210 look alike: neither is named (the peaks still match by properties)
    mi250 = {"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0, "numSms": 104,
             "totalGlobalMem": 68702699520}
    assert identify(mi250) is None and match_device(mi250).name == "MI250-GCD"
    assert identify({**mi250, "numSms": 110}) == "AMD Instinct MI250X (one GCD)"
    assert match_device({**mi250, "numSms": 110}).name == "MI250X-GCD"
    assert "name_from" not in _doc(shared(*SGLANG))["device"]


def _raw_props(path) -> list:
    import gzip
    with gzip.open(path, "rt") as fh:
        return json.load(fh)["deviceProperties"]


def _every_trace():
    from conftest import SHARED, kineto_traces
    return [*kineto_traces(), *sorted((SHARED / K2).glob("*.json.gz")), *GENERATE, GRAPH_CAPTURE, GRAPH_REPLAY]


ALL = _every_trace()


@pytest.mark.parametrize("path", ALL, ids=[p.name.replace(".json.gz", "")[:50] for p in ALL])
def test_phases_add_up_on_every_trace(path):
    """On every trace: phases only where the trace marks serving iterations (an engine's step range,
    read from the raw names) or decodes in a generate() loop (an embedding over one token per
    sequence); where there are phases, their iterations are those marks, their times add up within
    the span the iterations cover, and their GPU figures within the run's."""
    ev = raw_events(str(path))
    marks = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "user_annotation"
             and re.match(r"step\[(ForwardMode\.)?[A-Z_]+ bs=\d+\]|execute_\d+_context_\d+[(_]", e.get("name", ""))]
    engines = {m["name"].split("[")[0].split("_")[0] for m in marks}
    first = sorted(marks, key=lambda m: m["name"].startswith("execute"))  # SGLang's range read first
    counted = [m for m in first if m["name"][:4] == first[0]["name"][:4]] if first else []
    windows = _capture_windows(ev)
    decodes = [e for e in ev if e.get("name") == "aten::embedding"
               and re.match(r"\[\[\d+, ?\d+\], ?\[\d+, ?1\]", json.dumps((e.get("args") or {}).get("Input Dims")))
               and not any((e["pid"], e["tid"]) == w[:2] and w[2] <= ns(e["ts"]) < w[3] for w in windows)]
    replays = [w for w in _raw_replay_writes(ev)
               if not any(w[:2] == x[:2] and x[2] <= w[2] < x[3] for x in windows)]
    doc = _doc(path)
    if not counted and not decodes and not any(w[4] == 1 for w in replays):
        assert "phases" not in doc, engines
        return
    if not counted and not decodes:
        assert doc["phase_engine"] == "replay" and sum(p["iterations"] for p in doc["phases"]) == len(replays)
    phases = doc["phases"]
    if counted:
        assert sum(p["iterations"] for p in phases) == len(counted)
        lo = min(ns(m["ts"]) for m in counted)
        hi = max(ns(m["ts"]) + ns(m["dur"]) for m in counted) + ns(doc["gpu_time_us"]) + ns(doc["file_gpu_time_us"])
        assert sum(ns(p["time_us"]) for p in phases) <= hi - lo
        assert sum(ns(p["time_us"]) for p in phases) >= sum(ns(m["dur"]) for m in counted) - len(counted)
    _sums_hold(doc)


@pytest.mark.parametrize("which,old,new,phase,batch,tokens", [
    (VLLM, "execute_32_context_0(sq0sk0", "execute_36_context_4(sq2048sk2048", "mixed", 36, 2048 + 32),
    (VLLM, "_generation_32(sq32sk", "_generation_0(sq0sk", "other", 32, 0),
    (SGLANG, "step[DECODE bs=32]", "step[EXTEND bs=4]", "prefill", 4, None),
    (SGLANG, "step[DECODE bs=32]", "step[MIXED bs=8]", "mixed", 8, None),
    (SGLANG, "step[DECODE bs=32]", "step[IDLE bs=0]", "other", 0, None),
    (SGLANG, "step[DECODE bs=32]", "step[SOMETHING_NEW bs=3]", "other", 3, None),
    (SGLANG, "step[DECODE bs=32]", "step[ForwardMode.DECODE bs=16]", "decode", 16, 16),
    (VLLM, "execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086sqsq32sqsk55086)",
     "execute_32_context_0_generation_32", "decode", 32, None),
], ids=["vllm-mixed", "vllm-empty", "sglang-extend", "sglang-mixed", "sglang-idle", "sglang-unknown",
        "sglang-enum-name", "vllm-no-counts"])
def test_each_engine_mark_gives_its_phase(tmp_path, which, old, new, phase, batch, tokens):
    """The serving traces with their step range renamed as the engine writes other steps: the phase,
    batch and tokens follow the name (a context request with a decode one is mixed; a mode not
    listed is other)."""
    import gzip

    src = shared(*which)
    doc = json.loads(gzip.decompress(src.read_bytes()))
    hits = 0
    for e in doc["traceEvents"]:
        if e.get("cat") == "user_annotation" and old in e.get("name", ""):
            e["name"] = e["name"].replace(old, new)
            hits += 1
    assert hits == 1
    dst = tmp_path / src.name
    dst.write_bytes(gzip.compress(json.dumps(doc).encode()))
    (p,) = _doc(dst)["phases"]
    assert (p["phase"], p["iterations"], p["batch"], p["tokens"]) == (phase, 1, batch, tokens)


@pytest.mark.parametrize("path", GENERATE, ids=[p.name[:30] for p in GENERATE])
def test_phases_in_markdown_and_as_a_table(path, tmp_path, capsys):
    """The phases are in the Markdown report and are a ``--table phases`` of the file formats, with the
    JSON's figures; a trace without phases gives the table's header alone."""
    import polars as pl

    from nongemm_trace.cli import main
    doc = _doc(path)
    assert main(["analyze", str(path), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    for p in doc["phases"]:
        assert re.search(rf"\| {p['phase']} \| {p['iterations']:,} \| {p['time_us']:,.1f} \|", md), p
    out = tmp_path / "phases.parquet"
    assert main(["analyze", str(path), "--format", "parquet", "--table", "phases", "-o", str(out)]) == 0
    table = pl.read_parquet(out)
    assert table["phase"].to_list() == [p["phase"] for p in doc["phases"]]
    for row, p in zip(table.iter_rows(named=True), doc["phases"]):
        assert (row["iterations"], row["time_us"], row["gpu_time_us"], row["tokens"]) == \
            (p["iterations"], p["time_us"], p["gpu_time_us"], p["tokens"])
        by = {c["class"]: c["time_us"] for c in p["classes"]}
        assert row["GEMM_time_us"] == by.get("GEMM", 0) and row["non-GEMM_time_us"] == by.get("non-GEMM", 0)
    assert main(["analyze", str(GRAPH_REPLAY), "--format", "csv", "--table", "phases"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[0].startswith("phase,iterations,time_ns")


@pytest.mark.parametrize("where", [SGLANG])
def test_an_iteration_is_not_called_a_step(where):
    """A serving iteration's mean time is ``iteration_us`` / "iteration (us)", never a step figure: the
    SGLang decode trace's steps are its iterations, whose step figure is the loop's period over them
    (tests/test_serving_steps.py), not the phases' host-span time, and a ``generate()`` call is one step of
    many iterations; a step time is the loop's period alone (issue #43, one vocabulary)."""
    path = shared(*where)
    doc = _doc(path)
    assert doc["phases"] and all("step_us" not in p and "iteration_us" in p for p in doc["phases"])
    out = subprocess.run([sys.executable, "-m", "nongemm_trace", "analyze", str(path), "-q"], capture_output=True,
                         text=True, check=True, env={**os.environ, "COLUMNS": "200"}).stdout
    phases = out[out.index("Phases"):]
    assert "iteration (us)" in phases and "step (us)" not in phases


def test_a_generate_call_is_one_step_of_many_iterations():
    doc = _doc(GENERATE[0])
    assert len(doc["steps"]) == 1 and sum(p["iterations"] for p in doc["phases"]) > 1
    assert all(p["iteration_us"] < doc["steps"][0]["step_us"] for p in doc["phases"])
