#!/usr/bin/env python3
"""The model-zoo table: one row per trace in a folder (names MODEL__SETTING.json.gz, as
bench/zoo.py writes them).

    python3 bench/horizon_table.py TRACES_DIR > table.md

Columns: GEMM and non-GEMM share of GPU time (default taxonomy, launch level); the
paper's metric (ispass25 taxonomy, top-level ops, CPU + GPU time, unclassified left
out of the denominator as the paper's artifact did); the dominant non-GEMM category;
GPU idle and host-bound idle as shares of the span; and, for compiled rows, the
non-GEMM share of the same model's eager trace next to it.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import polars as pl

from nongemm_trace import analyze, launch_analysis

ORDER = ["swin_t", "swin_s", "swin_b", "vit_b_16", "vit_l_16", "vit_h_14", "detr_resnet50", "fasterrcnn_resnet50_fpn",
         "maskrcnn_resnet50_fpn", "maskformer_swin", "segformer_b0", "gpt2", "gpt2_large", "gpt2_xl", "bert_base",
         "llama2_7b_shaped", "mixtral_8x7b_shaped_8layers"]


def row(path: Path) -> dict:
    model, setting = path.name.replace(".json.gz", "").split("__", 1)
    rep = analyze(path)
    non = rep.kernels.filter(pl.col("class") == "non-GEMM")
    dom = non.group_by("category").agg(pl.col("dur_ns").sum()).sort("dur_ns", descending=True).head(1)
    paper = analyze(path, taxonomy="ispass25")
    p = dict(paper.classes.select("class", "time_ns").iter_rows())
    classified = p.get("GEMM", 0) + p.get("non-GEMM", 0)
    la = launch_analysis(path).summary
    span = la["span_us"] or 1.0
    return {
        "model": model, "setting": setting, "gpu_us_per_step": rep.gpu_time_ns / 1000 / max(1, rep.steps.height),
        "gemm": rep.share("GEMM"), "non_gemm": rep.share("non-GEMM"), "transfer": rep.share("transfer"),
        "dominant": (dom["category"][0], dom["dur_ns"][0] / rep.gpu_time_ns) if dom.height else ("-", 0.0),
        # the paper's artifact knew no Inductor, FP8 or MoE kernels: where most time is unclassified
        # by its op lists, its metric says nothing
        "paper_non_gemm": (p.get("non-GEMM", 0) / classified if classified else 0.0)
        if p.get("unclassified", 0) <= 0.2 * sum(p.values()) else None,
        "paper_unclassified": p.get("unclassified", 0) / (sum(p.values()) or 1),
        "idle": la["idle_us"] / span, "host_idle": la["host_bound_idle_us"] / span,
    }


def main(folder: str) -> int:
    paths = sorted(Path(folder).glob("*.json.gz"))
    rows = [row(p) for p in paths]
    rows.sort(key=lambda r: (ORDER.index(r["model"]) if r["model"] in ORDER else 99, r["setting"]))
    eager = {r["model"]: r for r in rows if r["setting"] == "bs1_fp16_eager"}
    print("| model | setting | GPU time / step (us) | GEMM | non-GEMM | host<->device transfer "
          "| non-GEMM, paper metric | dominant non-GEMM | GPU idle (host-bound) | fusion: non-GEMM eager -> compiled |")
    print("|---|---|---:|---:|---:|---:|---:|---|---:|---|")
    for r in rows:
        fusion = "-"
        if r["setting"].endswith("compiled") and r["model"] in eager:
            fusion = f"{100 * eager[r['model']]['non_gemm']:.1f} % -> {100 * r['non_gemm']:.1f} %"
        cat, share = r["dominant"]
        paper = (f"{100 * r['paper_non_gemm']:.1f} %" if r["paper_non_gemm"] is not None
                 else f"n/a ({100 * r['paper_unclassified']:.0f} % unclassified)")
        print(f"| {r['model']} | {r['setting']} | {r['gpu_us_per_step']:,.0f} | {100 * r['gemm']:.1f} % "
              f"| {100 * r['non_gemm']:.1f} % | {100 * r['transfer']:.1f} % | {paper} | {cat} ({100 * share:.1f} %) "
              f"| {100 * r['idle']:.0f} % ({100 * r['host_idle']:.0f} %) | {fusion} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
