"""What the deployment stacks' profiles say about their layers and nodes, shared by the
TensorRT and ONNX Runtime loaders: the ONNX nodes a TensorRT layer fused (parsed from its
name or metadata) and the empty tables a profile without host events has.

A TensorRT layer is named after the ONNX nodes it fused: ``conv1.weight + QuantizeLinear_7 +
Conv_9``, ``PWN(Clip_16)`` (a pointwise region), ``{ForeignNode[/a/MatMul.../b/Add]}`` (a
Myelin region: its first and last node), ``/backbone/conv1/Conv`` (exported with scopes),
``(Unnamed Layer* 108) [Shuffle]`` (a layer of no node, its TensorRT type in brackets), or
``Reformatting CopyNode for Input Tensor 0 to Conv_0 + Relu_1`` (a format conversion
*before* that layer: none of its nodes). ONNX op types are CamelCase identifiers; an
initializer (``conv1.weight``) is no node.
"""

from __future__ import annotations

import re

import polars as pl

from ..schema import DType, empty

#: a node name's op type: the last scope component, without ONNX export suffixes (_7, _clone_1)
_SCOPE = re.compile(r"^.*/")
_OP_TYPE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_BRACKET_TYPE = re.compile(r"\(Unnamed Layer\* *\d+\) *\[([A-Za-z ]+)\]")
_REFORMAT = re.compile(r"^Reformatting CopyNode for ")
_TRAIN_STATION = re.compile(r"^\[trainStation\d*\]$")  # TensorRT's synchronization between engine streams
#: separators of a layer name's nodes (`` + ``, ``PWN(``, parentheses, commas); the whitespace around
#: them is stripped from the parts (``\s*\+\s*`` rescanned a run of spaces from each of its positions)
_SPLIT = re.compile(r"\+|PWN\(|[(),]")
# Layer names are matched with plain string work where a regular expression would rescan the
# rest of the name from every position (a hostile 80 KB name cost a minute):
#   {ForeignNode[a...b]} (a Myelin region), [ONNX Layer: name] in metadata, the _output/_clone/_7 suffix
_FOREIGN_OPEN, _FOREIGN_CLOSE = "{ForeignNode[", "]}"
_METADATA_OPEN = "[ONNX Layer: "


def _strip_suffix(base: str) -> str:
    r"""``base`` without ONNX export suffixes: a run of ``_7``-style groups at its end (underscores,
    then decimal digits), with ``_output`` and/or ``_clone`` before it: what
    ``(?:_output)?(?:_clone)?(?:_+\d+)+$`` removes, read from the end once (``$`` also matches
    before a final newline)."""
    if base.endswith("\n"):
        return _strip_suffix(base[:-1]) + "\n"
    start = end = len(base)
    while True:
        digits = end
        while digits > 0 and base[digits - 1].isdecimal():
            digits -= 1
        under = digits
        while under > 0 and base[under - 1] == "_":
            under -= 1
        if digits == end or under == digits:
            break
        start = end = under
    if start == len(base):
        return base
    for word in ("_clone", "_output"):
        if base.endswith(word, 0, start):
            start -= len(word)
    return base[:start]


def _foreign_regions(name: str) -> list[tuple[int, int, str]]:
    r"""``(start, end, inside)`` of each ``{ForeignNode[…]}`` in ``name``, left to right, as
    ``\{ForeignNode\[(.*?)\]\}`` finds them (the first ``]}`` after the opening, on the same line),
    in one pass: the next ``]}`` and newline are remembered, never searched for again from each opening."""
    out: list[tuple[int, int, str]] = []
    pos, close, newline = 0, -1, -1
    while True:
        at = name.find(_FOREIGN_OPEN, pos)
        if at < 0:
            return out
        inner = at + len(_FOREIGN_OPEN)
        if close < inner:
            close = name.find(_FOREIGN_CLOSE, inner)
            if close < 0:
                return out
        if newline < inner:
            newline = name.find("\n", inner)
            newline = len(name) if newline < 0 else newline
        if newline < close:  # no ``]}`` on this line: no opening before the newline closes
            pos = newline + 1
            continue
        out.append((at, close + len(_FOREIGN_CLOSE), name[inner:close]))
        pos = close + len(_FOREIGN_CLOSE)


