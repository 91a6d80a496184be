"""C accelerators (the rest of the package metadata is in pyproject.toml).

Each is optional: an install without a C compiler still works, with the library path its
seam falls back to (see README, "Architecture"). Two read one trace format's bytes into
columns without holding the GIL (the nsys export's pages, Kineto JSON); two answer the range
tree's hot questions in one pass (sorted search, range nesting).
"""

from setuptools import Extension, setup

_FLAGS = ["-O2", "-std=c11"]


def _ext(module: str) -> Extension:
    return Extension(module, [module.replace(".", "/") + ".c"], extra_compile_args=_FLAGS, optional=True)


setup(ext_modules=[_ext(m) for m in (
    "workbench.trace.readers.nsys._sqlite_pages",
    "workbench.trace.readers.kineto._kineto_scan",
    "workbench.trace.build._sorted_search",
    "workbench.trace.build._range_stack",
)])
