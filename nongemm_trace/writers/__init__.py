"""The writers floor: what writes a trace back out rather than measuring it. ``annotate`` writes the
trace with each op's and activity's category in it (for Perfetto); ``convert`` writes an Nsight Systems
export as a Kineto trace. Both read an analysis (or a loaded trace) and write one file."""
