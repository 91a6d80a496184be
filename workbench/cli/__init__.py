"""The ``workbench`` command line: every parser and handler, a thin layer over the public API.

``main`` is the entry point (``entry.py``: global options, the subcommands, one-line errors);
``args`` holds the checked option types, ``output`` the one table/JSON printer, and each
command group has its module: ``traces`` (import, summary, sql, list), ``diff``, ``sets``,
``bench``, ``capture``, ``report``, ``export``, ``demo``. The library never imports this
package.
"""

from .entry import main

__all__ = ["main"]
