"""Renderers: a :class:`Report` to a terminal table, JSON, CSV or Parquet. They never compute."""

from .model import SCHEMA_VERSION, Report

__all__ = ["Report", "SCHEMA_VERSION"]
