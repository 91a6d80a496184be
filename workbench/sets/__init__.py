"""Trace sets: the stored traces of a job's ranks, or of many runs, analysed together.

``trace_set`` is the API (:class:`TraceSet`, ``open_set``, ``import_set``); ``importing`` builds a
set from capture files, ``split`` cuts one capture of several processes or GPUs into members,
``store`` keeps a set on disk (``set.json`` beside its members), ``sql`` runs one query over every
member, and ``executors`` says where per-member work runs (a local process pool, or Ray).

Above the trace and analysis layers, below reporting and capturing.
"""

from .executors import Executor
from .trace_set import TraceSet, import_set, open_set

__all__ = ["Executor", "TraceSet", "import_set", "open_set"]
