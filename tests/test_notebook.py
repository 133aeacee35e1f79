"""The example notebook runs (issue #43 item 6): ``examples/first_analysis.ipynb`` is executed with
nbclient, as a user would run it top to bottom, and must end without an error and with its figures
drawn inline (PNG outputs)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "examples" / "first_analysis.ipynb"


def test_the_example_notebook_runs_with_its_figures(monkeypatch):
    nbformat = pytest.importorskip("nbformat", reason="the notebook test needs the [dev] extra (nbformat)")
    nbclient = pytest.importorskip("nbclient", reason="the notebook test needs the [dev] extra (nbclient)")
    pytest.importorskip("ipykernel", reason="the notebook test needs the [dev] extra (ipykernel)")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # this checkout's package in the kernel
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:  # what is checked is what this run produced
        if cell.cell_type == "code":
            cell.outputs = []
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    pngs = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(pngs) >= 2, "the breakdown bars and the timeline are drawn inline"
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert len(html) >= 3  # the report, latency and what-if views
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "ok   max-share non-GEMM" in text and "FAIL" not in text
    # the notebook unpacked check()'s result, the deprecated form: a user's first run printed the warning
    errors = "".join(o.get("text", "") for o in outputs if o.output_type == "stream" and o.get("name") == "stderr")
    assert "DeprecationWarning" not in errors, errors
