"""The C extension's threads under ThreadSanitizer, without polars (whose allocator does not run
under TSan): the read-ahead thread with ``wait`` and ``take`` called from several Python threads
at once, and two threads scanning chunks side by side (the GIL released) while results are
dropped and the column-map cache trimmed from others. ::

    bash bench/sanitize.sh tsan python3 bench/tsan_threads.py [ROUNDS]

Exit 0 when every round ended as it must (one take got the chunks, the others were refused;
every scan accepted its chunk); a data race aborts the process with TSan's report.
"""

from __future__ import annotations

import gzip
import os
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if os.environ.get("NONGEMM_EXT_DIR"):
    sys.path.insert(0, os.environ["NONGEMM_EXT_DIR"])

from nongemm_trace.load.kineto import cutting, scanner  # noqa: E402  (no polars in these)

CHUNK = 64 << 10


def _run(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "a thread hangs"


def read_ahead_round(path: bytes, routes) -> None:
    handle = scanner.SCANNER.read_ahead(path, routes, 4e15, CHUNK, cutting.read_block(), cutting.first_fill())
    got, refused = [], []
    together = threading.Barrier(5)  # all five call at once, while the thread still reads

    def wait() -> None:
        together.wait()
        scanner.SCANNER.read_ahead_wait(handle)

    def take() -> None:
        together.wait()
        try:
            got.append(scanner.SCANNER.read_ahead_take(handle))
        except ValueError:
            refused.append(1)

    _run([threading.Thread(target=wait) for _ in range(2)] + [threading.Thread(target=take) for _ in range(3)])
    assert len(got) == 1 and len(refused) == 2, (len(got), len(refused))
    results = got[0][4]
    dropper = threading.Thread(target=results.__len__)  # the results die on whichever thread drops them last
    got.clear()  # the last reference but the dropper's
    _run([dropper])


def scan_round(chunks: list[bytes], routes) -> None:
    def scan(mine: list[bytes]) -> None:
        for c in mine:
            res = scanner.SCANNER.scan(c, routes, 4e15)
            assert not isinstance(res, str), res
            del res  # columns back to the cache, from this thread

    _run([threading.Thread(target=scan, args=(chunks[k::2],)) for k in range(2)]
         + [threading.Thread(target=scanner.SCANNER.trim)])


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    if scanner.SCANNER is None or not hasattr(scanner.SCANNER, "read_ahead"):
        print("the C scanner with its read-ahead thread is not built", file=sys.stderr)
        return 2
    print(f"extension: {scanner.SCANNER.__file__}")
    one = gzip.decompress((ROOT / "sample_traces" / "bert_base_fp32_bs8_s128__eager.json.gz").read_bytes())
    key = one.index(b'"traceEvents"')
    start, end = one.index(b"[", key) + 1, one.rindex(b"]")
    # the events eight times: the read-ahead thread is still reading when the takers come
    raw = one[:start] + b",".join([one[start:end]] * 8) + one[end:]
    os.environ["NONGEMM_CHUNK_BYTES"] = str(CHUNK)
    buf = bytearray(raw)
    key = cutting.EVENTS_KEY.search(buf)
    chunks = [bytes(view) for view, _ in cutting.Cutter(buf, key.end(), iter(()), [])]
    with tempfile.TemporaryDirectory() as tmp:
        plain, packed = Path(tmp) / "t.json", Path(tmp) / "t.json.gz"
        plain.write_bytes(raw)
        packed.write_bytes(gzip.compress(raw))
        for r in range(rounds):
            routes = scanner.ROUTES[r % 2 == 1]
            read_ahead_round(bytes(plain), routes)
            if scanner.SCANNER.READ_AHEAD_GZIP:
                read_ahead_round(bytes(packed), routes)
            scan_round(chunks, routes)
    scanner.SCANNER.trim()
    print(f"{rounds} rounds: read-ahead (plain{' and gzip' if scanner.SCANNER.READ_AHEAD_GZIP else ''}) "
          f"with wait/take from 5 threads, {len(chunks)} chunks scanned on 2 threads beside trim: no race reported")
    return 0


if __name__ == "__main__":
    sys.exit(main())
