"""Every renderer of the shipped models, registered by (model, format) in :mod:`.registry`'s table.

Each entry imports its renderer module when it runs, so importing this table costs no polars (the
command line reads it to build ``--format``). A model's formats are registered in the order ``--help``
shows them (the terminal view, called :data:`~.registry.TERMINAL`, first). A new model's renderers live
in their own module, which registers them with :func:`~.registry.renders` and is imported at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .registry import PAGE, TERMINAL, View, as_json, renders

#: the models drawn on a rich console at the terminal; those whose view takes ``top`` rows
DRAWN = ("report", "batch", "comparison", "launch", "flops", "latency", "whatif")
TOP = ("report", "flops")
#: the models whose JSON is their ``to_dict`` as is (a report's is written in batches, with ``max_ops``)
PLAIN_JSON = ("batch", "comparison", "launch", "flops", "latency", "whatif")


def _view(model: str) -> Callable[..., None]:
    """The function that draws ``model``'s terminal view (its module imported now)."""
    if model == "report":
        from .terminal.report import render_report
        return render_report
    if model == "batch":
        from .terminal.batch import render_batch
        return render_batch
    if model == "comparison":
        from .terminal.compare import render_compare
        return render_compare
    if model == "launch":
        from .terminal.launch import render_launch
        return render_launch
    if model == "flops":
        from .terminal.flops import render_flops
        return render_flops
    if model == "latency":
        from .terminal.latency import render_latency
        return render_latency
    from .terminal.latency import render_whatif
    return render_whatif


def _drawn(model: Any, view: View) -> Callable[[Any], None]:
    draw = _view(type(model).NAME)
    if type(model).NAME in TOP:
        return lambda console: draw(model, console, top=view.top)
    return lambda console: draw(model, console)


def _document(model: Any, view: View) -> str:
    from .json_out import render_document
    return render_document(model.to_dict())


def _table_file(model: Any, view: View) -> Any:
    """One of the model's ``TABLES`` as CSV (text) or Parquet (written to ``view.output``)."""
    from .files import flops_csv, launch_csv, write_table
    table = view.table or model.TABLES[0]
    if type(model).NAME == "report":
        return write_table(model, table, view.format, view.output)
    return (launch_csv if type(model).NAME == "launch" else flops_csv)(model, table)


for _model in DRAWN:
    renders(_model, TERMINAL)(_drawn)


@renders("report", "json")
def _report_json(model: Any, view: View) -> Any:
    from .json_out import render_json_batches
    return render_json_batches(model, max_ops=view.max_ops)


for _model in PLAIN_JSON:
    renders(_model, "json")(as_json)
for _model in ("report", "launch", "flops"):
    renders(_model, "csv")(_table_file)
renders("report", "parquet")(_table_file)


@renders("report", "markdown")
def _report_markdown(model: Any, view: View) -> str:
    from .markdown import analyze_markdown
    return analyze_markdown(model, top=view.top)


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


@renders("comparison", "markdown")
def _comparison_markdown(model: Any, view: View) -> str:
    from .markdown import compare_markdown
    return compare_markdown(model)


def _steps_csv(model: Any, view: View) -> str:
    """A latency or what-if report's steps as CSV."""
    from .files import latency_csv, whatif_csv
    return (latency_csv if type(model).NAME == "latency" else whatif_csv)(model)


renders("latency", "csv")(_steps_csv)
renders("whatif", "csv")(_steps_csv)


@renders("launch", PAGE)
def _launch_section(model: Any, view: View) -> str:
    """The launch verdict, measures and timeline under a trace's breakdown on the page (its warnings are
    the report's, which the page shows once)."""
    from .html import launch_section
    return f"<h3>Launch overhead and idle time</h3>{launch_section(model, warnings=False)}"


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


@renders("weak", TERMINAL)
def _weak_text(model: Any, view: View) -> str:
    from .terminal.explain import render_weak
    return render_weak(model.to_dict())


renders("explain", "json")(_document)
renders("weak", "json")(_document)


# the renderers of models added since, each module registering its own
from . import phases, shapes  # noqa: E402,F401
