"""``annotate``: the trace itself, with ``args.nongemm_category`` / ``args.nongemm_class`` on every
op and GPU activity, to open in Perfetto or chrome://tracing.

The output is the input document with only those args added (and
``nongemm_wrapper`` on ranges that are not operators); every other key and
event is kept as it was read.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import msgspec

from ..classify.ladder import call_category
from ..classify.taxonomy import Taxonomy
from ..core.safe_write import refuse_input, write_file
from ..errors import TraceError
from ..load.bom import without_bom
from ..load.formats import FORMATS, Format, format_of
from ..load.source import read_bytes
from ..models.verdicts import Annotated
from ..pipeline.analysis import Analysis, needs_python
from ..pipeline.options import AnalysisOptions


def annotate(source: str | Path | Analysis, output: str | Path, *, taxonomy: str | Path | Taxonomy | None = None,
             level: str | None = None) -> Annotated:
    """Write the annotated trace of ``source`` (a path or an :class:`Analysis`) to ``output`` (gzip when it
    ends in .gz); returns what it wrote (:class:`~nongemm_trace.models.verdicts.Annotated`: the counts)."""
    analysis = Analysis.of(source, AnalysisOptions(taxonomy=taxonomy))
    tax, path = analysis.taxonomy, analysis.path
    refuse_input(output, [path])  # before the work, not only at the write
    level = level or tax.default_level
    trace = analysis.trace(python=needs_python(level))
    fmt = format_of(trace)
    if not fmt.annotate:
        raise TraceError(path, _cannot_annotate(fmt))
    linked = analysis.linked()
    acts = analysis.activities(level)
    data = without_bom(read_bytes(path))
    try:
        doc = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError):
        import json  # the loader repaired this file (NaN literals, bad UTF-8): repeat its repair
        try:
            doc = json.loads(data.decode("utf-8", "replace"))
        except (ValueError, RecursionError) as exc:
            raise TraceError(path, f"cannot re-read the trace to annotate it ({exc})") from None
    events = doc["traceEvents"] if isinstance(doc, dict) else doc

    # an op's category is the launch level's for the call (its dataflow, backward node, enclosing op)
    op_cat = linked.ops.select(
        "ev_idx", "is_wrapper",
        call_category(tax.semantics.generic_categories).fill_null("unclassified").alias("category"))
    n_ops = n_acts = 0
    for idx, wrapper, cat in op_cat.iter_rows():
        args = _args(events[idx])
        args["nongemm_category"] = cat
        args["nongemm_class"] = tax.class_of(cat)
        if wrapper:
            args["nongemm_wrapper"] = True
        n_ops += 1
    for idx, cat, cls, op in acts.select("ev_idx", "category", "class", "op").iter_rows():
        args = _args(events[idx])
        args["nongemm_category"] = cat
        args["nongemm_class"] = cls
        args["nongemm_level"] = level
        if op is not None:
            args["nongemm_op"] = op
        n_acts += 1
    out = Path(output)
    blob = msgspec.json.encode(doc)
    write_file(out, gzip.compress(blob, 6) if out.name.endswith(".gz") else blob, inputs=[path])
    return Annotated(str(output), n_ops, n_acts)


def _cannot_annotate(fmt: Format) -> str:
    """Why a trace in ``fmt`` is not annotated, and what to do: its registry entry says whether
    ``convert`` writes it in a format that is annotated."""
    into = " or ".join(f.noun for f in FORMATS if f.annotate)
    if fmt.convert:
        return (f"annotate writes a {into}: convert this {fmt.noun} first "
                "(nongemm-trace convert REPORT -o TRACE.json.gz) and annotate that")
    return (f"annotate writes a {into}: a {fmt.noun} cannot be annotated (its categories are in "
            "'nongemm-trace analyze'; annotate the torch.profiler trace of the run instead)")


def _args(ev: dict) -> dict:
    a = ev.get("args")
    if not isinstance(a, dict):
        a = {}
        ev["args"] = a
    return a
