"""Trace layer: the normalized tables, the readers that make them, and the store.

``import_file(path)`` reads any supported capture (chosen by content), ``open_trace(src)``
also accepts a stored trace's name or directory, ``save(trace, name)`` stores one atomically,
``export_chrome(trace, path)`` writes one as a Chrome / Perfetto trace JSON.
``ImportOptions`` says how an import may use the machine (threads, memory policy); ``words``
names what a trace counts (kernels, or CPU ops) for every view that words it.
"""

from __future__ import annotations

from .chrome import export_chrome
from .open import import_file, open_trace
from .options import ImportOptions
from .schema import SCHEMA, TABLES, Trace
from .store import default_root, list_traces, save
from .store import load as load_dir

__all__ = [
    "SCHEMA", "TABLES", "Trace", "ImportOptions", "default_root", "list_traces", "save",
    "load_dir", "import_file", "open_trace", "export_chrome",
]
