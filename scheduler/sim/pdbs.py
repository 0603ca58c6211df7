"""Layer `sim`: whether the simulator can take a PodDisruptionBudget (a cluster file's, or a test's)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.api.disruption import budget_from_object
from scheduler.api.fields import describe


def pdb_problem(manifest: Mapping[str, Any]) -> str | None:
    """Why the simulator cannot take this PodDisruptionBudget (a field that cannot be read, a minAvailable it
    cannot compute a status for), or None."""
    sink: list[Any] = []
    try:
        budget_from_object(manifest, sink)
    except ValueError as exc:  # FieldError: no readable name or namespace
        return str(exc)
    if sink:
        return describe(sink[0])
    minimum = (manifest.get("spec") or {}).get("minAvailable")
    if minimum is not None and (type(minimum) is not int or minimum < 0):
        return (f"spec.minAvailable: the simulator computes disruptionsAllowed for a whole number only, got "
                f"{minimum!r} (give status.disruptionsAllowed instead)")
    return None
