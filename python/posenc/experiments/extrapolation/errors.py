"""Errors of the extrapolation experiment: one line, an exit code (the CLI's:
2 invalid argument, 4 I/O error)."""
from __future__ import annotations

EXIT_INVALID = 2
EXIT_IO = 4


class ExperimentError(Exception):
    """A user error: `str(e)` is the one-line message (it names the argument,
    the value and what is allowed), `code` the exit code."""

    def __init__(self, message: str, code: int = EXIT_INVALID) -> None:
        super().__init__(message)
        self.code = code
