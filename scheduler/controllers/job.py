"""Layer `controllers`: the Volcano Job controller.

Every event about a Job, one of its pods or its PodGroup ends in `reconcile(namespace, name, ...)`, which
reads the job, its PodGroup, its queue and its pods fresh from the apiserver, asks the pure lifecycle
(`scheduler.jobs.decide`) what to do, and carries the decision out: PodGroup first, then (once the scheduler
has moved the PodGroup out of Pending) the plugin objects and the pods; pod deletions; finally the Job status.
One lock per job serialises reconciles, so a decision always sees the status the previous one wrote.

A pod change becomes a lifecycle event through `pod_event` (PodFailed, PodEvicted, TaskCompleted, ...). The
pod's `volcano.sh/job-version` annotation lets the lifecycle ignore pods of an earlier run (the ones a restart
deletes). Policy timeouts and `ttlSecondsAfterFinished` are timers that re-enter `reconcile`.

What keeps a Job from progressing (its pods refused, its queue gone) is said on it: `job_notes.py`.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from scheduler import metrics
from scheduler.api.objects import MutableObj
from scheduler.api.timestamps import parse_time, rfc3339
from scheduler.cache.kube import KubeError
from scheduler.controllers.claims import JobClaims
from scheduler.controllers.client import Api
from scheduler.controllers.job_notes import FAILED_CREATE, MAX_CONDITIONS, QUEUE_NOT_FOUND, JobNotes, answer_of
from scheduler.controllers.podgroup_phases import PhaseTransitions
from scheduler.controllers.timers import AlreadySaidError, Retries, Timers
from scheduler.jobs import (
    Decision,
    JobEvent,
    JobStatus,
    OpKind,
    PodView,
    decide,
    desired_pods,
    expired,
    keys,
    normalize_job,
    plugin_objects,
    pod_event,
    pod_view,
    podgroup_for,
    podgroup_lookup_names,
    validate_job,
)
from scheduler.jobs.bus import PolicyAction, PolicyEvent
from scheduler.jobs.expand import MAX_JOB_PODS, size_problems
from scheduler.jobs.lifecycle import ttl_seconds
from scheduler.jobs.plugins import svc_configmap_name, svc_hosts, uses_svc
from scheduler.jobs.state import FINISHED
from scheduler.jobs.volumes import initiated, without_generated_names

log = logging.getLogger("volcano_py.controllers.job")

EXECUTE_ACTION = "ExecuteAction"
POD_CREATE_WORKERS = 16  # pods of one Job created at once (Volcano: one goroutine per pod)


def owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in (obj.get("metadata") or {}).get("ownerReferences") or ())


@dataclass(frozen=True, slots=True)
class _Seen:
    """The last state of a pod the controller saw, with the job (key and uid) and the run it belongs to."""

    view: PodView | None
    job: str
    job_uid: str
    version: int | None


def _job_uid(obj: Mapping[str, Any]) -> str:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("kind") == keys.JOB_KIND and str(ref.get("apiVersion", "")).startswith("batch.volcano.sh/"):
            return str(ref.get("uid"))
    return ""


def job_owner(obj: Mapping[str, Any]) -> str | None:
    """The name of the Volcano Job that controls `obj`, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("kind") == keys.JOB_KIND and str(ref.get("apiVersion", "")).startswith("batch.volcano.sh/"):
            return str(ref.get("name"))
    return None


def job_status(job: Mapping[str, Any], decision: Decision, now: float, note: str = "") -> dict[str, Any]:
    """The Job status a decision leads to: the decision's counts, the phase with its transition time, and the
    phase history in `conditions` (as Volcano keeps it). Keys other writers added are kept."""
    old = dict(job.get("status") or {})
    old_state = old.get("state") or {}
    phase = str(decision.phase)
    changed = old_state.get("phase") != phase or not old_state
    status = {**old, **decision.status()}
    if changed:
        state: dict[str, Any] = {"phase": phase, "lastTransitionTime": rfc3339(now)}
        if note:
            state["reason"], state["message"] = str(decision.action), note
        status["state"] = state
        conditions = list(old.get("conditions") or [])
        conditions.append({"status": phase, "lastTransitionTime": rfc3339(now)})
        status["conditions"] = conditions[-MAX_CONDITIONS:]
    else:
        status["state"] = old_state
    return status


