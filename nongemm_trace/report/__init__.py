"""Renderers, one module per format: ``terminal/`` (rich tables, one module per result model),
``json_out`` (any model's JSON document), ``markdown``, ``files`` (CSV and Parquet) and
``figures`` (matplotlib); ``palette`` holds their colours and ``output`` where a rendering goes.
They read the result models (:mod:`nongemm_trace.models`) and never compute.

``Report`` is importable from here as it always was (its home is :mod:`nongemm_trace.models`).
"""

from ..models.report import Report
from ..vocabulary import SCHEMA_VERSION

__all__ = ["Report", "SCHEMA_VERSION"]
