"""The analyses: functions over an :class:`~nongemm_trace.pipeline.analysis.Analysis` (or a
path), each reading its ``Selection`` and building one result model (``launch``,
``compare``, ``check``, ``explain``, ``weak``, ``annotate``, ``convert``; ``flops/`` and
``latency/`` are folders of their own)."""
