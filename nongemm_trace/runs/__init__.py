"""Many traces at once: ``batch`` (a folder of traces, one report each) and ``batch_workers``
(its engines, each trace isolated)."""
