"""``convert``: an Nsight Systems export written as a Kineto JSON trace (for Perfetto, HTA, or
any tool that reads torch.profiler traces)."""

from __future__ import annotations

from pathlib import Path

from ..core.safe_write import refuse_input, write_file
from ..core.trace import Trace
from ..errors import TraceError
from ..load import load_trace
from ..load.formats import FORMATS, format_of, suffix_text
from ..load.nsys import to_kineto


def convert(report: str | Path, output: str | Path) -> Trace:
    """Write the Nsight Systems export ``report`` as a Kineto JSON trace to ``output`` (gzip when it
    ends in .gz); returns the loaded trace (for its counts and anomalies)."""
    import gzip

    import msgspec

    refuse_input(output, [report])
    trace = load_trace(report)
    fmt = format_of(trace)
    if not fmt.convert:
        readable = [f for f in FORMATS if f.convert]
        suffixes = tuple(s for f in readable for s in (*f.suffixes, *f.exported_from))
        raise TraceError(report, f"is not {' or '.join('an ' + f.noun for f in readable)} (convert reads "
                                 f"{suffix_text(suffixes, ' / ')})")
    blob = msgspec.json.encode(to_kineto(trace))
    out = Path(output)
    write_file(out, gzip.compress(blob, 6) if out.name.endswith(".gz") else blob, inputs=[report])
    return trace
