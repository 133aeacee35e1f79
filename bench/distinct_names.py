"""Time per distinct kernel name: N kernels with N distinct names, analysed end to end.

Two sets: the hostile reproducer's short names (``k0_xxxx…``, ../shared/fuzz/hostile/S13) and real
kernel names (tests/data/labelled_kernels.csv.gz, 283 characters on average, templated and mangled)
each made distinct by a suffix. Prints one JSON line per set: names, seconds of ``analyze``, and
microseconds per name above the same trace with one name. Figures: docs/benchmarks.md.

    python3 bench/distinct_names.py 60000
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

REPO = Path(__file__).resolve().parent.parent


def write(path: Path, names: list[str]) -> None:
    ev = (json.dumps({"ph": "X", "cat": "kernel", "name": n, "pid": 0, "tid": 7, "ts": 2 * i, "dur": 1,
                      "args": {"device": 0, "stream": 7}}) for i, n in enumerate(names))
    path.write_text('{"traceEvents": [' + ",".join(ev) + "]}")


def analyze_seconds(path: Path) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "nongemm_trace", "analyze", str(path), "--format", "json", "-o",
                    str(path.with_suffix(".out.json"))], check=True, cwd=REPO)
    return time.perf_counter() - t


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 60000
    with gzip.open(REPO / "tests" / "data" / "labelled_kernels.csv.gz", "rb") as fh:
        real = pl.read_csv(fh.read())["name"].unique().sort().to_list()
    sets = {"short (S13)": [f"k{i}_xxxxxxxxxxxxxxxxxxxx" for i in range(n)],
            "real kernel names": [f"{real[i % len(real)]}_{i}" for i in range(n)]}
    with tempfile.TemporaryDirectory() as tmp:
        for label, names in sets.items():
            many, one = Path(tmp) / "many.json", Path(tmp) / "one.json"
            write(many, names)
            write(one, [names[0]] * n)
            t_many, t_one = analyze_seconds(many), analyze_seconds(one)
            print(json.dumps({"set": label, "names": n, "seconds": round(t_many, 2),
                              "one_name_seconds": round(t_one, 2),
                              "us_per_name": round((t_many - t_one) / n * 1e6, 1)}))


if __name__ == "__main__":
    main()
