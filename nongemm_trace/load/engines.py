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

from ..schema import empty

#: a node name's op type: the last scope component, without ONNX export suffixes (_7, _clone_1)
_SCOPE = re.compile(r"^.*/")
_SUFFIX = re.compile(r"(?:_output)?(?:_clone)?(?:_+\d+)+$")
_OP_TYPE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_FOREIGN = re.compile(r"\{ForeignNode\[(.*?)\]\}")
_BRACKET_TYPE = re.compile(r"\(Unnamed Layer\* *\d+\) *\[([A-Za-z ]+)\]")
_METADATA_NODE = re.compile(r"\[ONNX Layer: ([^\]]+)\]")
_REFORMAT = re.compile(r"^Reformatting CopyNode for ")
_TRAIN_STATION = re.compile(r"^\[trainStation\d*\]$")  # TensorRT's synchronization between engine streams
_SPLIT = re.compile(r"\s*\+\s*|PWN\(|[(),]")
#: a tensor the PyTorch exporter named after the node that consumes it (``onnx::MatMul_1234``)
_CONSUMER = re.compile(r"^onnx::([A-Z][A-Za-z0-9]*)_\d+$")


def op_type(node: str) -> str | None:
    """The ONNX op type of a node name (``/backbone/conv1/Conv`` -> ``Conv``,
    ``QuantizeLinear_7`` -> ``QuantizeLinear``), or None for what is no node."""
    base = _SUFFIX.sub("", _SCOPE.sub("", node.strip()))
    return base if _OP_TYPE.match(base) else None


def layer_nodes(name: str, metadata: str | None = None) -> tuple[list[str], str | None]:
    """``(node names, bracketed layer type)`` of a TensorRT layer, from its ``Metadata`` when it
    lists ONNX layers, else from its name. A reformatting layer fused no node."""
    if metadata:
        listed = _METADATA_NODE.findall(metadata)
        if listed:
            return [n.strip() for n in listed], None
    if _REFORMAT.match(name):
        return [], "Reformat"
    if _TRAIN_STATION.match(name):
        return [], "TrainStation"
    bracket = _BRACKET_TYPE.findall(name)
    text = _FOREIGN.sub(lambda m: " + ".join(m.group(1).split("...")), _BRACKET_TYPE.sub(" ", name))
    nodes = [part.strip() for part in _SPLIT.split(text) if part and part.strip()]
    return nodes, (bracket[0].strip() if bracket else None)


def is_region(name: str, metadata: str | None = None) -> bool:
    """A Myelin region named by its first and last node only: what lies between is unknown."""
    return bool(_FOREIGN.search(name)) and not (metadata and _METADATA_NODE.search(metadata))


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


def activities(rows: list[dict], extra: dict[str, pl.DataType]) -> pl.DataFrame:
    """The activities table of a profile: ``rows`` of ``name, kind, cat, ts_ns, dur_ns, device``
    plus the ``extra`` columns the stack adds (``layer_type``, ``onnx_ops`` …)."""
    base = {"name": pl.String, "cat": pl.String, "pid": pl.String, "tid": pl.String, "ts_ns": pl.Int64,
            "dur_ns": pl.Int64, "kind": pl.String, "external_id": pl.Int64, "correlation": pl.Int64,
            "device": pl.Int64, "stream": pl.Int64, "bytes": pl.Int64, "ev_idx": pl.Int64}
    schema = {**base, **extra}
    df = pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema, orient="row")
    return df.with_columns((pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns")).with_row_index("activity_id")
