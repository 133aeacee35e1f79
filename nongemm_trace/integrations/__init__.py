"""Where users already are: training-framework callbacks and performance gates.

* :mod:`.huggingface`: ``NonGemmCallback`` for ``transformers.Trainer``;
* :mod:`.lightning`: ``NonGemmCallback`` for ``lightning.pytorch.Trainer``;
* :mod:`.steps`: ``StepProfiler``, the framework-neutral part (a loop of your own can call it), and
  ``ProfileWindow``, which steps it profiles and what it writes;
* :mod:`.gates`: ``Gates`` and ``PerformanceGateError``, the limits of ``nongemm-trace check``.

The pytest plugin is :mod:`nongemm_trace.pytest_plugin`. Each framework module imports its
framework; importing this package imports none of them.
"""
