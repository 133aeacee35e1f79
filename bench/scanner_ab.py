"""A/B of the C scanner alone: two builds of ``_nongemm_scan`` scan the same chunks, interleaved.

    python3 bench/scanner_ab.py FILE.json DIR_A DIR_B [--rounds 5]

Each DIR holds a build of the extension (``python3 setup.py build_ext --build-lib DIR``, or a
site-packages folder). The file's events are cut into 8 MB chunks the way the loader cuts
them; each round times ``scan()`` of every chunk with build A, then with build B, in two
fresh processes. Prints each build's times (s) and B / A of the medians: what a change to
the scanner costs, without the rest of the command's noise.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ONE = r'''
import sys, time, importlib.util, json
spec = importlib.util.spec_from_file_location("_nongemm_scan", sys.argv[2])
ext = importlib.util.module_from_spec(spec); spec.loader.exec_module(ext)
sys.path.insert(0, sys.argv[3])
from nongemm_trace.load.kineto.cutting import Cutter, EVENTS_KEY
from nongemm_trace.load.kineto.scanner import ROUTES
data = bytearray(open(sys.argv[1], "rb").read())
key = EVENTS_KEY.search(data)
chunks = [bytes(v) for v, _ in Cutter(data, key.end(), iter(()), [])]
t = time.perf_counter()
for c in chunks:
    res = ext.scan(c, ROUTES[False], 4e15)
    assert not isinstance(res, str), res
print(json.dumps(time.perf_counter() - t))
'''


def _so(folder: str) -> str:
    found = sorted(Path(folder).glob("_nongemm_scan*.so"))
    if not found:
        raise SystemExit(f"no _nongemm_scan build in {folder}")
    return str(found[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("a", help="folder of build A")
    ap.add_argument("b", help="folder of build B")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    path, a, b, rounds = args.file, _so(args.a), _so(args.b), args.rounds
    times: dict[str, list[float]] = {a: [], b: []}
    for _ in range(rounds):
        for so in (a, b):
            out = subprocess.run([sys.executable, "-c", ONE, path, so, str(ROOT)], capture_output=True, text=True,
                                 check=True)
            times[so].append(json.loads(out.stdout))
    for so, ts in times.items():
        print(f"{so}: " + " / ".join(f"{t:.3f}" for t in sorted(ts)))
    print(f"B / A (medians): {statistics.median(times[b]) / statistics.median(times[a]):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
