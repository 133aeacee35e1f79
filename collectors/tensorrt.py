"""Build and profile a TensorRT engine with ``trtexec``, exporting what nongemm-trace reads.

    python -m nongemm_trace.collectors.tensorrt model.onnx -o out/ --name resnet50_trt [--fp16|--int8] [-- EXTRA…]

Runs ``trtexec --onnx=MODEL --profilingVerbosity=detailed --dumpProfile --separateProfileRun
--exportProfile=NAME.profile.json --exportLayerInfo=NAME.layer_info.json`` (plus the precision
flags and anything after ``--``), so the profile and its layer information lie next to each
other by name, then writes ``NAME.nongemm.json`` (the ``analyze`` report). ``trtexec`` is taken
from ``--trtexec``, ``$TRTEXEC`` or PATH; without one, one clear line and exit code 2.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path


def find_trtexec(explicit: str | None = None) -> str | None:
    for cand in (explicit, os.environ.get("TRTEXEC"), shutil.which("trtexec")):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    return None


def command(trtexec: str, model: str, out_dir: Path, name: str, precision: list[str], extra: list[str]) -> list[str]:
    """The trtexec command line that writes ``NAME.profile.json`` and ``NAME.layer_info.json``."""
    return [trtexec, f"--onnx={model}", "--profilingVerbosity=detailed", "--dumpProfile", "--separateProfileRun",
            f"--exportProfile={out_dir / (name + '.profile.json')}",
            f"--exportLayerInfo={out_dir / (name + '.layer_info.json')}", *precision, *extra]


def profile_engine(model: str | os.PathLike, out_dir: str | os.PathLike, name: str, *,
                   precision: list[str] | None = None,
                   extra: list[str] | None = None, trtexec: str | None = None, summary: bool = True) -> Path:
    """Run trtexec on ``model``; return the profile's path. Raises ``FileNotFoundError`` without trtexec."""
    exe = find_trtexec(trtexec)
    if exe is None:
        raise FileNotFoundError("trtexec not found (give --trtexec PATH, set TRTEXEC, or put it on PATH; it ships "
                                "with TensorRT: bin/trtexec)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cmd = command(exe, str(model), out, name, precision or [], extra or [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    (out / f"{name}.trtexec.log").write_text(r.stdout + r.stderr)
    profile = out / f"{name}.profile.json"
    if r.returncode != 0 or not profile.exists():
        last = (r.stderr or r.stdout or "no output").strip().splitlines()[-1:]
        raise RuntimeError(f"trtexec failed (exit {r.returncode}): {last[0] if last else ''}; log in "
                           f"{out / (name + '.trtexec.log')}")
    if summary:
        try:
            from nongemm_trace import analyze
            from nongemm_trace.report.json_out import render_json
        except ImportError as exc:  # pragma: no cover
            print(f"collectors: no summary for {profile} (nongemm-trace not importable: {exc})", file=sys.stderr)
        else:
            (out / f"{name}.nongemm.json").write_text(render_json(analyze(profile)))
    return profile


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(prog="python -m nongemm_trace.collectors.tensorrt",
                                 description="Build and profile a TensorRT engine from an ONNX model with trtexec.")
    ap.add_argument("model", help="the .onnx file")
    ap.add_argument("-o", "--out", default=".", help="output folder")
    ap.add_argument("--name", help="output name (default: the model's stem)")
    ap.add_argument("--fp16", action="store_true", help="allow FP16 tactics")
    ap.add_argument("--int8", action="store_true", help="allow INT8 tactics (a QAT model's Q/DQ nodes)")
    ap.add_argument("--trtexec", help="the trtexec binary (default: $TRTEXEC, then PATH)")
    args = ap.parse_args(argv)
    precision = [f for f, on in (("--fp16", args.fp16), ("--int8", args.int8)) if on]
    try:
        path = profile_engine(args.model, args.out, args.name or Path(args.model).stem, precision=precision,
                              extra=extra, trtexec=args.trtexec)
    except (FileNotFoundError, RuntimeError) as exc:
        print(f"collectors: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
