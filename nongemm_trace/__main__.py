"""``python -m nongemm_trace`` runs the command line."""

from .cli import entry

entry()
