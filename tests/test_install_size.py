"""The base install's weight (issue #43 item 8): the packages ``pip install nongemm-trace`` brings, summed
from their installed files (offline: ``importlib.metadata`` of this environment), under a budget.
pyarrow (170 MB) left the base install: only ``Report.to_pandas()`` needs it (the ``[pandas]`` extra)."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest

#: the base install's budget in MB (docs/benchmarks.md, "Install size": 376 MB measured with polars 2.1,
#: matplotlib 3 and numpy 2 on CPython 3.11, where pyarrow had added 176 MB)
BUDGET_MB = 420

ROOT = Path(__file__).resolve().parent.parent


def _base_requirements() -> list[str]:
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(r"^dependencies = \[(.*?)\]", text, re.S | re.M)
    assert block is not None
    return re.findall(r'"([^"]+)"', block.group(1))


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _closure(requirements: list[str]) -> set[str]:
    """The distributions the requirements pull in, transitively (extras and other Pythons left out)."""
    seen: set[str] = set()
    todo = [r for r in requirements if "python_version <" not in r]
    while todo:
        name = _name(todo.pop())
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        todo += [r for r in dist.requires or [] if "extra ==" not in r]
    return seen


def _installed_bytes(name: str) -> int:
    dist = metadata.distribution(name)
    total = 0
    for f in dist.files or []:
        p = Path(str(dist.locate_file(f)))
        if p.is_file():
            total += p.stat().st_size
    return total


def test_pyarrow_is_not_a_base_requirement():
    assert "pyarrow" not in {_name(r) for r in _base_requirements()}
    pandas_extra = re.search(r"^pandas = \[(.*?)\]", (ROOT / "pyproject.toml").read_text(), re.M)
    assert pandas_extra is not None and "pyarrow" in pandas_extra.group(1)


def test_the_base_install_stays_under_its_budget():
    dists = _closure(_base_requirements())
    if not {"polars", "matplotlib"} <= dists:
        pytest.skip("the base requirements are not installed in this environment")
    mb = sum(_installed_bytes(d) for d in dists) / 1e6
    assert "pyarrow" not in dists
    assert mb < BUDGET_MB, f"the base install is {mb:.0f} MB, over its budget of {BUDGET_MB} MB: {sorted(dists)}"
