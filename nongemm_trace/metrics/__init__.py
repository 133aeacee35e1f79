"""Measurements over classified tables: breakdowns by category, op, kernel and step."""
