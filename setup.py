"""Builds the optional C scanner (csrc/nongemm_scan.c); everything else is in pyproject.toml.

The extension is optional: where no C compiler is available the install still
succeeds and traces are decoded by the pure-Python path (same results, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("_nongemm_scan", ["csrc/nongemm_scan.c"], optional=True,
                  extra_compile_args=[] if __import__("sys").platform == "win32" else ["-O3"]),
    ],
)
