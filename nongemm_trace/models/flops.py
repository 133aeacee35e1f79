"""The :class:`FlopsReport`: FLOPs, bytes and the roofline per op of one trace (built by
:func:`nongemm_trace.flops.flops_analysis`), with its JSON contract both ways."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import polars as pl

from .._version import __version__
from ..core.trace import Anomaly
from ..devices import DeviceSpec
from ..vocabulary import MODEL_TABLES, SCHEMA_VERSION
from .rows import frame, warnings_of
from .short_repr import short_repr

_S, _I, _F = pl.Utf8, pl.Int64, pl.Float64
_OPS = {"op": ("op", _S), "category": ("category", _S), "calls": ("calls", _I), "flops": ("flops", _I),
        "bytes": ("bytes", _I), "time_ns": ("self_gpu_time_us", _I), "achieved_tflops": ("achieved_tflops", _F),
        "achieved_tbps": ("achieved_tbps", _F), "arithmetic_intensity": ("arithmetic_intensity", _F),
        "precision": ("precision", _S), "bound": ("bound", _S), "roofline_pct": ("roofline_pct", _F),
        "formula": ("formula", _S)}
_CATEGORIES = {"category": ("category", _S), "class": ("class", _S), "flops": ("flops", _I), "bytes": ("bytes", _I),
               "time_ns": ("gpu_time_us", _I), "achieved_tflops": ("achieved_tflops", _F),
               "achieved_tbps": ("achieved_tbps", _F)}
_CLASSES = {"class": ("class", _S), "flops": ("flops", _I), "flop_share": ("flop_share", _F),
            "time_ns": ("gpu_time_us", _I), "time_share": ("time_share", _F)}
_NO_FORMULA = {"op": ("op", _S), "calls": ("calls", _I), "time_ns": ("gpu_time_us", _I)}


@dataclass(repr=False)
class FlopsReport:
    __repr__ = short_repr  # one line, tables as sizes (models/short_repr.py)
    #: the model's name: its renderers' key (nongemm_trace.report) and its analysis's
    NAME: ClassVar[str] = "flops"

    #: the tables ``--table`` picks for csv / parquet (the default first)
    TABLES: ClassVar[tuple[str, ...]] = MODEL_TABLES["flops"]

    trace: str
    device: DeviceSpec | None
    ops: pl.DataFrame
    categories: pl.DataFrame
    classes: pl.DataFrame
    calls: pl.DataFrame
    no_formula: pl.DataFrame
    fits: dict[str, Any]
    equal_flops: list[dict[str, Any]]
    warnings: list[Anomaly] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        def r(v, nd=6):
            return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else round(v, nd)
        ops = [{"op": o["op"], "category": o["category"], "calls": int(o["calls"]), "flops": int(o["flops"]),
                "bytes": int(o["bytes"]), "self_gpu_time_us": round(o["time_ns"] / 1000, 3),
                "achieved_tflops": r(o["achieved_tflops"], 4), "achieved_tbps": r(o["achieved_tbps"], 4),
                "arithmetic_intensity": r(o["arithmetic_intensity"], 3), "precision": o["precision"],
                "bound": o["bound"], "roofline_pct": r(o["roofline_pct"], 2), "formula": o["formula"]}
               for o in self.ops.iter_rows(named=True)]
        cats = [{"category": c["category"], "class": c["class"], "flops": int(c["flops"]), "bytes": int(c["bytes"]),
                 "gpu_time_us": round(c["time_ns"] / 1000, 3), "achieved_tflops": r(c["achieved_tflops"], 4),
                 "achieved_tbps": r(c["achieved_tbps"], 4)} for c in self.categories.iter_rows(named=True)]
        classes = [{"class": c["class"], "flops": int(c["flops"]), "flop_share": r(c["flop_share"]),
                    "gpu_time_us": round(c["time_ns"] / 1000, 3), "time_share": r(c["time_share"])}
                   for c in self.classes.iter_rows(named=True)]
        return {"schema_version": SCHEMA_VERSION, "tool_version": __version__, "trace": self.trace,
                "device": self.device.as_dict() if self.device else None, "classes": classes,
                "categories": cats, "ops": ops, "fits": self.fits, "equal_flops": self.equal_flops,
                "no_formula": [{"op": n["op"], "calls": int(n["calls"]), "gpu_time_us": round(n["time_ns"] / 1000, 3)}
                               for n in self.no_formula.iter_rows(named=True)],
                "warnings": [w.as_dict() for w in self.warnings]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FlopsReport:
        """A FLOPs report from its JSON document (``flops --format json``); the per-call table
        is not in the document."""
        return cls(d["trace"], DeviceSpec(**d["device"]) if d["device"] else None, frame(d["ops"], _OPS),
                   frame(d["categories"], _CATEGORIES), frame(d["classes"], _CLASSES), pl.DataFrame(),
                   frame(d["no_formula"], _NO_FORMULA), d["fits"], d["equal_flops"], warnings_of(d))
