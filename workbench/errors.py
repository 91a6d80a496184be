"""One error type for everything a user can get wrong.

Every message names the file (or trace) and the problem on one line, so the CLI can print it
as-is and exit 2 without a traceback.
"""

from __future__ import annotations

import os


class WorkbenchError(Exception):
    """A problem with the user's input: a file, a trace, an argument."""

    exit_code = 2  # what the CLI exits with

    def __init__(self, where: object, problem: str):
        self.where = os.fspath(where) if isinstance(where, os.PathLike) else str(where)
        self.problem = problem
        super().__init__(f"{self.where}: {problem}")


class TraceFormatError(WorkbenchError):
    """The file is not a trace we can read, or it is damaged."""


class ProgramFailed(WorkbenchError):
    """The user's own program, run by a capture, failed: its failure, not bad input."""

    exit_code = 1
