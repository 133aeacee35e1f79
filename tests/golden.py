"""Golden outputs: a digest of every command's output on every shared trace.

``python3 tests/golden.py record`` writes ``tests/data/golden.json`` from the code as it is;
``tests/test_golden.py`` recomputes the digests and names each (command, trace) that differs.
A change of output is then a decision (re-record in the same commit, say why), never an accident.
Only the tool's version is masked: every number, name and order is part of the digest.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: no progress lines in a digest (a slow command off a terminal prints them every few seconds)
os.environ["NONGEMM_PROGRESS_S"] = "inf"
SHARED = Path(os.environ.get("NONGEMM_SHARED_TRACES", ROOT.parent / "shared" / "traces")).absolute()
#: outputs name the traces by their path from here (``shared/traces/…``): the same wherever the folder lies
BASE = SHARED.parent.parent
GOLDEN = ROOT / "tests" / "data" / "golden.json"


def layout_ok() -> bool:
    """The digests were recorded with paths ``shared/traces/…``: the folder must be named so."""
    return SHARED.parts[-2:] == ("shared", "traces")

#: formats outside the two we read (their profiles are read by later work, not frozen here)
_NOT_TRACES = re.compile(r"(\.csv$|\.meta\.json$|golden\.json|/tensorrt/|/onnxruntime/)")
_VERSION = re.compile(rb'"tool_version": ?"[^"]*"')


def shared_traces() -> list[Path]:
    files = [p for p in sorted(SHARED.rglob("*")) if p.is_file() and p.name != "README.md"]
    return [p for p in files if not _NOT_TRACES.search(p.as_posix()) and p.suffix in (".gz", ".json")]


def _cli(argv: list[str]) -> bytes:
    from nongemm_trace import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    return f"rc={rc}\n".encode() + out.getvalue().encode() + b"\n--stderr--\n" + err.getvalue().encode()


def _digest(data: bytes) -> str:
    return hashlib.sha256(_VERSION.sub(b'"tool_version": ""', data)).hexdigest()[:20]


def commands(trace: Path, partner: Path) -> dict[str, bytes]:
    """Every command's output on one trace (``compare`` against the next trace in the list)."""
    t = str(trace.relative_to(BASE))
    p = str(partner.relative_to(BASE))
    outs = {
        "analyze": _cli(["analyze", t, "--format", "json"]),
        "launch": _cli(["launch", t, "--format", "json"]),
        "flops": _cli(["flops", t, "--format", "json"]),
        "explain": _cli(["explain", t, "--weak", "--format", "json"]),
        "explain_name": _cli(["explain", t, "aten::add", "--format", "json"]),
        "compare": _cli(["compare", t, p, "--format", "json"]),
    }
    with tempfile.TemporaryDirectory() as tmp:
        dest = Path(tmp) / "annotated.json"
        rc = _cli(["annotate", t, "-o", str(dest)]).replace(tmp.encode(), b"TMP")
        body = dest.read_bytes() if dest.exists() else b""
        outs["annotate"] = rc + body
    return outs


@contextlib.contextmanager
def one_load_per_trace():
    """``Analysis.of`` memoised by (path, taxonomy) while inside: the commands of a trace (and the
    next trace, its compare partner) share one load, as a pipeline holding an analysis does."""
    import nongemm_trace.pipeline.analysis as analysis_mod

    kept: dict[tuple[str, str], analysis_mod.Analysis] = {}
    real = analysis_mod.Analysis.of

    def of(cls, source, **options):
        if isinstance(source, analysis_mod.Analysis) or options.get("progress"):
            return real.__func__(cls, source, **options)
        key = (str(source), str(options.get("taxonomy") or "default"))
        if key not in kept:
            while len(kept) >= 3:
                kept.pop(next(iter(kept)))
            kept[key] = real.__func__(cls, source, **{**options, "keep_python": True})
        return real.__func__(cls, kept[key], **options)

    analysis_mod.Analysis.of = classmethod(of)
    try:
        yield
    finally:
        analysis_mod.Analysis.of = real


def digests(indices: list[int] | None = None, shared_loads: bool = False) -> dict[str, dict[str, str]]:
    """The digests of the traces at ``indices`` (default: all), computed from the repository's parent
    folder (relative paths in the outputs: the same on every machine)."""
    here = os.getcwd()
    os.chdir(BASE)
    try:
        traces = shared_traces()
        result = {}
        with one_load_per_trace() if shared_loads else contextlib.nullcontext():
            for i in range(len(traces)) if indices is None else indices:
                trace, partner = traces[i], traces[(i + 1) % len(traces)]
                key = trace.relative_to(SHARED).as_posix()
                result[key] = {name: _digest(data) for name, data in commands(trace, partner).items()}
        return result
    finally:
        os.chdir(here)


if __name__ == "__main__":
    if sys.argv[1:] != ["record"]:
        sys.exit("usage: python3 tests/golden.py record")
    # a script's path starts at tests/: without the tree first, an installed nongemm_trace would be recorded
    sys.path.insert(0, str(ROOT))
    GOLDEN.write_text(json.dumps(digests(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
