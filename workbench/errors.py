"""One error type for everything a user can get wrong.

Every message names the file (or trace) and the problem on one line, so the CLI can print it
as-is and exit 2 without a traceback.
"""

from __future__ import annotations

import os


class WorkbenchError(Exception):
    """A problem with the user's input: a file, a trace, an argument."""

    exit_code = 2  # what the CLI exits with

    def __init__(self, where: object, problem: str, *, cli_problem: str | None = None):
        self.where = os.fspath(where) if isinstance(where, os.PathLike) else str(where)
        self.problem = problem
        # The same problem in the command line's words where the fix differs there (``--force``
        # where the API takes ``overwrite=True``): what the ``workbench`` command prints.
        self.cli_problem = problem if cli_problem is None else cli_problem
        super().__init__(f"{self.where}: {problem}")

    def cli_message(self) -> str:
        """``where: problem`` as the command line says it."""
        return f"{self.where}: {self.cli_problem}"


class TraceFormatError(WorkbenchError):
    """The file is not a trace we can read, or it is damaged."""


class ProgramFailed(WorkbenchError):
    """The user's own program, run by a capture, failed: its failure, not bad input."""

    exit_code = 1
