"""Layer `ctl`: how a volcano-py command ends — its exit status and its one line (`scheduler.cli.main` uses it).

2 for a user error (a bad file, field, flag or conf), 1 for a failure (no cluster to talk to, a bug), 141 when
the reader of our output went away (`| head -1`: 128 + SIGPIPE), 130 on Ctrl-C (128 + SIGINT), as a shell
reports a killed command. One line each; the traceback only with `--debug`.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

EXIT_USER, EXIT_FAILURE, EXIT_PIPE, EXIT_INTERRUPTED = 2, 1, 141, 130


class OneLineParser(argparse.ArgumentParser):
    """argparse's errors in one line (usage is a `--help` away), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USER, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def one_line(exc: Exception, user_errors: tuple[type[Exception], ...]) -> tuple[str, int]:
    """The line an error ends a command with, and the exit status."""
    if isinstance(exc, user_errors):
        return str(exc), EXIT_USER
    if isinstance(exc, OSError) and exc.filename is not None:  # e.g. the report's DIR: a path the user gave
        return f"{exc.filename}: {exc.strerror}", EXIT_USER
    return (f"internal error: {type(exc).__name__}: {exc} (run again with --debug for the traceback, and please "
            "report it)"), EXIT_FAILURE


def quiet_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's flush at exit would fail on the closed pipe again
    except (OSError, ValueError, AttributeError):  # stdout is no file (captured in a test): nothing to flush
        pass
