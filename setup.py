"""Builds the optional C extensions; everything else is in pyproject.toml.

* ``_nongemm_scan`` (csrc/nongemm_scan.c): JSON trace events straight into the tables' columns;
* ``_nongemm_sweep`` (csrc/nongemm_sweep.c): the op tree in one sort and one pass.

Both are optional: where no C compiler is available the install still succeeds and
the pure-Python (polars) paths do the same work (same results, slower).
"""

import sys

from setuptools import Extension, setup

FLAGS = [] if sys.platform == "win32" else ["-O3", "-ffp-contract=off"]

setup(
    ext_modules=[
        Extension(name, [f"csrc/{name[1:]}.c"], depends=["csrc/arrow_c.h"], optional=True, extra_compile_args=FLAGS)
        for name in ("_nongemm_scan", "_nongemm_sweep")
    ],
)
