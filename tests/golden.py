"""Golden outputs: a digest of every command's output on every shared trace.

``python3 tests/golden.py record`` writes ``tests/data/golden.json`` from the code as it is;
``tests/test_golden.py`` recomputes the digests and names each (command, trace) that differs.
A change of output is then a decision (re-record in the same commit, say why), never an accident.
Only the tool's version is masked: every number, name and order is part of the digest (a Parquet
file's by its schema and rows, which its encoder's bytes are not the same across machines).
``python3 tests/golden.py add`` records only the outputs not recorded yet (a new analysis's), and
refuses to write when any recorded one differs, so adding digests can never hide a change.

Every trace gets every analysis in JSON (the TensorRT and ONNX Runtime profiles too: their
refusals are outputs as well); one trace (:data:`FORMATS_TRACE`) gets every (model, format) pair
of the command line, each table of a file format, the HTML page and the Nsight conversion, so a
renderer's byte is covered as well as an analysis's number. The analyses and pairs written out here
are the ones recorded before the analysis registry; an analysis registered since is run from its
spec (its ``example`` arguments, every format its model has), so a new one needs no edit here.
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

#: files that are not traces: TraceLens's CSVs, capture metadata, and a TensorRT profile's side files
#: (its engine graph and layer information, read with the profile next to them)
_NOT_TRACES = re.compile(r"(\.csv$|\.meta\.json$|golden\.json|\.graph\.json$|layer_info\.json$)")
_VERSION = re.compile(rb'"tool_version": ?"[^"]*"|nongemm-trace [0-9][^ <"]*')
#: the trace every (model, format) pair is rendered for (small, shipped in sample_traces/ as well)
FORMATS_TRACE = "h200/gpt2_fp32_bs8_s128__compiled.json.gz"
#: the Nsight Systems export ``convert`` writes as a Kineto trace
CONVERT_TRACE = "h200_nsys/bert_nvtx.sqlite.gz"


def shared_traces() -> list[Path]:
    files = [p for p in sorted(SHARED.rglob("*")) if p.is_file() and p.name != "README.md"]
    return [p for p in files if not _NOT_TRACES.search(p.as_posix()) and p.suffix in (".gz", ".json")]


#: the width terminal views are drawn at off a terminal (report/output.py's LOG_WIDTH): set for every
#: command, as a worker process may be handed another COLUMNS than its parent had
COLUMNS = "200"


def _cli(argv: list[str]) -> bytes:
    from nongemm_trace import cli

    os.environ["COLUMNS"] = COLUMNS
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
        "latency": _cli(["latency", t, "--format", "json"]),
        "whatif": _cli(["whatif", t, "--scale", "GEMM=0.5", "--launch-us", "2", "--format", "json"]),
        "check": _cli(["check", t, "--baseline", p, "--max-share", "non-GEMM=0.5", "--max-regression", "10%",
                       "--format", "json"]),
    }
    for spec in _registered_since():
        outs[spec.name] = _cli([spec.name, t, *spec.example, "--format", "json"])
    with tempfile.TemporaryDirectory() as tmp:
        outs["annotate"] = _written(["annotate", t], tmp, "annotated.json")
        key = trace.relative_to(SHARED).as_posix()
        if key == FORMATS_TRACE:
            outs.update(_every_format(t, p, tmp))
        if key == CONVERT_TRACE:
            outs["convert"] = _written(["convert", t], tmp, "converted.json")
    return outs


def _registered_since() -> list:
    """The registered analyses this file does not write out (those added with the registry: their
    command lines come from their specs)."""
    from nongemm_trace.analyses import specs

    return [s for s in specs() if s.model not in _MODEL_ARGV]


def _written(argv: list[str], tmp: str, name: str) -> bytes:
    """A command that writes ``-o FILE`` (or a folder): its exit line and messages, then what it wrote."""
    dest = Path(tmp) / name
    printed = _cli([*argv, "-o", str(dest)]).replace(tmp.encode(), b"TMP")
    if dest.is_dir():  # a Parquet dataset: each part's path and table, in order
        return printed + b"".join(f.relative_to(dest).as_posix().encode() + b"\n" + _content(f)
                                  for f in sorted(dest.rglob("*")) if f.is_file())
    return printed + (_content(dest) if dest.exists() else b"")


def _content(path: Path) -> bytes:
    """What a written file says: its bytes, but a Parquet file's schema and every row at full precision.
    The same table's Parquet bytes differ between machines (the encoder's pages and compression: one
    trace's five tables did between two machines with the same polars), and the writer adds nothing
    to the table (no key-value metadata), so its rows are its output."""
    data = path.read_bytes()
    if not data.startswith(b"PAR1"):
        return data
    import polars as pl

    table = pl.read_parquet(path)
    return repr(table.schema).encode() + b"\n" + table.write_csv().encode()


#: a command line that renders each model (the format appended); the tables its file formats write
_MODEL_ARGV = {
    "report": (["analyze", "{t}"], ("categories", "ops", "kernels", "phases")),
    "batch": (["analyze", "{t}", "{p}", "--workers", "1"], ()),
    "comparison": (["compare", "{t}", "{p}"], ()),
    "launch": (["launch", "{t}"], ("streams", "steps", "devices", "categories", "activities")),
    "flops": (["flops", "{t}"], ("ops", "categories", "calls")),
    "latency": (["latency", "{t}"], ()),
    "whatif": (["whatif", "{t}", "--scale", "GEMM=0.5", "--graphs"], ()),
    "check": (["check", "{t}", "--max-share", "non-GEMM=0.3"], ()),
    "explain": (["explain", "{t}", "aten::addmm"], ()),
    "weak": (["explain", "{t}", "--weak"], ()),
}
#: every (model, format) pair of the command line, written out here (not read from the code under test)
_PAIRS = {
    "report": ("table", "json", "csv", "parquet", "markdown"), "batch": ("table", "json", "csv", "parquet", "markdown"),
    "comparison": ("table", "json", "markdown"), "launch": ("table", "json", "csv"), "flops": ("table", "json", "csv"),
    "latency": ("table", "json", "csv"), "whatif": ("table", "json", "csv"), "check": ("table", "json", "text"),
    "explain": ("table", "json", "text"), "weak": ("table", "json"),
}


def _every_format(t: str, p: str, tmp: str) -> dict[str, bytes]:
    """Every (model, format) pair on one trace: ``model.format`` (``model.format.table`` per table)."""
    outs = {}
    for model, fmts in _PAIRS.items():
        argv, tables = _MODEL_ARGV[model]
        argv = [a.format(t=t, p=p) for a in argv]
        for fmt in fmts:
            for table in (tables or (None,)) if fmt in ("csv", "parquet") else (None,):
                name = ".".join(x for x in (model, fmt, table) if x)
                extra = ["--format", fmt] + (["--table", table] if table else [])
                if model in ("check", "explain", "weak"):  # printed, no -o
                    outs[name] = _cli(argv + extra)
                else:
                    outs[name] = _written(argv + extra, tmp, name)
    outs.update(_every_format_registered_since(t, tmp))
    outs["page"] = _written(["report", t, p], tmp, "page.html")
    return outs


def _every_format_registered_since(t: str, tmp: str) -> dict[str, bytes]:
    """Every format of each analysis registered since (:func:`_registered_since`), as its spec runs it."""
    from nongemm_trace.report import formats
    from nongemm_trace.vocabulary import MODEL_TABLES

    outs = {}
    for spec in _registered_since():
        for fmt in formats(spec.model):
            tables = MODEL_TABLES.get(spec.model, ()) if fmt in ("csv", "parquet") else ()
            for table in tables or (None,):
                name = ".".join(x for x in (spec.model, fmt, table) if x)
                outs[name] = _written([spec.name, t, *spec.example, "--format", fmt,
                                       *(["--table", table] if table else [])], tmp, name)
    return outs


@contextlib.contextmanager
def one_load_per_trace():
    """``Analysis.of`` memoised by (path, taxonomy) while inside: the commands of a trace (and the
    next trace, its compare partner) share one load, as a pipeline holding an analysis does."""
    import dataclasses

    import nongemm_trace.pipeline.analysis as analysis_mod
    from nongemm_trace.pipeline.options import AnalysisOptions

    kept: dict[tuple[str, str], analysis_mod.Analysis] = {}
    real = analysis_mod.Analysis.of

    def of(cls, source, options=None, *, progress=None, **old):
        if isinstance(source, analysis_mod.Analysis) or progress is not None or old:
            return real.__func__(cls, source, options, progress=progress, **old)
        key = (str(source), str((options.taxonomy if options is not None else None) or "default"))
        if key not in kept:
            while len(kept) >= 3:
                kept.pop(next(iter(kept)))
            kept[key] = real.__func__(cls, source, dataclasses.replace(options or AnalysisOptions(), keep_python=True))
        return real.__func__(cls, kept[key], options)

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


def added(recorded: dict[str, dict[str, str]], computed: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """``recorded`` with the outputs of ``computed`` it lacks; refused (ValueError naming them) when a
    recorded output's digest differs or a recorded trace or output is no longer computed."""
    changed = sorted(f"{trace}: {cmd}" for trace, outs in recorded.items() for cmd, d in outs.items()
                     if computed.get(trace, {}).get(cmd) != d)
    if changed:
        raise ValueError("recorded outputs differ (a change of output is re-recorded, not added): "
                         + ", ".join(changed))
    return {trace: {**outs, **recorded.get(trace, {})} for trace, outs in computed.items()}


if __name__ == "__main__":
    if sys.argv[1:] not in (["record"], ["add"]):
        sys.exit("usage: python3 tests/golden.py record|add")
    # a script's path starts at tests/: without the tree first, an installed nongemm_trace would be recorded
    sys.path.insert(0, str(ROOT))
    if sys.argv[1] == "add":  # as tests/test_golden.py computes them: two processes, one load per trace
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        n = len(shared_traces())
        got = {}
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
            for part in pool.map(digests, [list(range(0, n, 2)), list(range(1, n, 2))], [True, True]):
                got.update(part)
        got = added(json.loads(GOLDEN.read_text()), got)
    else:
        got = digests()
    GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