VOLCANO_SCHEDULER = "volcano"


def _open(queue: Mapping[str, Any] | None) -> bool:
    return queue is not None and ((queue.get("status") or {}).get("state") or "Open") == "Open"


class JobController:
    def __init__(
        self,
        api: Api,
        scheduler_names: Iterable[str] = (keys.DEFAULT_SCHEDULER,),
        *,
        claim_unnamed: bool = False,
        clock: Callable[[], float] = time.time,
        max_pods: int = MAX_JOB_PODS,
    ):
        self.api = api
        self.max_pods = max_pods  # a Job with more pods is refused before anything of it is built
        names = tuple(scheduler_names)
        self.scheduler_names = frozenset(names)
        # A claimed job that names no scheduler gets the first configured name, as Volcano's mutating webhook
        # gives it (pkg/webhooks/admission/jobs/mutate/mutate_job.go patchDefaultScheduler).
        self.default_scheduler = names[0] if names else keys.DEFAULT_SCHEDULER
        # Volcano's webhook gives a Job that names no scheduler `volcano` (its default --scheduler-name): such
        # Jobs are Volcano's, so controllers that serve the name `volcano` (the drop-in) claim them too.
        self.claim_unnamed = claim_unnamed or VOLCANO_SCHEDULER in self.scheduler_names
        self.clock = clock
        self.timers = Timers()
        self.retries = Retries(self.timers)  # a sync that failed runs again (kopf does not retry watch handlers)
        self.volume_claims = JobClaims(api, self.timers.arm, clock)  # the PersistentVolumeClaims of spec.volumes
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._views: dict[str, dict[str, _Seen]] = {}  # job key -> pod uid -> what we last saw of the pod
        self._plugin_objects: set[str] = set()  # job uids whose plugin objects exist
        self._hosts: dict[str, dict[str, str]] = {}  # job uid -> the svc hosts data last seen in its ConfigMap
        self._waiting: dict[str, set[str]] = {}  # job uid -> tasks held back by dependsOn, as last told
        self.notes = JobNotes(api, clock, self._guard)  # why a Job does not progress, said once per cause
        self._podgroup_phases = PhaseTransitions()  # for the Unknown event (podgroup_phases.py)
        # Creates a Job's pods concurrently. A failed create raises from `map` in pod order (creates not yet
        # started are cancelled) and the Job's next sync makes what is missing, as a sequential create did.
        self._pod_pool = ThreadPoolExecutor(max_workers=POD_CREATE_WORKERS, thread_name_prefix="pod-create")

    # ---- which jobs are ours -----------------------------------------------------------------------------
    def claims(self, job: Mapping[str, Any]) -> bool:
        name = (job.get("spec") or {}).get("schedulerName")
        return name in self.scheduler_names if name else self.claim_unnamed

    # ---- events ------------------------------------------------------------------------------------------
    def on_job(self, kind: str | None, job: MutableObj) -> None:
        meta = job.get("metadata") or {}
        if kind == "DELETED":
            self.timers.cancel(f"{meta.get('namespace')}/{meta.get('name')}")
            self.retries.forget(f"{meta.get('namespace')}/{meta.get('name')}")
            with self._guard:
                self._views.pop(f"{meta.get('namespace')}/{meta.get('name')}", None)
                self._locks.pop(f"{meta.get('namespace')}/{meta.get('name')}", None)  # else one per Job ever seen
            self._plugin_objects.discard(str(meta.get("uid")))
            self.volume_claims.forget(str(meta.get("uid")))
            self._hosts.pop(str(meta.get("uid")), None)
            self._waiting.pop(str(meta.get("uid")), None)
            self.notes.drop(str(meta.get("uid")))
            queue = str((job.get("spec") or {}).get("queue") or "default")
            metrics.observe_controllers(lambda m: m.remove_job(f"{meta.get('namespace')}/{meta.get('name')}", queue))
            return
        if self.claims(job):
            self.reconcile(str(meta["namespace"]), str(meta["name"]))

    def on_pod(self, kind: str | None, pod: MutableObj) -> None:
        meta = pod.get("metadata") or {}
        job = job_owner(pod)
        if job is None:
            return
        uid = str(meta.get("uid"))
        after = None if kind == "DELETED" else pod_view(pod)
        version = (meta.get("annotations") or {}).get(keys.JOB_VERSION)
        seen = _Seen(after, f"{meta.get('namespace')}/{job}", _job_uid(pod), int(version) if version else None)
        with self._guard:
            of_job = self._views.setdefault(seen.job, {})
            earlier = of_job.pop(uid, None) if after is None else of_job.get(uid)
            if after is not None:
                of_job[uid] = seen
            elif not of_job:
                del self._views[seen.job]
        # No `before` for a deletion a reconcile already acted on (`_take_vanished`): no second eviction.
        before = earlier.view if earlier is not None else None
        if kind is None:  # the initial listing: what happened before we started is not an event
            before = after
        self.reconcile(str(meta["namespace"]), job, change=(before, after, seen.version))

    def on_podgroup(self, kind: str | None, podgroup: MutableObj) -> None:
        """A PodGroup that turns Unknown raises the Job's `Unknown` event, whose policy may restart it."""
        job = job_owner(podgroup)
        if job is not None:
            event = JobEvent(PolicyEvent.UNKNOWN) if self._podgroup_phases.turned_unknown(kind, podgroup) else None
            self.reconcile(str(podgroup["metadata"]["namespace"]), job, event=event)

    # ---- reconcile -----------------------------------------------------------------------------------------
    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def reconcile(
        self,
        namespace: str,
        name: str,
        event: JobEvent | None = None,
        change: tuple[PodView | None, PodView | None, int | None] | None = None,
    ) -> Decision | None:
        key = f"{namespace}/{name}"

        def sync() -> Decision | None:
            with self._lock(key):
                return self._reconcile(namespace, name, event, change)

        return self.retries.run(key, f"job {key}: sync failed", log, sync)

    def _reconcile(
        self,
        namespace: str,
        name: str,
        event: JobEvent | None,
        change: tuple[PodView | None, PodView | None, int | None] | None,
    ) -> Decision | None:
        job = self.api.job(namespace, name)
        if job is None or not self.claims(job) or (job.get("metadata") or {}).get("deletionTimestamp"):
            return None
        uid = str(job["metadata"]["uid"])
        if not (job.get("spec") or {}).get("schedulerName"):
            job.setdefault("spec", {})["schedulerName"] = self.default_scheduler  # its pods ask for our scheduler
        # The size first, and alone: the other checks and the expansion cost time per replica, and a Job the
        # webhook (when off) let through with `replicas: 2147483647` must fail at once, not hold this worker.
        errors = size_problems(job, self.max_pods) or validate_job(without_generated_names(job))
        if errors:
            self.notes.reject(job, errors)
            return None
        claims_missing = None if initiated(job) else self.volume_claims.ensure(job)  # first, as Volcano's
        spec = normalize_job(job)["spec"]
        pods = [p for p in self.api.pods_of_job(namespace, name) if owned_by(p, uid)]
        vanished = self._take_vanished(f"{namespace}/{name}", uid, pods)
        if vanished is not None:
            # A pod we saw is gone but its DELETED event has not reached us: act on the deletion first, or this
            # sync would recreate the pod before a PodEvicted policy (e.g. RestartJob) runs.
            self._reconcile(namespace, name, None, (vanished.view, None, vanished.version))
            return self._reconcile(namespace, name, event, change)
        views = [pod_view(p) for p in pods]
        if event is None and change is not None:
            before, after, version = change
            event = replace(pod_event(job, before, after, views), job_version=version)
        event = event or JobEvent()
        if event.action is not None and event.pod and not self._still_due(event, views):
            event = JobEvent()  # a deferred policy whose pod recovered meanwhile
        podgroup = self._find_podgroup(job)
        pg_phase = ((podgroup.get("status") or {}).get("phase") or "Pending") if podgroup is not None else None
        queue = None if pods else self.api.queue(spec["queue"])
        gate = pg_phase if (pods or _open(queue)) else None
        decision = decide(job, JobStatus.of(job), views, gate, event)
        if claims_missing is not None:  # Pending, no PodGroup yet: Volcano's initiateJob stops there too
            self._write_status(job, decision, event)
            self.volume_claims.wait(job, claims_missing, lambda: self.reconcile(namespace, name))
            return decision
        self._carry_out(job, decision, gate, podgroup, pods)
        self._write_status(job, decision, event)
        if not pods and queue is None and decision.phase not in FINISHED:
            self.notes.say(job, QUEUE_NOT_FOUND, f"queue {spec['queue']!r} does not exist: none of the job's pods are "
                                             "created until a queue of that name does")
        elif queue is not None:
            self.notes.forget(uid, QUEUE_NOT_FOUND)
        self._tell_waiting(job, uid, decision)
        self._arm_timers(job, decision)
        return decision

    def _find_podgroup(self, job: MutableObj) -> MutableObj | None:
        """The job's PodGroup: `<job>-<uid>`, else one named after the job that an older controller made.

        Volcano's getPodGroupByJob (pkg/controllers/job/job_controller_actions.go) has the same fallback. A
        PodGroup not owned by this job (a namesake left by an earlier job of this name, on its way out) is
        not its PodGroup."""
        meta = job["metadata"]
        for name in podgroup_lookup_names(job):
            podgroup = self.api.podgroup(str(meta["namespace"]), name)
            if podgroup is not None and owned_by(podgroup, str(meta["uid"])):
                return podgroup
        return None

    def _take_vanished(self, key: str, job_uid: str, listed: list[MutableObj]) -> _Seen | None:
        """Forget every pod of this job that was seen but is no longer listed; return the first of them.

        Their DELETED events, when they come, then carry no `before` and raise no second eviction."""
        present = {str(p["metadata"].get("uid")) for p in listed}
        with self._guard:
            of_job = self._views.get(key, {})
            gone = [u for u, s in of_job.items() if s.job_uid == job_uid and u not in present]
            taken = [of_job.pop(u) for u in gone]
        return taken[0] if taken else None

    @staticmethod
    def _still_due(event: JobEvent, views: list[PodView]) -> bool:
        pod = next((v for v in views if v.name == event.pod), None)
        if event.event == PolicyEvent.POD_PENDING:
            return pod is not None and pod.phase == "Pending"
        if event.event == PolicyEvent.UNKNOWN:
            return pod is not None and pod.phase == "Unknown"
        return True

    def _carry_out(
        self, job: MutableObj, decision: Decision, gate: str | None, podgroup: MutableObj | None, pods: list[MutableObj]
    ) -> None:
        namespace = job["metadata"]["namespace"]
        if podgroup is not None:  # the plugins' objects first, then the PodGroup and the pods, as Volcano's syncJob
            self._sync_hosts(job)  # (initOnJobUpdate, pkg/controllers/job/job_controller_actions.go): a client
            # that reads the hosts ConfigMap once the scaled job is ready finds it current
        for op in decision.ops:
            if op.kind is OpKind.ENSURE_PODGROUP and podgroup is None:
                self.api.create(podgroup_for(job))
            elif op.kind is OpKind.ENSURE_PODGROUP and podgroup is not None:
                self._resize_podgroup(job, podgroup)
            elif op.kind is OpKind.DELETE_PODGROUP and podgroup is not None:
                self.api.delete_podgroup(namespace, podgroup["metadata"]["name"])
            elif op.kind is OpKind.CREATE_PODS:
                self._create_pods(job, decision, gate, set(op.names), pods, podgroup)
            elif op.kind is OpKind.DELETE_PODS:
                for pod_name in op.names:
                    self.api.delete_pod(namespace, pod_name)

    # ---- elastic jobs: replicas and minAvailable may change while the job runs --------------------------------
    def _resize_podgroup(self, job: MutableObj, podgroup: MutableObj) -> None:
        """Bring the PodGroup's minimums and sub-groups up to the job's spec (a scaled job); a removed key is
        nulled (Volcano's updatePgSubGroupPolicy replaces subGroupPolicy whole when an entry differs)."""
        wanted = podgroup_for(job)["spec"]
        current = podgroup.get("spec") or {}
        patch: dict[str, Any] = {}
        if wanted.get("subGroupPolicy", []) != current.get("subGroupPolicy", []):
            patch["subGroupPolicy"] = wanted.get("subGroupPolicy")  # a list: a merge patch replaces it whole
        for key in ("minMember", "minTaskMember", "minResources"):
            new, old = wanted.get(key), current.get(key)
            if new == old:
                continue
            if isinstance(new, Mapping) and isinstance(old, Mapping):
                patch[key] = {**{k: None for k in old if k not in new}, **new}
            else:
                patch[key] = new
        if patch:
            meta = podgroup["metadata"]
            log.info("podgroup %s/%s resized: %s", meta["namespace"], meta["name"], patch)
            self.api.patch_podgroup_spec(meta["namespace"], meta["name"], patch)

    def _sync_hosts(self, job: MutableObj) -> None:
        """The svc plugin's hosts ConfigMap follows the replica counts (checked once per change of them)."""
        if not uses_svc(job):
            return
        meta = job["metadata"]
        uid = str(meta["uid"])
        wanted = svc_hosts(normalize_job(job))
        if self._hosts.get(uid) == wanted:
            return
        name = svc_configmap_name(job)
        current = self.api.get(f"/api/v1/namespaces/{meta['namespace']}/configmaps/{name}")
        if current is None:
            return  # not created yet: it is created with the current hosts
        data = current.get("data") or {}
        if data != wanted:
            log.info("job %s/%s: hosts ConfigMap %s updated", meta["namespace"], meta["name"], name)
            self.api.patch_configmap_data(meta["namespace"], name,
                                          {**{k: None for k in data if k not in wanted}, **wanted})
        self._hosts[uid] = wanted

    def _create_pods(
        self, job: MutableObj, decision: Decision, gate: str | None, names: set[str], pods: list[MutableObj],
        podgroup: MutableObj | None,
    ) -> None:
        uid = str(job["metadata"]["uid"])
        if uid not in self._plugin_objects:
            for obj in plugin_objects(job):  # before the pods: they mount the ConfigMap, resolve the Service
                self.api.create(obj)
            self._plugin_objects.add(uid)
        current = copy.deepcopy(job)
        current.setdefault("status", {})["version"] = decision.version  # pods carry the run they belong to
        existing = {p["metadata"]["name"] for p in pods}
        group = str(podgroup["metadata"]["name"]) if podgroup is not None else None  # the pods join the one found
        job_created = parse_time(job["metadata"].get("creationTimestamp"))
        wanted = [p for p in desired_pods(current, gate, existing, podgroup=group) if p["metadata"]["name"] in names]
        # All at once, as Volcano's controller creates a Job's pods (one goroutine each, then it waits for all:
        # pkg/controllers/job/job_controller_actions.go, syncJob): made one after another, a scheduling cycle
        # can run while a large Job is half created and give its room to a smaller, later one.
        futures = [(pod["metadata"]["name"], self._pod_pool.submit(self.api.create, pod)) for pod in wanted]
        failures: list[tuple[str, Exception]] = []
        for pod_name, future in futures:
            if future.cancelled():
                continue
            try:
                created = future.result()
            except (KubeError, OSError) as exc:
                failures.append((pod_name, exc))
                for _, later in futures:  # the creates not started yet: the next sync makes them
                    later.cancel()
                continue
            pod_created = parse_time(((created or {}).get("metadata") or {}).get("creationTimestamp"))
            if job_created and pod_created:  # volcano_controller_job_to_pod_creation_latency_milliseconds
                metrics.observe_pod_created(pod_created - job_created)
        if failures:
            # Said on the Job (event and condition, once per distinct answer), then raised: `Retries` runs the
            # sync again with its backoff (0.5 s doubling to 30 s), never in a hot loop. The first failure in pod
            # order is named: the same refusal gives the same message whichever later creates were cancelled.
            first, refused = failures[0]
            self.notes.say(job, FAILED_CREATE, f"Error creating pods: pod {first}: {answer_of(refused)}")
            raise AlreadySaidError(str(refused)) from refused  # said on the Job: its retries log at debug only
        self.notes.forget(uid, FAILED_CREATE)

    def _write_status(self, job: MutableObj, decision: Decision, event: JobEvent) -> None:
        meta = job["metadata"]
        old_phase = ((job.get("status") or {}).get("state") or {}).get("phase")
        note = ""
        if old_phase and old_phase != str(decision.phase):
            note = f"{old_phase} -> {decision.phase}: {decision.action}"
            if event.event != PolicyEvent.OUT_OF_SYNC:
                note += f" on {event.event}" + (f" of pod {event.pod}" if event.pod else "")
        now = self.clock()
        status = job_status(job, decision, now, note)
        if status == (job.get("status") or {}):
            return
        if self.api.replace_job_status(meta["namespace"], meta["name"], status) is None:
            return
        if note:
            queue, key = str((job.get("spec") or {}).get("queue") or "default"), f"{meta['namespace']}/{meta['name']}"
            metrics.observe_controllers(lambda m: m.record_job_phase(key, queue, str(decision.phase)))
            log.info("job %s/%s: %s", meta["namespace"], meta["name"], note)
            self.api.event({**job, "apiVersion": keys.JOB_API_VERSION, "kind": keys.JOB_KIND}, "Normal",
                           str(decision.phase), note, rfc3339(now))
            if decision.action != PolicyAction.SYNC_JOB:
                # Volcano's event for an action it runs (pkg/controllers/job/job_controller.go, processNextReq:
                # reason ExecuteAction); its e2e helper WaitJobTerminateAction looks for exactly this.
                self.api.event({**job, "apiVersion": keys.JOB_API_VERSION, "kind": keys.JOB_KIND}, "Normal",
                               EXECUTE_ACTION, f"Start to execute action {decision.action} ", rfc3339(now))
        job["status"] = status

    def _tell_waiting(self, job: MutableObj, uid: str, decision: Decision) -> None:
        """An event when a task starts being held back by dependsOn (once: not for every pod that gets ready)."""
        with self._guard:
            before = self._waiting.get(uid, set())
            now = set(decision.waiting)
            if now == before:
                return
            self._waiting[uid] = now
        for task, why in sorted(decision.waiting.items()):
            if task not in before:
                self.api.event({**job, "apiVersion": keys.JOB_API_VERSION, "kind": keys.JOB_KIND}, "Normal",
                               "TaskWaiting", f"task {task} {why} (dependsOn): its pods are not created yet",
                               rfc3339(self.clock()))

    # ---- timers ------------------------------------------------------------------------------------------
    def _arm_timers(self, job: MutableObj, decision: Decision) -> None:
        meta = job["metadata"]
        namespace, name, uid = str(meta["namespace"]), str(meta["name"]), str(meta["uid"])
        key = f"{namespace}/{name}"
        deferred = decision.deferred
        if deferred is not None:
            due = JobEvent(deferred.event, pod=deferred.pod, action=deferred.action)

            def fire() -> None:
                self.reconcile(namespace, name, due)

            self.timers.arm(key, f"policy/{deferred.event}/{deferred.pod}", deferred.seconds, fire)
        ttl = ttl_seconds(job)
        if decision.phase in FINISHED and ttl is not None:
            finished = parse_time(((job.get("status") or {}).get("state") or {}).get("lastTransitionTime"))
            delay = (finished or self.clock()) + ttl - self.clock()
            self.timers.arm(key, "ttl", delay, lambda: self._expire(namespace, name, uid))

    def _expire(self, namespace: str, name: str, uid: str) -> None:
        job = self.api.job(namespace, name)
        if job is None or job["metadata"].get("uid") != uid:
            return
        if expired(job, datetime.fromtimestamp(self.clock(), UTC)):
            log.info("job %s/%s: ttlSecondsAfterFinished passed, deleting it", namespace, name)
            self.api.delete_job(namespace, name, uid)
        else:  # not yet (clock skew, or the status changed): look again shortly
            self.timers.arm(f"{namespace}/{name}", "ttl", 1.0, lambda: self._expire(namespace, name, uid))
