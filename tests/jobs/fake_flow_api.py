"""The fake API of `fake_api.py` with what the JobFlow controller calls too: JobFlows, JobTemplates, Jobs by label,
their deletion, and the Events it writes (kept, so tests assert on them). Creation timestamps come from `clock`,
as the apiserver stamps them."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fake_api import FakeApi

from scheduler.api.objects import MutableObj
from scheduler.api.timestamps import rfc3339


@dataclass(frozen=True)
class Event:
    kind: str  # of the object it is about
    name: str
    type: str
    reason: str
    message: str


class FlowFakeApi(FakeApi):
    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__()
        self.clock = clock
        self.told: list[Event] = []

    def create(self, obj: Mapping[str, Any]) -> MutableObj | None:
        created = super().create(obj)
        if created is not None:
            created["metadata"]["creationTimestamp"] = rfc3339(self.clock())
        return created

    def event(self, involved: Mapping[str, Any], type_: str, reason: str, message: str, now: str) -> None:
        meta = involved.get("metadata") or {}
        self.told.append(Event(str(involved.get("kind")), str(meta.get("name")), type_, reason, message))

    def jobflow(self, namespace: str, name: str) -> MutableObj | None:
        obj = self.objects.get(("JobFlow", namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def jobtemplate(self, namespace: str, name: str) -> MutableObj | None:
        obj = self.objects.get(("JobTemplate", namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def jobs_with_labels(self, namespace: str, labels: Mapping[str, str]) -> list[MutableObj]:
        return [
            copy.deepcopy(j)
            for (k, ns, _), j in sorted(self.objects.items())
            if k == "Job"
            and ns == namespace
            and all((j["metadata"].get("labels") or {}).get(lk) == lv for lk, lv in labels.items())
        ]

    def delete_job(self, namespace: str, name: str, uid: str) -> bool:
        job = self.objects.get(("Job", namespace, name))
        if job is None or job["metadata"].get("uid") != uid:
            return False
        self.writes.append(("delete", "Job", namespace, name))
        del self.objects[("Job", namespace, name)]
        return True

    def replace_jobflow_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> MutableObj:
        self.writes.append(("status", "JobFlow", namespace, name))
        flow = self.objects[("JobFlow", namespace, name)]
        flow["status"] = copy.deepcopy(dict(status))
        return flow

    def replace_jobtemplate_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> MutableObj:
        self.writes.append(("status", "JobTemplate", namespace, name))
        template = self.objects[("JobTemplate", namespace, name)]
        template["status"] = copy.deepcopy(dict(status))
        return template
