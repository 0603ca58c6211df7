"""Layer `controllers`: the automatic gangs of JobSets, LeaderWorkerSets and PyTorchJobs (`scheduler.api.owner_gang`,
`scheduler.api.pytorch_gang`).

For a workload that opted in (`scheduling.volcano-py.io/owner-gang: "true"` on it or on its namespace) whose
pod templates name one of our schedulers, this writes its PodGroups and keeps them in step with its spec:
a JobSet's one gang follows its replicated jobs' replicas and parallelism; a LeaderWorkerSet's groups are
added and removed as its `replicas` change; a PyTorchJob's one gang follows its replica specs' replicas (and is
deleted while it is suspended or once it has finished). The PodGroups are owned by the workload, so the garbage
collector removes them with it; one made here carries the label `scheduling.volcano-py.io/owner-gang`.

The pods are not rewritten: the scheduler finds a pod's owner gang by its labels (`api.owner_gang
.owner_group_name`, in `adapter.snapshot.gang_of`), and a pod with such labels waits until its owner gang or its
per-Job PodGroup exists, so it never starts alone. The plain-pod PodGroup controller asks `claims` first and
makes no per-Job PodGroup for a pod whose owner gang is made here.

The controllers watch JobSets, LeaderWorkerSets and PyTorchJobs only where their CustomResourceDefinitions are installed
when they start (`installed`); without them nothing here runs. A workload whose spec cannot be read (negative
replicas, a gang over 100,000 pods, a missing template...) gets one log line with the typed reason for each
distinct problem, and its pods keep their per-Job PodGroups.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import quote

from scheduler.api.objects import MutableObj
from scheduler.api.owner_gang import (
    JOBSET_API,
    LWS_API,
    OWNER_GANG_LABEL,
    PYTORCH_API,
    GangSpec,
    OwnerGangError,
    jobset_gang,
    lws_gangs,
    opted_in,
    owner_group_name,
    owner_workload,
)
from scheduler.api.pytorch_gang import pytorchjob_gang
from scheduler.cache.kube import KubeError
from scheduler.controllers.client import SCHEDULING, Api, PodGroupConflictError
from scheduler.controllers.podgroup import MANAGED_SPEC
from scheduler.controllers.timers import Retries, Timers
from scheduler.jobs import keys

log = logging.getLogger("volcano_py.controllers.owner_gangs")

NAMESPACE_TTL = 10.0  # seconds a namespace's annotations are reused before they are read again


def workload_path(api: tuple[str, str, str], namespace: str, name: str = "") -> str:
    group, version, plural = api
    return f"/apis/{group}/{version}/namespaces/{namespace}/{plural}" + (f"/{name}" if name else "")


# The workloads with automatic gangs, by the kind written on their PodGroups' `owner-gang` label.
JOBSET, LWS, PYTORCHJOB = "jobset", "lws", "pytorchjob"
KINDS = {JOBSET: (JOBSET_API, "JobSet"), LWS: (LWS_API, "LeaderWorkerSet"), PYTORCHJOB: (PYTORCH_API, "PyTorchJob")}
_BY_API = {api: kind for kind, (api, _) in KINDS.items()}


def workload_key(kind: str, namespace: str, name: object) -> str:
    return f"{KINDS[kind][1]} {namespace}/{name}"


def installed(api: Api) -> tuple[bool, bool, bool]:
    """(JobSet, LeaderWorkerSet, PyTorchJob): whether the apiserver serves each resource (its CRD installed)."""
    found = []
    for group, version, plural in (JOBSET_API, LWS_API, PYTORCH_API):
        try:
            served = api.get(f"/apis/{group}/{version}")
        except KubeError as exc:
            log.warning("cannot tell whether %s/%s is served (%s): not watched", group, version, exc)
            served = None
        found.append(any(r.get("name") == plural for r in (served or {}).get("resources") or ()))
    return found[0], found[1], found[2]


def _obj(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _templates(workload: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    """The workload's pod specs that can be read; anything else in their place is skipped (the spec's reader,
    `api.owner_gang`, says what is wrong with it)."""
    spec = _obj(workload.get("spec"))
    if kind == PYTORCHJOB:
        replicas = _obj(spec.get("pytorchReplicaSpecs"))
        specs = [_obj(_obj(r).get("template")).get("spec") for r in list(replicas.values())[:8]]
    elif kind == LWS:
        template = _obj(spec.get("leaderWorkerTemplate"))
        specs = [_obj(template.get(k)).get("spec") for k in ("leaderTemplate", "workerTemplate")]
    else:
        rjobs = spec.get("replicatedJobs")
        specs = [_obj(_obj(_obj(_obj(rjob).get("template")).get("spec")).get("template")).get("spec")
                 for rjob in (rjobs if isinstance(rjobs, list) else ())]
    return [t for t in specs if isinstance(t, Mapping)]


def _names_ours(template: Mapping[str, Any], ours: frozenset[str]) -> bool:
    name = template.get("schedulerName")
    return type(name) is str and name in ours


OWNED_SPEC = (*MANAGED_SPEC, "minTaskMember")  # the spec keys written here; a user's others are kept


def owner_gang_update(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any] | None:
    """`current` with `wanted`'s spec keys and labels, or None when they agree (pure). The PodGroup's other labels
    and its annotations are left alone: the scheduler publishes its reasons there."""
    cur_meta, want_meta = current.get("metadata") or {}, wanted.get("metadata") or {}
    cur_spec = dict(current.get("spec") or {})
    spec = {**{k: v for k, v in cur_spec.items() if k not in OWNED_SPEC}, **wanted["spec"]}
    labels = {**(cur_meta.get("labels") or {}), **(want_meta.get("labels") or {})}
    if spec == cur_spec and labels == (cur_meta.get("labels") or {}):
        return None
    return {**current, "metadata": {**cur_meta, "labels": labels}, "spec": spec}


class OwnerGangController:
    def __init__(self, api: Api, scheduler_names: Iterable[str] = (keys.DEFAULT_SCHEDULER,), *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self.scheduler_names = frozenset(scheduler_names)
        self.clock = clock
        self._lock = threading.Lock()
        self._namespaces: dict[str, tuple[float, dict[str, Any]]] = {}
        self._logged: dict[str, str] = {}  # workload key -> the problem last logged for it
        self._claimed: dict[str, set[str]] = {}  # workload key -> its PodGroups made (pods ask often)
        self.retries = Retries(Timers())

    # ---- events -----------------------------------------------------------------------------------------
    def on_jobset(self, kind: str | None, jobset: MutableObj) -> None:
        self._on_workload(kind, jobset, JOBSET)

    def on_lws(self, kind: str | None, lws: MutableObj) -> None:
        self._on_workload(kind, lws, LWS)

    def on_pytorchjob(self, kind: str | None, job: MutableObj) -> None:
        self._on_workload(kind, job, PYTORCHJOB)

    def _on_workload(self, event: str | None, workload: MutableObj, kind: str) -> None:
        meta = workload.get("metadata") or {}
        key = workload_key(kind, str(meta.get("namespace", "default")), meta.get("name"))
        if event == "DELETED":  # its PodGroups go with it (ownerReference)
            with self._lock:
                self._logged.pop(key, None)
                self._claimed.pop(key, None)
            self.retries.forget(key)  # a failed sync of it is not run again: it would make them anew
            return
        self.retries.run(key, f"owner gang of {key}", log, lambda: self.sync(workload, kind))

    def claims(self, pod: Mapping[str, Any]) -> bool:
        """True when the pod's workload has its gangs made here (it opted in and could be read; its gangs exist
        now); the plain-pod PodGroup controller then makes no per-Job PodGroup for it."""
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else None
        target, group = owner_workload(labels), owner_group_name(labels)
        if target is None or group is None:
            return False
        api, name = target
        namespace = str(meta.get("namespace", "default"))
        with self._lock:
            if group in self._claimed.get(workload_key(_BY_API[api], namespace, name), ()):
                return True
        try:
            workload = self.api.get(workload_path(api, namespace, name))
        except KubeError as exc:
            if exc.status in (403, 404):  # not installed, or not ours to read: per-Job PodGroups
                return False
            raise
        if workload is None:
            return False
        # A pod of a group just scaled away is still the opted-in workload's: no per-workload PodGroup for it
        # either (it is on its way out), else the LWS's leader StatefulSet would get one that stays.
        return self.sync(workload, _BY_API[api]) is not None

    # ---- the sync -------------------------------------------------------------------------------------------
    def wanted(self, workload: Mapping[str, Any], kind: str) -> list[GangSpec] | None:
        """The gangs the workload should have; None when it has none (not opted in, not ours, unreadable)."""
        meta = workload.get("metadata") or {}
        namespace = str(meta.get("namespace", "default"))
        if not opted_in(workload, self._namespace_annotations(namespace)):
            return None
        if not any(_names_ours(t, self.scheduler_names) for t in _templates(workload, kind)):
            return None
        key = workload_key(kind, namespace, meta.get("name"))
        try:
            gangs = (lws_gangs(workload) if kind == LWS else [jobset_gang(workload)] if kind == JOBSET
                     else [pytorchjob_gang(workload)])
        except OwnerGangError as exc:
            with self._lock:
                first = self._logged.get(key) != str(exc)
                self._logged[key] = str(exc)
            if first:
                log.warning("no owner gang: %s; its pods keep their per-Job PodGroups", exc)
            return None
        with self._lock:
            self._logged.pop(key, None)
        return gangs

    def sync(self, workload: Mapping[str, Any], kind: str) -> list[GangSpec] | None:
        """Create, update or delete the workload's PodGroups to match `wanted`; the gangs, or None. `kind`: JOBSET,
        LWS or PYTORCHJOB."""
        gangs = self.wanted(workload, kind)
        meta = workload.get("metadata") or {}
        namespace, uid = str(meta.get("namespace", "default")), meta.get("uid")
        keep = {g.name for g in gangs or () if g.min_member > 0}
        key = workload_key(kind, namespace, meta.get("name"))
        made: set[str] = set()  # filled as they are made; only this workload's entry changes
        with self._lock:
            if keep:
                self._claimed[key] = made
            else:
                self._claimed.pop(key, None)
        # One LIST of the PodGroups made for it, compared with what it wants: a workload's status update (LWS
        # writes its status often) costs no GET per group when nothing changed.
        existing = {str(pg["metadata"].get("name")): pg
                    for pg in self._made_for(namespace, kind, uid)}
        for gang in gangs or ():
            if gang.min_member > 0:
                self._create_or_update(gang, existing.get(gang.name))
                with self._lock:
                    made.add(gang.name)
        for name in existing:
            if name not in keep and self.api.delete_podgroup(namespace, name):
                log.info("podgroup %s/%s deleted: no longer a gang of its workload %s", namespace, name,
                         meta.get("name"))
        return gangs

    def _create_or_update(self, gang: GangSpec, listed: Mapping[str, Any] | None) -> None:
        """`listed`: the PodGroup as the sync's LIST showed it (None: not among those made for the workload)."""
        wanted = gang.podgroup()
        path = f"{SCHEDULING}/namespaces/{gang.namespace}/podgroups/{gang.name}"
        for attempt in range(3):  # a conflict means another writer moved it: read it again
            current = listed if attempt == 0 and listed is not None else self.api.get(path)
            if current is None:
                if self.api.create(wanted) is not None:
                    log.info("podgroup %s/%s for %s %s: minMember %d, queue %s", gang.namespace, gang.name,
                             gang.owner.kind, gang.owner.name, gang.min_member, gang.queue)
                    return
                continue  # created meanwhile: compare with it
            updated = owner_gang_update(current, wanted)
            if updated is None:
                return
            try:
                self.api.replace_podgroup(updated)
            except PodGroupConflictError:
                continue
            log.info("podgroup %s/%s follows its %s: %s", gang.namespace, gang.name, gang.owner.kind,
                     updated["spec"])
            return

    def _made_for(self, namespace: str, kind: str, uid: object) -> list[MutableObj]:
        selector = quote(f"{OWNER_GANG_LABEL}={kind}")
        listed = self.api.get(f"{SCHEDULING}/namespaces/{namespace}/podgroups?labelSelector={selector}") or {}
        return [pg for pg in listed.get("items") or ()
                if any(r.get("uid") == uid for r in (pg.get("metadata") or {}).get("ownerReferences") or ())]

    def _namespace_annotations(self, namespace: str) -> dict[str, Any]:
        now = self.clock()
        with self._lock:
            cached = self._namespaces.get(namespace)
        if cached is not None and now - cached[0] < NAMESPACE_TTL:
            return cached[1]
        try:
            obj = self.api.get(f"/api/v1/namespaces/{namespace}") or {}
        except KubeError as exc:  # no RBAC to read namespaces: only the workloads' own annotation counts
            log.warning("cannot read namespace %s (%s): only the workloads' own annotation opts in", namespace, exc)
            obj = {}
        annotations = dict((obj.get("metadata") or {}).get("annotations") or {})
        with self._lock:
            self._namespaces[namespace] = (now, annotations)
        return annotations
