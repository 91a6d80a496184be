"""Regular expressions a user gives (``--layer-regex``, ``--step-regex``, ``--prefill-regex``,
``--modules``, ``annotate_modules(include=, exclude=)``): compiled here or refused in one line
that names the option, so no ``re.error`` traceback reaches anyone."""

from __future__ import annotations

import re

from .errors import WorkbenchError


def compile_regex(pattern: str, what: str, flags: int = 0) -> re.Pattern:
    """``pattern`` compiled; ``what`` names the option in the error (``--step-regex``)."""
    if not isinstance(pattern, str):
        raise WorkbenchError(what, f"a regular expression (text), not {type(pattern).__name__}")
    try:
        return re.compile(pattern, flags)
    except re.error as e:
        raise WorkbenchError(f"{what} {pattern!r}", f"not a regular expression: {e}") from None
    except (OverflowError, RecursionError):  # a pattern nested past what the compiler takes
        raise WorkbenchError(f"{what} {pattern!r}", "not a regular expression: too deeply nested") from None
