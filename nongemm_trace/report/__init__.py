"""Renderers: a :class:`Report` to a terminal table, JSON, CSV or Parquet. They never compute."""

from ..models.report import Report
from ..vocabulary import SCHEMA_VERSION

__all__ = ["Report", "SCHEMA_VERSION"]
