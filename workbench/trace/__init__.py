"""Trace layer: the normalized model, importers and the store.

``import_file(path)`` reads any supported capture (chosen by content), ``open_trace(src)``
also accepts a stored trace's name or directory, ``save(trace, name)`` stores one atomically.
"""

from __future__ import annotations

from .model import SCHEMA, TABLES, Trace, layer_pattern
from .store import default_root, list_traces, save
from .store import load as load_dir
from .detect import import_file, open_trace

__all__ = [
    "SCHEMA", "TABLES", "Trace", "layer_pattern", "default_root", "list_traces", "save",
    "load_dir", "import_file", "open_trace",
]
