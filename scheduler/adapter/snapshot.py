"""Layer `adapter`: the one function that builds a `ClusterSnapshot`, for the Kubernetes cache and the simulator.

Each adapter reads its objects into infos its own way: the cache through a parse cache that skips an unreadable
object with an event, the simulator refusing one when it is added. From those infos and the pods as they are now,
`build_snapshot` decides the same things for both:

- which gang a pod belongs to: the PodGroup its group-name annotation names (none there: the pod is not
  schedulable yet); for a pod naming none, the PodGroup the controllers made for it (`plain_group_of`) if that
  exists, else a gang of one of its own, unless the pod asks for a gang (`wants_gang`) and so waits for it; a
  pod of a JobSet or LeaderWorkerSet joins its owner gang (`api.owner_gang`) if that exists, else its per-Job
  PodGroup, and waits while neither does;
- where a pod is: its `nodeName`, or the node we bound it to a moment ago, which the watch has not shown yet
  (an assumed bind: never double-book);
- pods of other schedulers only take node resources;
- what a pending pod's PersistentVolumeClaims require of a node (`api.volumes.needs_of`, into its constraints),
  when the adapter models volumes (`storage`), once per distinct set of claims;
- the HyperNodes, passed on as served.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from scheduler.api.convert import group_of, implicit_job, plain_group_of, wants_gang
from scheduler.api.disruption import DisruptionBudget
from scheduler.api.dra import DraObjects
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.objects import Obj
from scheduler.api.owner_gang import owner_group_name
from scheduler.api.phases import TaskStatus
from scheduler.api.pod import Constraints, status_of, with_volumes
from scheduler.api.queue import QueueInfo
from scheduler.api.quota import ResourceQuotaInfo
from scheduler.api.reasons import Reason
from scheduler.api.snapshot import ClusterSnapshot
from scheduler.api.volumes import Storage, VolumeNeeds, needs_of

# A pod as the API serves it now, and its task as read once (`task_from_pod`): the builder clones the task and
# never changes it. A plain pair: a snapshot builds 20,000 of them at 5,000 nodes.
PodRecord = tuple[Obj, TaskInfo]


@dataclass(frozen=True, slots=True)
class SnapshotInputs:
    """Everything a snapshot is built from. Nodes, PodGroups and queues are fresh infos of this cycle: the
    builder adds tasks to them. Priority classes were applied when pods and PodGroups were read."""

    nodes: Iterable[NodeInfo]
    podgroups: Iterable[JobInfo]
    queues: Iterable[QueueInfo]
    pods: Iterable[PodRecord]
    now: float
    hypernodes: tuple[Obj, ...] = ()
    assumed: Mapping[str, str] = field(default_factory=dict)  # pod key -> node we bound it to, not seen yet
    storage: Storage | None = None  # None: volumes are not modelled, claims are ignored
    unreadable_queues: Mapping[str, tuple[Reason, ...]] = field(default_factory=dict)  # left out, and why
    disruption_budgets: tuple[DisruptionBudget, ...] = ()  # PodDisruptionBudgets, parsed (api/disruption.py)
    resource_quotas: tuple[ResourceQuotaInfo, ...] = ()  # ResourceQuotas' status, parsed (api/quota.py)
    # DRA objects, parsed (api/dra_parse.py), or how to read them: read only when a pending pod of ours names
    # claims, so a cycle without one walks none of them; None: not modelled
    dra: DraObjects | Callable[[], DraObjects | None] | None = None


@dataclass(frozen=True, slots=True)
class AdapterRules:
    """What a cluster adapter is configured with: which pods are ours, and the queue of a job naming none."""

    scheduler_names: frozenset[str]
    default_queue: str = "default"


def build_snapshot(inputs: SnapshotInputs, rules: AdapterRules) -> ClusterSnapshot:
    nodes = {node.name: node for node in inputs.nodes}
    jobs = {job.key: job for job in inputs.podgroups}
    ours, assumed, default_queue = rules.scheduler_names, inputs.assumed, rules.default_queue
    others: list[PodRecord] = []
    orphans: list[tuple[str, str, float]] = []
    claims = ClaimResolver(inputs.storage) if inputs.storage is not None else None
    devices_wanted = False  # some pending pod of ours names DRA claims: only then is DRA modelled this cycle
    named_by_others: set[str] = set()  # the jobs other schedulers' pods name, and those our pods are in
    named_by_ours: set[str] = set()
    for manifest, base in inputs.pods:
        scheduler = (manifest.get("spec") or {}).get("schedulerName", "default-scheduler")
        if type(scheduler) is not str or scheduler not in ours:  # api/fields.py: an unreadable name is not ours
            others.append((manifest, base))
            named_by_others.add(base.job)
            continue
        task = current_task(manifest, base, assumed)
        if claims is not None and task.claims and task.status is TaskStatus.PENDING:
            task.constraints = claims.constraints(task)
        if task.device_claims is not None and task.status is TaskStatus.PENDING:
            devices_wanted = True
        job = jobs.get(task.job) or gang_of(manifest, task, jobs, default_queue)
        if job is None:
            if task.node_name:  # bound, its PodGroup gone (or not seen yet): it still uses its node, as in
                others.append((manifest, base))  # Volcano's cache (pkg/scheduler/cache/event_handlers.go addTask)
            elif task.status is TaskStatus.PENDING:
                orphans.append((task.key, task.job.partition("/")[2] or task.job, task.creation))
            continue
        job.add_task(task)
        named_by_ours.add(job.key)
        node = nodes.get(task.node_name)
        if node is not None:
            node.add_task(task)
    account_others(nodes, jobs, others, assumed)
    # A PodGroup whose pods all name another scheduler is that scheduler's gang: we neither enqueue, place nor
    # write it. Volcano's cache takes every PodGroup (pkg/scheduler/cache/cache.go filters them only by the
    # multi-scheduler hash), so two schedulers of different names write each other's PodGroups, one Running and
    # the other what it sees with none of the pods; volcano-py leaves them alone (CONFORMANCE.md). A PodGroup no
    # pod names yet is everyone's, as in Volcano (a Job's pods are made once its PodGroup is Inqueue). After
    # `account_others`, which reads the jobs as they were.
    for key in named_by_others - named_by_ours:
        jobs.pop(key, None)
    queues = {queue.name: queue for queue in inputs.queues}
    storage = inputs.storage
    if storage is not None and claims is not None and claims.binding:  # the adapter's Storage is left as it is
        storage = replace(storage, binding=True)
    return ClusterSnapshot(nodes, jobs, queues, inputs.now, tuple(inputs.hypernodes), storage,
                           dict(inputs.unreadable_queues), tuple(orphans), tuple(inputs.disruption_budgets),
                           tuple(inputs.resource_quotas), dra=_dra(inputs.dra) if devices_wanted else None)


def _dra(dra: DraObjects | Callable[[], DraObjects | None] | None) -> DraObjects | None:
    return dra() if callable(dra) else dra


def account_others(
    nodes: Mapping[str, NodeInfo], jobs: Mapping[str, JobInfo], others: Iterable[PodRecord],
    assumed: Mapping[str, str],
) -> None:
    """Pods of other schedulers still use node resources. Most pods of a large cluster are these, made from a few
    templates, so each run of them with one node, request and status is accounted at once; and a bound one whose
    job is not in the snapshot is never changed by a session (no plan places it; victims are tasks of jobs), so
    the task read at its resourceVersion is shared rather than copied."""
    runs: dict[tuple[str, int, TaskStatus], list[TaskInfo]] = {}
    for manifest, base in others:
        task = base if base.node_name and base.job not in jobs else current_task(manifest, base, assumed)
        runs.setdefault((task.node_name, id(task.resreq), task.status), []).append(task)
    for (node_name, _, _), run in runs.items():
        node = nodes.get(node_name)
        if node is not None:
            node.add_tasks(run)


class ClaimResolver:
    """A pending pod's constraints with what its claims require, worked out once per distinct set of claims (the
    pods of a gang that share one claim, or none of their own, share it)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.binding = False  # some pending pod has a claim to bind
        self._needs: dict[tuple[str, ...], VolumeNeeds | None] = {}
        self._made: dict[tuple[Constraints, VolumeNeeds], Constraints] = {}

    def constraints(self, task: TaskInfo) -> Constraints:
        if task.claims not in self._needs:
            self._needs[task.claims] = needs_of(task.claims, self.storage)
        needs = self._needs[task.claims]
        if needs is None:
            return task.constraints
        if needs.to_bind:
            self.binding = True
        key = (task.constraints, needs)
        made = self._made.get(key)
        if made is None:
            made = self._made[key] = with_volumes(task.constraints, needs)
        return made


