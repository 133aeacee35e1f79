"""A second process that decodes chunks of a large trace, so that both cores work.

Decoding JSON into Python objects and turning them into columns holds the GIL, so a
thread cannot share the work; a process can. The main process cuts the stream into
chunks as before and hands some of them (as many as the helper keeps up with) to one
helper process, which decodes each into the same partial tables and sends them back as
Arrow IPC. Results are reassembled in file order, so the tables are exactly those of a
single-process load.

The helper is a plain ``python -m nongemm_trace.load.chunk_worker`` subprocess (no
``multiprocessing``: that would re-import the caller's ``__main__`` and is refused inside
daemonic pool workers). Chunks travel through shared memory (a ``memfd`` mapped by both
processes, one slot per chunk in flight): copying 16 MB there takes milliseconds, while
pushing it through a pipe to a process whose reading thread waits for the GIL took a
second per gigabyte. Linux only (``os.memfd_create``); elsewhere no helper is used.

Protocol on the pipes (integers little-endian):

* main -> helper (stdin): ``seq:u32, slot:u32, length:u64`` — chunk ``seq`` is the JSON
  array of events in the first ``length`` bytes of slot ``slot``; ``seq = 0xFFFFFFFF``
  ends the input.
* helper -> main (stdout): ``length:u64`` then a msgpack map: first ``{"ready": true}``,
  then per chunk ``{"seq", "n", "tables": {name: IPC bytes}, "tally", "malformed"}`` or
  ``{"seq", "error": "malformed" | "trace" | "internal", "message"}``. An answer frees
  the chunk's slot.
"""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec

_IN = struct.Struct("<IIQ")
_OUT = struct.Struct("<Q")
_END = 0xFFFFFFFF
#: chunks handed to the helper and not yet answered: one in work, one waiting
BACKLOG = 2
#: the answers' pipe (Linux default 64 KB): a chunk's tables cross in a few reads
PIPE_BYTES = 1 << 20
#: a helper silent this long while chunks are due is taken for hung (one chunk takes ~0.1 s)
STALL_SECONDS = 120.0


class WorkerFailed(Exception):
    """The helper died or broke the protocol: the caller loads the file without it."""


def available() -> bool:
    """Whether a helper can run here (shared memory through ``memfd_create``: Linux)."""
    return hasattr(os, "memfd_create")


def _read_exact(fh, n: int) -> bytearray | None:
    """``n`` bytes from a raw binary file, or None at end of file."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = fh.readinto(view[got:])
        if not k:
            return None
        got += k
    return buf


def _widen(fd: int) -> None:
    """A 1 MB pipe instead of 64 KB, for the answers: a chunk's tables then cross in a few
    reads, each of which waits for the GIL of a process that is busy decoding."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (ImportError, OSError):  # above /proc/sys/fs/pipe-max-size: the default size
        pass


def _write_all(fd: int, data) -> None:
    view = memoryview(data).cast("B")
    while view:
        k = os.write(fd, view)
        view = view[k:]


