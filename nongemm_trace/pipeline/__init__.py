"""One trace through the stages: ``analysis`` (the :class:`Analysis` that loads, links and
classifies once), ``selection`` (the select stage), ``measure`` (selection -> breakdown
``Report``) and ``api`` (``nongemm_trace.analyze``)."""
