"""Layer `report`: the report's user error, apart from the plots so the command line can catch it without
importing matplotlib's side of the package."""

from __future__ import annotations


class ReportError(RuntimeError):
    """The report cannot be written (a user error: the extra is missing, DIR is not a writable folder)."""
