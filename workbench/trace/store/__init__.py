"""The trace store: ``<root>/<name>/`` holds one Parquet file per table and ``manifest.json``;
saved atomically, opened lazily."""

from __future__ import annotations

from .layout import MANIFEST, check_free, check_name, content_hash, default_root, is_trace_dir, list_traces, safe_name
from .read import load
from .write import save

__all__ = ["MANIFEST", "check_free", "check_name", "content_hash", "default_root", "is_trace_dir", "list_traces", "load", "safe_name", "save"]
