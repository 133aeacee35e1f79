"""The ground floor: the trace contract (``trace``), the op-tree walks (``frames``), the switch
of the C extensions (``native``) and the one writer of files (``safe_write``). It imports
nothing above the base modules (``tests/test_architecture.py``)."""
