"""Thin capture helpers that turn a run into a Kineto trace for ``nongemm-trace``.

Planned modules (see the project's issues): ``torch_profiler`` (a torch.profiler
run to ``NAME.json.gz`` with run metadata) and ``nsys`` (an Nsight Systems run to
SQLite to a Kineto trace). Only this package skeleton exists so far; torch is an
optional dependency (``pip install nongemm-trace[torch]``).
"""
