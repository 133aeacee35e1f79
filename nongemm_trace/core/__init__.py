"""The ground floor: the trace contract (``trace``), the op-tree walks (``frames``), the switch
of the C extensions (``native``), the one writer of files (``safe_write``), how long work reports
its progress (``progress``) and how old names retire (``deprecation``, ``moved``). It imports
nothing above the base modules (``tests/test_architecture.py``)."""
