"""The contract between the loaders and every later stage: the trace tables' columns.

Every loader (Kineto's Python and C paths, Nsight Systems, and any format added to the
registry) produces these columns with these types; later stages read nothing else of
the file. A format's own extra columns are declared here too (:data:`EXTRA_COLUMNS`), and its
registry entry (:mod:`.load.formats`) carries them.
:func:`validate` checks a loaded trace against the declaration and the invariants the
linker relies on; every loader's tests call it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

import polars as pl

if TYPE_CHECKING:  # pragma: no cover
    from polars.datatypes import DataTypeClass

    from .core.trace import Trace

#: a column type as polars' signatures take it: a class (``pl.Int64``) or an instance (``pl.List(pl.String)``)
DType: TypeAlias = "DataTypeClass | pl.DataType"

#: a text column: plain, or categorical where values repeat (the Kineto loader gives every text
#: column of its tables so; other loaders give text). Code over them reads both: ``.cast(pl.String)``
#: before ``.str`` on a few rows, ``frames.starts_with`` / ``frames.per_value`` on a whole column,
#: ``frames.as_text`` before a join with or a concatenation to a text column of elsewhere
TEXT = (pl.String, pl.Categorical)

#: id columns a loader may give as Int32 where every value of the trace fits 32 bits (the Kineto loader
#: does, for the ops, launches, activities and python tables: a dense trace's rows are mostly ids);
#: they are keys of joins and lookups, never summed. Code that builds a frame to join or concatenate
#: with them takes the table's dtype, not Int64
NARROW = ("ev_idx", "external_id", "correlation")
ID = (pl.Int64, pl.Int32)

_EVENT: dict[str, DType | tuple[DType, ...]] = {
    "name": TEXT, "cat": TEXT, "pid": TEXT, "tid": TEXT,
    "ts_ns": pl.Int64, "dur_ns": pl.Int64, "end_ns": pl.Int64, "external_id": ID,
    "ev_idx": ID,  # the event's index in the file (null where the format has none)
}

#: table -> column -> dtype (or a tuple of accepted dtypes)
TABLES: dict[str, dict[str, DType | tuple[DType, ...]]] = {
    # host ranges that can launch work (cpu_op, user_annotation, NVTX ranges)
    # seq: autograd's ``Sequence number`` (a forward op and its backward node share it; null: none)
    "ops": {"op_id": pl.UInt32, **_EVENT, "input_dims": TEXT, "input_type": TEXT,
            "concrete_inputs": TEXT, "seq": pl.Int64},
    # host launch calls; graph_launch: the call replays a CUDA/HIP graph (one call, many activities);
    # captured: a launch recorded into a graph while its thread was capturing, not run (load/graph_capture.py)
    "launches": {"launch_id": pl.UInt32, **_EVENT, "correlation": ID, "graph_launch": pl.Boolean,
                 "captured": pl.Boolean},
    # device activities: kernels, memcpys, memsets
    "activities": {"activity_id": pl.UInt32, **_EVENT, "kind": TEXT, "correlation": ID,
                   "device": pl.Int64, "stream": pl.Int64, "bytes": pl.Int64},
    # python_function events, when the loader was asked to keep them (else empty)
    "python": {"op_id": pl.UInt32, **_EVENT},
    # CUDA synchronization records (Kineto's cuda_sync events, else empty): the synchronizing call
    # (correlation), kind ("Stream Wait Event", "Event Sync", "Stream Sync", "Context Sync"), the
    # stream it synchronizes (-1: none), and for the event kinds the stream the awaited event was
    # recorded on and that cudaEventRecord call's correlation
    "cuda_syncs": {"sync_id": pl.UInt32, **_EVENT, "kind": TEXT, "correlation": ID,
                   "device": pl.Int64, "stream": pl.Int64, "wait_on_stream": pl.Int64,
                   "wait_on_cuda_event_record_corr_id": pl.Int64},
}

#: format name -> table -> the columns its loader adds beyond :data:`TABLES` (in this order)
EXTRA_COLUMNS: dict[str, dict[str, dict[str, DType]]] = {
    # Nsight Systems: a kernel's short (demangled base) name
    "nsys": {"activities": {"short_name": pl.String}},
    # TensorRT: the layer's median, type, origin, the ONNX op types and nodes it ran, its tactic
    "tensorrt": {"activities": {"median_ns": pl.Int64, "layer_type": pl.String, "origin": pl.String,
                                "onnx_ops": pl.String, "input_ops": pl.String, "onnx_nodes": pl.String,
                                "tactic": pl.String, "origin_nodes": pl.String}},
    # ONNX Runtime: the node's op type, its name, its execution provider
    "onnxruntime": {"activities": {"onnx_ops": pl.String, "onnx_nodes": pl.String, "provider": pl.String}},
}

#: each table's id column: unique, the row number where the loader can make it so
IDS = {"ops": "op_id", "launches": "launch_id", "activities": "activity_id", "python": "op_id",
       "cuda_syncs": "sync_id"}


def empty(table: str) -> pl.DataFrame:
    """A contract table with no rows."""
    return pl.DataFrame(schema={c: (t[0] if isinstance(t, tuple) else t) for c, t in TABLES[table].items()})


class SchemaError(AssertionError):
    """A loader broke the contract: a bug in the loader, never bad input."""


def problems(trace: Trace) -> list[str]:
    """Every way ``trace`` departs from the contract (empty when it holds)."""
    out = []
    for table, columns in TABLES.items():
        df = getattr(trace, table, None)
        if not isinstance(df, pl.DataFrame):
            out.append(f"{table}: not a polars DataFrame")
            continue
        for col, want in columns.items():
            if col not in df.columns:
                out.append(f"{table}.{col}: missing")
                continue
            accepted = want if isinstance(want, tuple) else (want,)
            got = df.schema[col]
            if not any(got == a for a in accepted):  # a dtype equals its class, whatever its parameters
                out.append(f"{table}.{col}: {got}, not {' or '.join(str(a) for a in accepted)}")
        if any(p.startswith(f"{table}.") for p in out) or df.height == 0:
            continue
        key = IDS[table]
        if df[key].null_count() or df[key].n_unique() != df.height:
            out.append(f"{table}.{key}: not unique and non-null")
        bad = df.filter(pl.col("dur_ns") < 0).height
        if bad:
            out.append(f"{table}: {bad} rows with a negative dur_ns")
        if df.filter(pl.col("ts_ns").is_null() | pl.col("dur_ns").is_null()).height:
            out.append(f"{table}: rows without ts_ns or dur_ns")
        if df.filter(pl.col("end_ns") != pl.col("ts_ns") + pl.col("dur_ns")).height:
            out.append(f"{table}: end_ns is not ts_ns + dur_ns")
    if not isinstance(trace.metadata, dict):
        out.append("metadata: not a dict")
    return out


def validate(trace: Trace) -> Trace:
    """``trace`` itself when it holds the contract; else :class:`SchemaError` listing every problem."""
    found = problems(trace)
    if found:
        raise SchemaError(f"{trace.path} ({trace.source_format}): " + "; ".join(found))
    return trace
