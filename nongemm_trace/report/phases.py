"""A serving run's phases (:class:`~nongemm_trace.models.phases.PhasesReport`) in each format: the
terminal's table (the one ``analyze`` prints under the breakdown) and the JSON document. Registered
with :func:`.registry.renders`; each renderer imports what it draws with when it runs."""

from __future__ import annotations

from typing import Any

from .registry import PAGE, TERMINAL, View, as_json, renders


@renders("phases", TERMINAL)
def phases_table(model: Any, view: View) -> Any:
    """The phases table, or the line that says the trace marks none."""
    def draw(console: Any) -> None:
        from .terminal import escape
        from .terminal.phases import render_phases

        if not model.rows:
            console.print(f"{escape(model.trace)}: no serving phases (no vLLM or SGLang iteration marks, no "
                          "generate() loop)", highlight=False)
        render_phases(model.rows, model.engine, console)
    return draw


renders("phases", "json")(as_json)


@renders("phases", PAGE)
def phases_section(model: Any, view: View) -> str:
    """The phases table under a trace's breakdown on the page; nothing for a trace that marks none."""
    from .html_phases import phases_section
    return phases_section(model.rows, model.engine)
