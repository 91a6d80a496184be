"""C accelerators (the rest of the package metadata is in pyproject.toml).

Each reads one trace format's bytes into columns without holding the GIL: the nsys export's
pages and Kineto JSON. Each is optional: an install without a C compiler still works, with
the library path its reader's one seam falls back to (sqlite3, a JSON library).
"""

from setuptools import Extension, setup

_FLAGS = ["-O2", "-std=c11"]


def _ext(module: str) -> Extension:
    return Extension(module, [module.replace(".", "/") + ".c"], extra_compile_args=_FLAGS, optional=True)


setup(ext_modules=[_ext(m) for m in (
    "workbench.trace.readers.nsys._sqlite_pages",
    "workbench.trace.readers.kineto._kineto_scan",
)])
