"""C accelerators of the importers (the rest of the package metadata is in pyproject.toml).

Each reads one trace format's bytes into columns without holding the GIL; the importers
fall back to their pure-Python readers wherever an accelerator declines a file, and
everywhere when it could not be built (optional: an install without a C compiler still
works, several times slower on large traces).
"""

from setuptools import Extension, setup

_FLAGS = ["-O2", "-std=c11"]

setup(
    ext_modules=[
        Extension("workbench.trace._sqlite_pages", ["workbench/trace/_sqlite_pages.c"], extra_compile_args=_FLAGS,
                  optional=True),
        Extension("workbench.trace._kineto_scan", ["workbench/trace/_kineto_scan.c"], extra_compile_args=_FLAGS,
                  optional=True),
    ],
)
