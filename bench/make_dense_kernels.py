#!/usr/bin/env python3
"""Write a Kineto trace of N distinct dense kernel events and nothing else (the memory figures of
docs/benchmarks.md, "Dense kernels and a million steps").

    python3 bench/make_dense_kernels.py N OUT.json[.gz]

Each kernel has its own start (10 us apart, 5 us long), correlation and External id, on one stream
of one device, with no launch call and no op: a GPU-only capture, the shape whose tables hold the
most bytes per byte of JSON (every row distinct, every id a number, no text but two kernel names).
2,000,000 kernels are 346 MB of JSON. Written as a stream: the generator holds one event at a time.
"""

from __future__ import annotations

import gzip
import json
import sys

NAMES = ("vectorized_elementwise_kernel", "ampere_sgemm_128x64_tn")
HEADER = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "numSms": 132}],
          "displayTimeUnit": "ms", "baseTimeNanoseconds": 1790857026000000000}


def main(n: int, out: str) -> None:
    opener = gzip.open if out.endswith(".gz") else open
    with opener(out, "wb") as f:
        f.write(json.dumps(HEADER)[:-1].encode() + b',"traceEvents":[')
        for i in range(n):
            event = {"ph": "X", "cat": "kernel", "name": NAMES[i % 2], "pid": 0, "tid": 7, "ts": 1000 + i * 10,
                     "dur": 5, "args": {"External id": i + 1, "correlation": i + 1, "stream": 7, "device": 0}}
            f.write((b"," if i else b"") + json.dumps(event, separators=(",", ":")).encode())
        f.write(b"]}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(int(sys.argv[1]), sys.argv[2])