class ChunkWorker:
    """The main process's side: start the helper, hand it chunks, collect the answers."""

    def __init__(self, path: str, keep_python: bool, slot_bytes: int) -> None:
        import mmap

        import nongemm_trace

        page = mmap.PAGESIZE
        self.slot_bytes = -(-slot_bytes // page) * page
        self._fd = os.memfd_create("nongemm-chunks", getattr(os, "MFD_CLOEXEC", 1))
        os.ftruncate(self._fd, self.slot_bytes * BACKLOG)
        self._shared = mmap.mmap(self._fd, self.slot_bytes * BACKLOG)
        self._free = list(range(BACKLOG))
        self._slot_of: dict[int, int] = {}
        root = str(Path(nongemm_trace.__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "nongemm_trace.load.chunk_worker", path, "1" if keep_python else "0",
                 str(self._fd), str(self.slot_bytes)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, bufsize=0,
                pass_fds=(self._fd,), cwd=root)  # cwd: `-m` looks there first, so this very package runs
        except (OSError, ValueError, TypeError) as exc:  # no interpreter to start (embedded Python)
            self._shared.close()
            os.close(self._fd)
            raise OSError(f"cannot start the helper process: {exc}") from None
        _widen(self.proc.stdout.fileno())
        self.results: dict[int, dict[str, Any]] = {}
        self.sent = 0
        self.ready = threading.Event()
        self.dead = threading.Event()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read_results, name="nongemm-chunk-results", daemon=True)
        self._reader.start()

    def can_take(self, nbytes: int) -> bool:
        """Ready, alive, a slot free and the chunk fits: give it this chunk."""
        return self.ready.is_set() and not self.dead.is_set() and bool(self._free) and nbytes <= self.slot_bytes

    def send(self, seq: int, chunk) -> None:
        with self._lock:
            slot = self._free.pop()
            self._slot_of[seq] = slot
        at = slot * self.slot_bytes
        self._shared[at:at + len(chunk)] = chunk
        try:
            _write_all(self.proc.stdin.fileno(), _IN.pack(seq, slot, len(chunk)))
        except OSError:
            raise WorkerFailed("the helper process stopped reading") from None
        self.sent += 1

    def finish(self) -> dict[int, dict[str, Any]]:
        """End the input, wait for every answer; the answers by chunk number. A helper that
        answers nothing for :data:`STALL_SECONDS` is stopped and counts as failed."""
        if self.sent == 0:  # never ready, or never needed: nothing to wait for
            self.close()
            return {}
        try:
            _write_all(self.proc.stdin.fileno(), _IN.pack(_END, 0, 0))
            self.proc.stdin.close()
        except OSError:
            pass
        seen, since = -1, time.monotonic()
        while self._reader.is_alive():
            self._reader.join(0.5)
            if len(self.results) != seen:
                seen, since = len(self.results), time.monotonic()
            elif time.monotonic() - since > STALL_SECONDS:
                self.close()
                break
        self.proc.wait()
        if len(self.results) != self.sent:
            raise WorkerFailed(f"the helper process answered {len(self.results)} of {self.sent} chunks")
        return self.results

    def close(self) -> None:
        """Stop the helper if still running and free the shared memory; safe to call twice."""
        if self.proc.poll() is None:
            self.proc.kill()
        for fh in (self.proc.stdin, self.proc.stdout):
            try:
                fh.close()
            except OSError:
                pass
        self.proc.wait()
        self._reader.join(timeout=5)
        if not self._shared.closed:
            self._shared.close()
            os.close(self._fd)

    def _read_results(self) -> None:
        import polars as pl

        out = self.proc.stdout
        try:
            while True:
                head = _read_exact(out, _OUT.size)
                if head is None:
                    return
                body = _read_exact(out, _OUT.unpack(head)[0])
                if body is None:
                    return
                msg = msgspec.msgpack.decode(body)
                del body
                if msg.get("ready"):
                    self.ready.set()
                    continue
                if "tables" in msg:
                    msg["tables"] = {k: pl.read_ipc(io.BytesIO(v)) for k, v in msg["tables"].items()}
                with self._lock:
                    self.results[msg["seq"]] = msg
                    self._free.append(self._slot_of.pop(msg["seq"]))
        except (OSError, ValueError, KeyError, msgspec.DecodeError):
            return
        finally:
            self.dead.set()


def _serve(path: str, keep_python: bool, fd: int, slot_bytes: int) -> None:
    """The helper's side: decode the chunks named on stdin, answer on stdout, until the end marker."""
    import mmap

    out_fd = os.dup(1)
    os.dup2(2, 1)  # anything printed by accident goes to stderr, not into the protocol
    from ..errors import TraceError
    from .events import MalformedJSON
    from .fast_scan import decode_chunk
    from .tables import Tally

    shared = mmap.mmap(fd, slot_bytes * BACKLOG)
    src = sys.stdin.buffer.raw

    def answer(msg: dict[str, Any]) -> None:
        body = msgspec.msgpack.encode(msg)
        _write_all(out_fd, _OUT.pack(len(body)))
        _write_all(out_fd, body)

    answer({"ready": True})
    while True:
        head = _read_exact(src, _IN.size)
        if head is None:
            return
        seq, slot, n = _IN.unpack(head)
        if seq == _END:
            return
        malformed: dict[str, int] = {}
        tally = Tally()
        view = memoryview(shared)[slot * slot_bytes:slot * slot_bytes + n]
        try:
            count, tables = decode_chunk(path, view, keep_python, tally, malformed)
        except MalformedJSON as exc:
            answer({"seq": seq, "error": "malformed", "message": exc.problem})
            continue
        except TraceError as exc:
            answer({"seq": seq, "error": "trace", "message": exc.problem})
            continue
        except Exception as exc:  # reported to the main process, which then loads without the helper
            answer({"seq": seq, "error": "internal", "message": f"{type(exc).__name__}: {exc}"})
            continue
        finally:
            try:
                view.release()
            except BufferError:  # an object still holds it (an error is on its way): freed with it
                pass
        ipc = {}
        for name, df in tables.items():
            buf = io.BytesIO()
            df.write_ipc(buf, compression="uncompressed")
            ipc[name] = buf.getvalue()
        del tables
        answer({"seq": seq, "n": count, "tables": ipc, "malformed": malformed, "tally": tally.to_dict()})


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), int(sys.argv[4]))