def _metadata_nodes(metadata: str) -> list[str]:
    r"""The names in ``[ONNX Layer: name]`` of a layer's metadata (``\[ONNX Layer: ([^\]]+)\]``),
    in one pass."""
    out: list[str] = []
    pos = 0
    while True:
        at = metadata.find(_METADATA_OPEN, pos)
        if at < 0:
            return out
        inner = at + len(_METADATA_OPEN)
        close = metadata.find("]", inner)
        if close < 0:
            return out
        if close == inner:
            pos = at + 1
            continue
        out.append(metadata[inner:close])
        pos = close + 1
#: a tensor the PyTorch exporter named after the node that consumes it (``onnx::MatMul_1234``)
_CONSUMER = re.compile(r"^onnx::([A-Z][A-Za-z0-9]*)_\d+$")


def op_type(node: str) -> str | None:
    """The ONNX op type of a node name (``/backbone/conv1/Conv`` -> ``Conv``,
    ``QuantizeLinear_7`` -> ``QuantizeLinear``), or None for what is no node."""
    base = _strip_suffix(_SCOPE.sub("", node.strip()))
    return base if _OP_TYPE.match(base) else None


def layer_nodes(name: str, metadata: str | None = None) -> tuple[list[str], str | None]:
    """``(node names, bracketed layer type)`` of a TensorRT layer, from its ``Metadata`` when it
    lists ONNX layers, else from its name. A reformatting layer fused no node."""
    if metadata:
        listed = _metadata_nodes(metadata)
        if listed:
            return [n.strip() for n in listed], None
    if _REFORMAT.match(name):
        return [], "Reformat"
    if _TRAIN_STATION.match(name):
        return [], "TrainStation"
    bracket = _BRACKET_TYPE.findall(name)
    text = _BRACKET_TYPE.sub(" ", name)
    pieces, last = [], 0
    for start, end, inside in _foreign_regions(text):
        pieces += [text[last:start], " + ".join(inside.split("..."))]
        last = end
    text = "".join(pieces) + text[last:]
    nodes = [part.strip() for part in _SPLIT.split(text) if part and part.strip()]
    return nodes, (bracket[0].strip() if bracket else None)


def is_region(name: str, metadata: str | None = None) -> bool:
    """A Myelin region named by its first and last node only: what lies between is unknown."""
    return bool(_foreign_regions(name)) and not (metadata and _metadata_nodes(metadata))


def consumer_op_types(tensors: object) -> list[str]:
    """The op types a layer's input tensors name as their consumers (the PyTorch exporter calls an
    intermediate value ``onnx::<OpType>_<n>`` after the node that reads it), in order, each once:
    for a Myelin region, evidence of what runs inside it that its name does not show."""
    seen: dict[str, None] = {}
    for t in tensors if isinstance(tensors, list) else []:
        m = _CONSUMER.match(t.get("Name", "") if isinstance(t, dict) else str(t))
        if m:
            seen.setdefault(m.group(1), None)
    return list(seen)


def node_op_types(nodes: list[str]) -> list[str]:
    """The op types of ``nodes`` that are nodes, in order, each once."""
    seen: dict[str, None] = {}
    for n in nodes:
        t = op_type(n)
        if t:
            seen.setdefault(t, None)
    return list(seen)


def empty_table(table: str) -> pl.DataFrame:
    """A contract table with no rows (a profile without host ops, launch calls or stack events)."""
    return empty(table)


def activities(rows: list[dict], extra: dict[str, DType]) -> pl.DataFrame:
    """The activities table of a profile: ``rows`` of ``name, kind, cat, ts_ns, dur_ns, device``
    plus the ``extra`` columns the stack adds (``layer_type``, ``onnx_ops`` …)."""
    base: dict[str, DType] = {
        "name": pl.String, "cat": pl.String, "pid": pl.String, "tid": pl.String, "ts_ns": pl.Int64,
        "dur_ns": pl.Int64, "kind": pl.String, "external_id": pl.Int64, "correlation": pl.Int64,
        "device": pl.Int64, "stream": pl.Int64, "bytes": pl.Int64, "ev_idx": pl.Int64}
    schema = {**base, **extra}
    df = pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema, orient="row")
    return df.with_columns((pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns")).with_row_index("activity_id")
