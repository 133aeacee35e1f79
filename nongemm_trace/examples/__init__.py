"""A real trace shipped with the package, so ``nongemm-trace analyze --example`` works from a plain
``pip install``: BERT-base forward (fp32, batch 8, 128 tokens, eager, 2 steps) on an NVIDIA H200,
captured by the nongemm-trace developers (sample_traces/README.md)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

EXAMPLE = "bert_base_fp32_bs8_s128__eager.json.gz"


def example_trace() -> Path:
    """The path of the example trace inside the installed package."""
    return Path(str(resources.files(__package__) / EXAMPLE))
