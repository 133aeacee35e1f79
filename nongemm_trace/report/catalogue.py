"""Every renderer of the shipped models, registered by (model, format) in :mod:`.registry`'s table.

Each entry imports its renderer module when it runs, so importing this table costs no polars (the
command line reads it to build ``--format``). A model's formats are listed in the order ``--help``
shows them; the terminal view is called :data:`~.registry.TERMINAL`. A new model's renderers live in
their own module, which registers them with :func:`~.registry.renders` and is imported at the end.
"""

from __future__ import annotations

from typing import Any

from .registry import TERMINAL, View, renders


def _table_file(model: Any, view: View) -> Any:
    from .files import write_table
    return write_table(model, view.table or model.TABLES[0], view.format, view.output)


def _json(model: Any, view: View) -> str:
    from .json_out import render_json
    return render_json(model)


def _document(model: Any, view: View) -> str:
    from .json_out import render_document
    return render_document(model.to_dict())


# -- analyze: one trace's breakdown ------------------------------------------------------------
@renders("report", TERMINAL)
def _report_table(model: Any, view: View) -> Any:
    from .terminal.report import render_report
    return lambda console: render_report(model, console, top=view.top)


@renders("report", "json")
def _report_json(model: Any, view: View) -> Any:
    from .json_out import render_json_batches
    return render_json_batches(model, max_ops=view.max_ops)


renders("report", "csv")(_table_file)
renders("report", "parquet")(_table_file)


@renders("report", "markdown")
def _report_markdown(model: Any, view: View) -> str:
    from .markdown import analyze_markdown
    return analyze_markdown(model, top=view.top)


# -- analyze of several traces ------------------------------------------------------------------
@renders("batch", TERMINAL)
def _batch_table(model: Any, view: View) -> Any:
    from .terminal.batch import render_batch
    return lambda console: render_batch(model, console)


renders("batch", "json")(_json)


@renders("batch", "csv")
def _batch_csv(model: Any, view: View) -> str:
    from .files import batch_csv
    return batch_csv(model)


@renders("batch", "parquet", dataset=True)
def _batch_dataset(model: Any, view: View) -> None:
    """Written by the batch's workers while they ran (one part per trace and table)."""
    return None


@renders("batch", "markdown")
def _batch_markdown(model: Any, view: View) -> str:
    from .markdown import batch_markdown
    return batch_markdown(model)


# -- compare ------------------------------------------------------------------------------------
@renders("comparison", TERMINAL)
def _comparison_table(model: Any, view: View) -> Any:
    from .terminal.compare import render_compare
    return lambda console: render_compare(model, console)


renders("comparison", "json")(_json)


@renders("comparison", "markdown")
def _comparison_markdown(model: Any, view: View) -> str:
    from .markdown import compare_markdown
    return compare_markdown(model)


# -- launch -------------------------------------------------------------------------------------
@renders("launch", TERMINAL)
def _launch_table(model: Any, view: View) -> Any:
    from .terminal.launch import render_launch
    return lambda console: render_launch(model, console)


renders("launch", "json")(_json)


@renders("launch", "csv")
def _launch_csv(model: Any, view: View) -> str:
    from .files import launch_csv
    return launch_csv(model, view.table or model.TABLES[0])


# -- flops --------------------------------------------------------------------------------------
@renders("flops", TERMINAL)
def _flops_table(model: Any, view: View) -> Any:
    from .terminal.flops import render_flops
    return lambda console: render_flops(model, console, top=view.top)


renders("flops", "json")(_json)


@renders("flops", "csv")
def _flops_csv(model: Any, view: View) -> str:
    from .files import flops_csv
    return flops_csv(model, view.table or model.TABLES[0])


# -- latency and whatif -------------------------------------------------------------------------
@renders("latency", TERMINAL)
def _latency_table(model: Any, view: View) -> Any:
    from .terminal.latency import render_latency
    return lambda console: render_latency(model, console)


renders("latency", "json")(_json)


@renders("latency", "csv")
def _latency_csv(model: Any, view: View) -> str:
    from .files import latency_csv
    return latency_csv(model)


@renders("whatif", TERMINAL)
def _whatif_table(model: Any, view: View) -> Any:
    from .terminal.latency import render_whatif
    return lambda console: render_whatif(model, console)


renders("whatif", "json")(_json)


@renders("whatif", "csv")
def _whatif_csv(model: Any, view: View) -> str:
    from .files import whatif_csv
    return whatif_csv(model)


# -- check, explain, weak: documents ------------------------------------------------------------
@renders("check", TERMINAL)
def _check_text(model: Any, view: View) -> str:
    from .terminal.check import check_text
    return check_text(model.trace, model.violations, model.report)


@renders("check", "json")
def _check_json(model: Any, view: View) -> str:
    from .json_out import render_document
    return render_document(model.to_dict(), ascii_only=True)


@renders("explain", TERMINAL)
def _explain_text(model: Any, view: View) -> str:
    from .terminal.explain import render_explain
    return render_explain(model.to_dict(), model.rules)


renders("explain", "json")(_document)


@renders("weak", TERMINAL)
def _weak_text(model: Any, view: View) -> str:
    from .terminal.explain import render_weak
    return render_weak(model.to_dict())


renders("weak", "json")(_document)


# the renderers of models added since, each module registering its own
from . import shapes  # noqa: E402,F401
