"""Thin capture helpers that turn a run into a trace for ``nongemm-trace``.

``torch_profiler`` (a torch.profiler run of N steps to ``NAME.json.gz``, with run metadata),
``nsys`` (an Nsight Systems run to SQLite, converted to a Kineto trace), ``tensorrt`` (trtexec's
engine profile and layer information) and ``onnxruntime`` (an ONNX Runtime profile); ``examples``
holds small models to capture (docs/collectors.md). Installed as ``nongemm_trace.collectors``;
torch is an optional dependency (``pip install nongemm-trace[torch]``)."""
