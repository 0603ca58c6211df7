"""Layer `sim`: what a workload holds: work items the replay runs, and the objects whose controllers make them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class _Manifest:
    """The kind and name of an item's manifest."""

    __slots__ = ()
    manifest: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.manifest.get("kind"))

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])


@dataclass(frozen=True, slots=True)
class WorkItem(_Manifest):
    manifest: dict[str, Any]
    arrival: float
    duration: float


@dataclass(frozen=True, slots=True)
class Controlled(_Manifest):
    """A CronJob, JobFlow or JobTemplate: not placed itself; its controller in the replay (`sim/controllers.py`)
    makes the Jobs. `until` is a CronJob's last moment to start one, `duration` how long each Job runs (a
    CronJob's, a JobTemplate's)."""

    manifest: dict[str, Any]
    arrival: float = 0.0
    until: float = 0.0
    duration: float = 60.0
