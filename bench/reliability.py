#!/usr/bin/env python3
"""Reliability census: run N mutants of each class through the CLI and count the outcomes.

    python3 bench/reliability.py --per-class 200 > docs/reliability-census.md

Outcomes per mutant: ``report`` (exit 0, invariants hold, the numbers match an
independent account of the file), ``refused`` (exit 2, one line naming the file),
or ``FAILED`` (anything else: a traceback, a wrong number, an unexpected error).
Uses the same mutators as tests/test_robustness.py, on the project's sample traces.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import mutants  # noqa: E402

BASES = [ROOT / "sample_traces" / n for n in (
    "llama_1b_bf16_bs1_s2048__compiled_cudagraphs.json.gz",
    "h100__gaunernst_bert-small-uncased__1016001.json.gz",
    "legacy_inference_rank_1.json.gz",
)]
LOSS = {"missing_duration", "unsupported_phase", "malformed_events", "duplicate_activities", "missing_category"}




def _judge(path: Path, doc=None) -> str:
    code, out, err = mutants.run_cli(path)
    try:
        d = mutants.check_outcome(code, out, err, path)
    except AssertionError:
        return "FAILED"
    if d is None:
        return "refused"
    if doc is not None:
        n, total, dropped = mutants.valid_activities(mutants.finite(doc))
        warned = sum(w["count"] for w in d["warnings"] if w["code"] in LOSS)
        if d["gpu_activities"] != n or round(d["gpu_time_us"] * 1000) != total or warned < dropped:
            return "FAILED"
    return "report"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-class", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        classes = {name: ("doc", fn) for name, fn in mutants.DOC_MUTATORS.items()}
        classes.update({"truncated JSON": ("json", mutants.truncate_json),
                        "bit flip inside gzip": ("gz", mutants.flip_gzip_bit),
                        "non-UTF-8 bytes in a name": ("json", mutants.non_utf8),
                        "NaN / Infinity literals": ("json", mutants.nan_literals)})
        for name, (kind, fn) in classes.items():
            counts = {"report": 0, "refused": 0, "FAILED": 0}
            t0 = time.monotonic()
            for i in range(args.per_class):
                base = BASES[i % len(BASES)]
                r = random.Random(rng.getrandbits(32))
                if kind == "doc":
                    doc = fn(json.loads(gzip.decompress(base.read_bytes())), r)
                    path = mutants.write_doc(doc, tmpd / "m.json")
                    counts[_judge(path, doc)] += 1
                elif kind == "json":
                    path = tmpd / "m.json"
                    path.write_bytes(fn(gzip.decompress(base.read_bytes()), r))
                    counts[_judge(path)] += 1
                else:
                    path = tmpd / "m.json.gz"
                    path.write_bytes(fn(base.read_bytes(), r))
                    verdict = _judge(path)
                    if verdict == "report":  # only a flip gzip does not check: same numbers as the original
                        got = json.loads(mutants.run_cli(path)[1])
                        ref = json.loads(mutants.run_cli(base)[1])
                        if (got["gpu_time_us"], got["gpu_activities"]) != (ref["gpu_time_us"], ref["gpu_activities"]):
                            verdict = "FAILED"
                    counts[verdict] += 1
            rows.append((name, args.per_class, counts, time.monotonic() - t0))
        # single cases
        bomb = tmpd / "bomb.json"
        bomb.write_bytes(mutants.nesting_bomb())
        t0 = time.monotonic()
        rows.append(("nesting bomb (10^6 levels)", 1, {"report": 0, "refused": 0, "FAILED": 0} | {_judge(bomb): 1},
                     time.monotonic() - t0))
    print("| mutant class | mutants | report | refused (exit 2) | FAILED | seconds |")
    print("|---|---:|---:|---:|---:|---:|")
    failed = 0
    for name, n, c, s in rows:
        failed += c["FAILED"]
        print(f"| {name} | {n} | {c['report']} | {c['refused']} | {c['FAILED']} | {s:.1f} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
