"""Kineto / Chrome-trace JSON: streamed in chunks, scanned by C where it is built.

* :mod:`.loader` — the entry points (streamed or whole document);
* :mod:`.pipeline` — the chunk pipeline (cut, decode side by side, file order) and the
  document's framing around it; :mod:`.cutting` cuts, :mod:`.build` assembles the trace;
* :mod:`.document`, :mod:`.events`, :mod:`.tables` — the msgspec path (the reference);
* :mod:`.scanner`, :mod:`.fast_scan` — the C scanner and its tables;
* :mod:`.read_ahead` — the first chunks scanned on another core while the command imports.

Nothing here imports polars at package import: the command line starts the read-ahead
(:func:`nongemm_trace.load.start_read_ahead`) before polars is imported.
"""
