"""Builds the optional C extensions; everything else is in pyproject.toml.

* ``_nongemm_scan`` (csrc/nongemm_scan.c): JSON trace events straight into the tables' columns, with
  its read-ahead thread (csrc/nongemm_read_ahead.c: the first chunks scanned while the command imports);
* ``_nongemm_sweep`` (csrc/nongemm_sweep.c): the op tree in one sort and one pass.

Both are optional: where no C compiler is available the install still succeeds and
the pure-Python (polars) paths do the same work (same results, slower). Where zlib's
header and library are found, the scanner links it: its read-ahead thread then inflates
``.gz`` traces too (load/kineto/read_ahead.py); without zlib it reads ahead plain files only.
"""

import os
import sys
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

FLAGS = [] if sys.platform == "win32" else ["-O3", "-ffp-contract=off"]

ZLIB_PROBE = """#include <zlib.h>
int main(void) { z_stream s = {0}; return inflateInit2(&s, 16 + MAX_WBITS) == Z_OK ? inflateEnd(&s) : 1; }
"""


def _has_zlib(compiler) -> bool:
    """zlib's header compiles and its library links (a program that calls inflateInit2)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "probe.c")
        with open(src, "w") as fh:
            fh.write(ZLIB_PROBE)
        try:
            objs = compiler.compile([src], output_dir=tmp)
            compiler.link_executable(objs, "probe", output_dir=tmp, libraries=["z"])
        except Exception:  # noqa: BLE001 - any failure means: build without zlib
            return False
    return True


class BuildExt(build_ext):
    def build_extensions(self):
        if sys.platform != "win32" and _has_zlib(self.compiler):
            for ext in self.extensions:
                if ext.name == "_nongemm_scan":
                    ext.define_macros.append(("NONGEMM_ZLIB", "1"))
                    ext.libraries.append("z")
        super().build_extensions()


#: each extension's C files (the scanner's read-ahead thread is linked into it: it fills the scanner's results)
SOURCES = {
    "_nongemm_scan": ["csrc/nongemm_scan.c", "csrc/nongemm_read_ahead.c"],
    "_nongemm_sweep": ["csrc/nongemm_sweep.c"],
}

setup(
    cmdclass={"build_ext": BuildExt},
    ext_modules=[
        Extension(name, files, depends=["csrc/arrow_c.h", "csrc/nongemm_scan.h"], optional=True,
                  extra_compile_args=FLAGS)
        for name, files in SOURCES.items()
    ],
)