def current_task(manifest: Obj, base: TaskInfo, assumed: Mapping[str, str]) -> TaskInfo:
    """The pod's task with its status and node as they are now (or as our bind made them)."""
    task = base.clone()
    spec = manifest.get("spec") or {}
    task.status = status_of(manifest)
    task.node_name = str(spec.get("nodeName") or "")
    if not task.node_name and assumed:
        node = assumed.get(task.key)
        if node:
            task.node_name = node
            task.status = status_of({**manifest, "spec": {**spec, "nodeName": node}})
    return task


def owner_group_of(pod: Obj, task: TaskInfo) -> str | None:
    """The key of the owner gang (api/owner_gang.py) a plain pod's labels name, or None."""
    name = owner_group_name(task.labels) if task.labels else None
    return f"{task.namespace}/{name}" if name is not None else None


def gang_of(pod: Obj, task: TaskInfo, jobs: dict[str, JobInfo], default_queue: str) -> JobInfo | None:
    """The job `task` joins; None if it is not schedulable yet. May set `task.job` and add an implicit job to
    `jobs`. A plain pod's PodGroup is named as Volcano's podgroup controller names it, `podgroup-<owner uid>`
    (pkg/controllers/podgroup/pg_controller_handler.go)."""
    job = jobs.get(task.job)
    if job is not None:
        return job
    if group_of(pod) != task.key:
        return None  # names a PodGroup that does not exist (yet): not schedulable
    owner = owner_group_of(pod, task)  # a JobSet's or LeaderWorkerSet's gang, from the pod's labels
    made = jobs.get(owner or "")
    if made is not None:
        task.job = made.key
        return made
    plain = jobs.get(plain_group_of(pod) or "")  # the PodGroup the controllers made for it
    if plain is not None:
        task.job = plain.key
        return plain
    if owner is not None or wants_gang(pod):
        return None  # a gang member whose PodGroup is not there yet never runs alone
    job = jobs[task.job] = implicit_job(task, default_queue=default_queue)
    return job
