"""Single source of the package version (read by pyproject and the JSON output)."""

__version__ = "0.1.0"
