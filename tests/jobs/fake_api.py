"""An in-memory stand-in for `scheduler.controllers.client.Api`: objects by (kind, namespace, name).

Only the calls the job, PodGroup and CronJob controllers make; every write is recorded so tests assert on it,
and so is every event. With a `clock`, a created object gets its creationTimestamp from it; `failures` makes the
next calls of a (verb, kind) answer HTTP 500.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.objects import MutableObj
from scheduler.api.timestamps import rfc3339
from scheduler.cache.kube import KubeError

_KINDS = {  # the collection in a GET path -> the kind stored
    "configmaps": "ConfigMap", "podgroups": "PodGroup", "replicasets": "ReplicaSet", "deployments": "Deployment",
    "statefulsets": "StatefulSet", "jobs": "BatchJob", "cronjobs": "CronJob",
}


@dataclass
class FakeApi:
    objects: dict[tuple[str, str, str], MutableObj] = field(default_factory=dict)
    writes: list[tuple[str, str, str, str]] = field(default_factory=list)  # (verb, kind, namespace, name)
    conflicts: int = 0  # how many replace_podgroup calls answer 409 first
    clock: Callable[[], float] | None = None
    failures: dict[tuple[str, str], int] = field(default_factory=dict)  # (verb, kind) -> calls that answer 500
    events: list[dict[str, str]] = field(default_factory=list)
    _versions: int = 0
    _uids: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)  # the controller creates a Job's pods at once

    # ---- test setup ------------------------------------------------------------------------------------
    def put(self, kind: str, obj: Mapping[str, Any]) -> MutableObj:
        stored = copy.deepcopy(dict(obj))
        meta = stored.setdefault("metadata", {})
        meta.setdefault("namespace", "ns")
        if "uid" not in meta:
            self._uids += 1
            meta["uid"] = f"uid-{self._uids}"
        if self.clock is not None:  # as the apiserver stamps them (the tests that pass no clock compare objects)
            self._versions += 1
            meta["resourceVersion"] = str(self._versions)
            meta.setdefault("creationTimestamp", rfc3339(self.clock()))
        self.objects[(kind, meta["namespace"], meta["name"])] = stored
        return stored

    def of_kind(self, kind: str) -> dict[str, MutableObj]:
        return {name: obj for (k, _, name), obj in self.objects.items() if k == kind}

    def _maybe_fail(self, verb: str, kind: str) -> None:
        if self.failures.get((verb, kind)):
            self.failures[(verb, kind)] -= 1
            raise KubeError(500, verb.upper(), kind, b'{"message": "injected"}')

    # ---- Api ---------------------------------------------------------------------------------------------
    def get(self, path: str) -> MutableObj | None:
        *_, namespace, plural, name = path.split("/")  # .../namespaces/<ns>/<plural>/<name>
        obj = self.objects.get((_KINDS[plural], namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def create(self, obj: Mapping[str, Any]) -> MutableObj | None:
        meta = obj["metadata"]
        key = (str(obj["kind"]), str(meta["namespace"]), str(meta["name"]))
        self._maybe_fail("create", key[0])
        with self._lock:
            if key in self.objects:
                return None
            self.writes.append(("create", *key))
            return self.put(key[0], obj)

    def job(self, namespace: str, name: str) -> MutableObj | None:
        obj = self.objects.get(("Job", namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def pods_of_job(self, namespace: str, job: str) -> list[MutableObj]:
        return [copy.deepcopy(p) for (k, ns, _), p in self.objects.items()
                if k == "Pod" and ns == namespace and p["metadata"].get("labels", {}).get("volcano.sh/job-name") == job]

    def podgroup(self, namespace: str, name: str) -> MutableObj | None:
        obj = self.objects.get(("PodGroup", namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def queue(self, name: str) -> MutableObj | None:
        return {"metadata": {"name": name}, "spec": {}, "status": {"state": "Open"}}

    def patch_podgroup_spec(self, namespace: str, name: str, spec: Mapping[str, Any]) -> MutableObj:
        self.writes.append(("patch", "PodGroup", namespace, name))
        pg = self.objects[("PodGroup", namespace, name)]
        pg["spec"] = {**pg.get("spec", {}), **spec}
        return pg

    def replace_podgroup(self, podgroup: Mapping[str, Any]) -> MutableObj:
        from scheduler.controllers.client import PodGroupConflictError

        meta = podgroup["metadata"]
        key = ("PodGroup", str(meta["namespace"]), str(meta["name"]))
        if self.conflicts:
            self.conflicts -= 1
            raise PodGroupConflictError(meta["name"])
        self.writes.append(("replace", *key))
        self.objects[key] = copy.deepcopy(dict(podgroup))
        return self.objects[key]

    def pods(self, namespace: str, labels: Mapping[str, str]) -> list[MutableObj]:
        return [copy.deepcopy(p) for (k, ns, _), p in sorted(self.objects.items())
                if k == "Pod" and ns == namespace
                and all((p["metadata"].get("labels") or {}).get(lk) == lv for lk, lv in labels.items())]

    def delete_podgroup(self, namespace: str, name: str) -> bool:
        self.writes.append(("delete", "PodGroup", namespace, name))
        return self.objects.pop(("PodGroup", namespace, name), None) is not None

    def delete_pod(self, namespace: str, name: str) -> bool:
        self.writes.append(("delete", "Pod", namespace, name))
        return self.objects.pop(("Pod", namespace, name), None) is not None

    def replace_job_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> MutableObj:
        self._maybe_fail("patch", "JobStatus")
        job = self.objects[("Job", namespace, name)]
        job["status"] = copy.deepcopy(dict(status))
        return job

    def patch_configmap_data(self, namespace: str, name: str, data: Mapping[str, Any]) -> MutableObj:
        self.writes.append(("patch", "ConfigMap", namespace, name))
        cm = self.objects[("ConfigMap", namespace, name)]
        cm["data"] = {k: v for k, v in {**(cm.get("data") or {}), **data}.items() if v is not None}
        return cm

    def event(self, involved: Mapping[str, Any], type_: str, reason: str, message: str, now: str) -> None:
        self.events.append({"kind": str(involved.get("kind")), "name": str(involved["metadata"]["name"]),
                            "type": type_, "reason": reason, "message": message, "time": now})

    # ---- Volcano Jobs and CronJobs --------------------------------------------------------------------------
    def jobs(self, namespace: str) -> list[MutableObj]:
        self._maybe_fail("list", "Job")
        return [copy.deepcopy(j) for (k, ns, _), j in sorted(self.objects.items()) if k == "Job" and ns == namespace]

    def delete_job(self, namespace: str, name: str, uid: str) -> bool:
        self._maybe_fail("delete", "Job")
        job = self.objects.get(("Job", namespace, name))
        if job is None or job["metadata"]["uid"] != uid:
            return False
        self.writes.append(("delete", "Job", namespace, name))
        del self.objects[("Job", namespace, name)]
        return True

    def cronjob(self, namespace: str, name: str) -> MutableObj | None:
        self._maybe_fail("get", "CronJob")
        obj = self.objects.get(("CronJob", namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def replace_cronjob_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> MutableObj:
        self._maybe_fail("patch", "CronJob")
        self.writes.append(("status", "CronJob", namespace, name))
        cronjob = self.objects[("CronJob", namespace, name)]
        cronjob["status"] = copy.deepcopy(dict(status))
        return copy.deepcopy(cronjob)

    # ---- PersistentVolumeClaims (the Job controller's claims) ------------------------------------------------
    def pvc(self, namespace: str, name: str) -> MutableObj | None:
        obj = self.objects.get(("PersistentVolumeClaim", namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def create_pvc(self, pvc: Mapping[str, Any]) -> MutableObj | None:
        return self.create(pvc)

    def set_volume_claim_names(self, namespace: str, name: str, names: Mapping[int, str],
                               resource_version: str) -> MutableObj:
        job = self.objects[("Job", namespace, name)]
        assert str(job["metadata"].get("resourceVersion") or "") == resource_version, "the Job changed meanwhile"
        self.writes.append(("patch", "Job", namespace, name))
        for index, claim in names.items():
            job["spec"]["volumes"][index]["volumeClaimName"] = claim
        job["metadata"]["resourceVersion"] = str(int(job["metadata"].get("resourceVersion") or 0) + 1)
        return copy.deepcopy(job)
