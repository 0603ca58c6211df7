"""Layer `adapter`: a snapshot kept from cycle to cycle and updated by the changes, equal to `build_snapshot`'s.

`IncrementalSnapshot.build(inputs, delta)` returns what `build_snapshot(inputs, rules)` returns, with the same
infos in the same order (nodes, jobs, each job's and node's tasks, orphans), but rebuilds only:

- the jobs whose PodGroup changed, a pod of which changed, came or went, or that the last session changed;
- the nodes that changed, a pod on which (as read, or as the last snapshot placed it) changed, or that the last
  session changed;
- every pending pod of ours with volume claims (what its claims require may change with the storage objects);
- the pods whose assumed bind changed, and those whose gang may change because a job they could join came or
  went (each pod is indexed under the job keys `build_snapshot` may look it up by).

The infos are handed to the session itself, not copies: a session changes a job or a node only through their
own methods (`JobInfo.add_task`, `set_status`, `NodeInfo.add_task`, `add_tasks`, `remove_task`), which mark it
`touched`, and a task only together with its job or its node (`framework/backend.py`), so the next build
rebuilds what the session changed and reuses the rest; a job's phase and minAvailable, which a session sets
directly, are reset from the PodGroup as read. Queues, HyperNodes, storage, budgets, quotas and DRA objects are
few and taken from `inputs` as they are each cycle.

`delta=None` builds everything from `inputs` (nodes, PodGroups and pods complete): the first snapshot, and the one
after anything that changes every pod (a PriorityClass). A `Delta` names only what changed since the last build;
the pods, nodes and PodGroups of `inputs` are then not read. The same mechanism builds from a subset: a delta
may bring a node and its pods later than the rest (a first cycle on a partial view).

Not modelled: a PodGroup whose key is also the key of a pod of ours without a PodGroup (the implicit gang of one
`build_snapshot` makes under the pod's key): the order in which `build_snapshot` meets the two then decides, and
this builder may decide otherwise. Keys are namespace/name for both, so only a pod and a PodGroup of one name can.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace
from operator import itemgetter

from scheduler.adapter.keysets import KeySets
from scheduler.adapter.node_fill import fill, less, load_of
from scheduler.adapter.snapshot import (
    AdapterRules,
    ClaimResolver,
    PodRecord,
    SnapshotInputs,
    _dra,
    current_task,
    gang_of,
    owner_group_of,
)
from scheduler.api.convert import plain_group_of
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.objects import Obj
from scheduler.api.phases import TaskStatus
from scheduler.api.snapshot import ClusterSnapshot, Lineage

IN_JOB, OTHER, ORPHAN, NONE = range(4)  # what `build_snapshot` made of a pod

# A JobInfo's fields a build or a session keeps with its tasks (the tasks, their counts and sum, the session's
# marks); every other field is read from its PodGroup (its spec, metadata and status, as parsed): `_reuse` takes
# those from the PodGroup as read now.
_KEPT_FIELDS = frozenset({"tasks", "by_status", "pending_best_effort", "ready", "touched", "held", "journal", "moves",
                          "subs"})
_READ_FIELDS = tuple(f.name for f in fields(JobInfo) if f.name not in _KEPT_FIELDS)


@dataclass(slots=True)
class Delta:
    """What changed since the last build, by key: the new value, or None for gone."""

    pods: dict[str, PodRecord | None] = field(default_factory=dict)
    nodes: dict[str, NodeInfo | None] = field(default_factory=dict)  # as read, with no tasks (not changed here)
    podgroups: dict[str, JobInfo | None] = field(default_factory=dict)  # as read, with no tasks
    renewed: set[str] = field(default_factory=set)  # pods that went and came back: they take a new place, last
    renewed_nodes: set[str] = field(default_factory=set)  # likewise nodes
    renewed_podgroups: set[str] = field(default_factory=set)  # likewise PodGroups

    def __bool__(self) -> bool:
        return bool(self.pods or self.nodes or self.podgroups)


@dataclass(slots=True, eq=False)
class _Pod:
    seq: int  # its place in the pods' order (a pod that changes keeps it; one that comes back gets a new one)
    manifest: Obj
    base: TaskInfo
    kind: int = NONE
    job: str = ""  # the job it is in (IN_JOB)
    task: TaskInfo | None = None  # the task in the snapshot (IN_JOB, OTHER)
    status: TaskStatus = TaskStatus.PENDING  # the task's status and node as built: a session changed the task
    node: str = ""  # if either differs (the node whose accounting has it, if that node exists)
    keys: tuple[str, ...] = ()  # the job keys its gang is looked up by
    names: str = ""  # another scheduler's pod: the job it names
    orphan: tuple[str, str, float] | None = None


class IncrementalSnapshot:
    def __init__(self, rules: AdapterRules) -> None:
        self.rules = rules
        self._seq = 0
        self.pods: dict[str, _Pod] = {}
        self.templates: dict[str, JobInfo] = {}  # job key -> as read (PodGroups) or made (implicit), no tasks
        self.podgroups: dict[str, None] = {}  # PodGroup keys, in the adapter's order
        self.implicit: dict[str, int] = {}  # implicit job key -> its pod's seq
        self.jobs: dict[str, JobInfo] = {}  # as built, every job
        self.members: dict[str, dict[str, int]] = {}  # job key -> its pods' keys -> their seq
        self.bases: dict[str, NodeInfo] = {}  # node name -> as read, in the adapter's order
        self.nodes: dict[str, NodeInfo] = {}  # as built
        self.on_node: dict[str, dict[str, None]] = {}  # node name -> keys of pods accounted there (node or not)
        self.by_key = KeySets()  # job key -> pods whose gang it may be
        self.claimed: set[str] = set()  # pending pods of ours with volume claims: made again every build
        self.devices: set[str] = set()  # pending pods of ours with DRA claims
        self.orphans: set[str] = set()  # pending pods of ours whose PodGroup does not exist
        self.named = KeySets()  # job key -> other schedulers' pods naming it (none of ours: not a job)
        self.assumed: dict[str, str] = {}
        self.rebuilt = (0, 0, 0)  # (pods, jobs, nodes) the last build made afresh: for tests and benchmarks
        # Nodes whose pods changed but that were not rebuilt, as `build`'s `defer` asked: their infos in `nodes`
        # hold the usage of an earlier build until `refresh` (or a build without `defer`) makes them again.
        self.deferred: set[str] = set()
        self.token: object | None = None  # the last snapshot's `Lineage.token` (None: none built, or one failed)
        self.joined: set[str] = set()  # this build: the jobs a pod was made again into (`_resolve`)
        # this build: the nodes a pod was made again onto, or another scheduler's pod left (their tasks' order may
        # not be their last build's less the pods that went: `_build_node`)
        self.reordered: set[str] = set()
        # Each JobInfo and NodeInfo this builder makes is given these (`JobInfo.journal`, `JobInfo.moves`,
        # `NodeInfo.journal`): the keys of the jobs a session touched or set the phase or minAvailable of, of the
        # tasks it set the status (and node) of, and the names of the nodes it touched, which the next build looks
        # at (`_session_changes`) instead of every job, pod and node.
        self.job_journal: list[str] = []
        self.task_journal: list[str] = []
        self.node_journal: list[str] = []

    # ---- the build --------------------------------------------------------------------------------------
    def build(self, inputs: SnapshotInputs, delta: Delta | None,
              defer: Callable[[str], bool] | None = None,
              undefer: Callable[[set[str]], set[str]] | None = None) -> ClusterSnapshot:
        """`defer(name)`: whether a node outside the caller's sessions may keep its stale usage for now (see
        `deferred`); a node whose object changed, a new one and a gone one are made anyway, so every node's name,
        labels and allocatable are current. The caller makes a deferred node it hands to a session current first
        (`refresh`). `undefer(names)`: those of `names` `defer` no longer defers, in one set operation (else each
        is asked: tens of thousands of nodes deferred at 50,000)."""
        dirty_pods: set[str] = set()
        self.joined, self.reordered = set(), set()
        dirty_jobs: set[str] = set()
        dirty_nodes: set[str] = set()
        since, self.token = self.token, None  # (a build that fails half way is followed by one without a lineage)
        if delta is None:
            since = None
            self.__init__(self.rules)  # type: ignore[misc]
            delta = Delta({t.key: (m, t) for m, t in inputs.pods}, {n.name: n for n in inputs.nodes},
                          {j.key: j for j in inputs.podgroups})
        else:
            self._session_changes(dirty_pods, dirty_jobs, dirty_nodes)
        self._apply(delta, dirty_pods, dirty_jobs, dirty_nodes)
        assumed = dict(inputs.assumed)
        for key in self.assumed.keys() ^ assumed.keys() | {k for k, v in assumed.items() if self.assumed.get(k) != v}:
            if key in self.pods:
                dirty_pods.add(key)
        self.assumed = assumed
        dirty_pods.update(self.claimed)
        claims = ClaimResolver(inputs.storage) if inputs.storage is not None else None
        self._resolve(dirty_pods, dirty_jobs, dirty_nodes, claims)
        for key in dirty_jobs:
            self._build_job(key)
        added = False
        deferred = self.deferred
        # the nodes deferred before this build are made from scratch (`_build_node`): `deferred` itself names them
        # while they are looked at, unless it is emptied here (no `defer`: then few or none, copied)
        stale: set[str] | None = None
        if defer is None:
            stale = set(deferred)
            dirty_nodes |= deferred
            deferred.clear()
        else:
            dirty_nodes |= undefer(deferred) if undefer is not None else {n for n in deferred if not defer(n)}
        for name in dirty_nodes:
            if defer is not None and name in self.nodes and name not in delta.nodes and defer(name):
                deferred.add(name)
                continue
            scratch = name in (deferred if stale is None else stale)
            deferred.discard(name)
            added = self._build_node(name, scratch=scratch) or added
        if added:  # in the adapter's order, as build_snapshot has them
            self.nodes = {name: self.nodes[name] for name in self.bases if name in self.nodes}
        self.rebuilt = (len(dirty_pods), len(dirty_jobs), len(dirty_nodes) - len(deferred & dirty_nodes))
        named, members, built, podgroups = self.named, self.members, self.jobs, self.podgroups
        if named:
            jobs = {key: built[key] for key in podgroups if key not in named or members.get(key)}
        else:  # (no other scheduler's pod names a PodGroup, as in most clusters: every PodGroup is a job)
            jobs = {key: built[key] for key in podgroups}
        jobs.update((key, built[key]) for key in self.implicit)
        orphans = sorted((self.pods[key].seq, self.pods[key].orphan) for key in self.orphans)
        storage = inputs.storage
        if storage is not None and claims is not None and claims.binding:
            storage = replace(storage, binding=True)
        self.token = object()
        return ClusterSnapshot(dict(self.nodes), jobs, {q.name: q for q in inputs.queues}, inputs.now,
                               tuple(inputs.hypernodes), storage, dict(inputs.unreadable_queues),
                               tuple(o for _, o in orphans), tuple(inputs.disruption_budgets),  # type: ignore[misc]
                               tuple(inputs.resource_quotas), dra=_dra(inputs.dra) if self.devices else None,
                               lineage=Lineage(since, self.token, frozenset(dirty_jobs)))

    def refresh(self, names: Iterable[str]) -> dict[str, NodeInfo]:
        """The deferred nodes among `names` made current (as the last build would have made them), by name."""
        fresh = {}
        for name in names:
            if name in self.deferred:
                self.deferred.discard(name)
                self._build_node(name, scratch=True)
                if name in self.nodes:
                    fresh[name] = self.nodes[name]
        return fresh

    def _session_changes(self, dirty_pods: set[str], dirty_jobs: set[str], dirty_nodes: set[str]) -> None:
        """What the last session changed: its jobs and nodes are rebuilt, the tasks it moved made again, and a
        phase or minAvailable it set is put back as read. The tasks looked at (each once) are those it set the
        status of (the task journal: a session changes a task's status only by `JobInfo.set_status`, and its node
        with its status, `framework/backend.py`) and, on each node it touched, those that came or went
        (`NodeInfo.tasks` against the pods the last build put there: a task put on a node alone is seen too), not
        every pod of the jobs and nodes it touched."""
        looked: set[str] = set(self.task_journal)
        self.task_journal.clear()
        templates, jobs, nodes = self.templates, self.jobs, self.nodes
        for key in set(self.job_journal):  # (the jobs the session touched or set the phase of: the journal)
            job = jobs.get(key)
            if job is None:
                continue
            template = templates[key]
            if job.phase is not template.phase:
                job.phase = template.phase
            if job.min_available != template.min_available:
                job.min_available = template.min_available
            if job.touched:
                dirty_jobs.add(key)
        self.job_journal.clear()
        on_node = self.on_node
        none: dict[str, None] = {}
        for name in set(self.node_journal):
            node = nodes.get(name)
            if node is not None and node.touched:  # the tasks the session put there or took off (even one whose
                dirty_nodes.add(name)  # job it did not mark: it is made again, and its job with it)
                looked.update(node.tasks.keys() ^ on_node.get(name, none).keys())
        self.node_journal.clear()
        pods = self.pods
        for key in looked:
            pod = pods.get(key)  # (a task a session put on a node may be of a pod gone since)
            task = pod.task if pod is not None else None
            if pod is not None and task is not None and (task.status is not pod.status or task.node_name != pod.node):
                dirty_pods.add(key)

    def _apply(self, delta: Delta, dirty_pods: set[str], dirty_jobs: set[str], dirty_nodes: set[str]) -> None:
        for key, record in delta.pods.items():
            old = self.pods.get(key)
            if old is not None:
                self._forget(key, old, dirty_jobs, dirty_nodes)
                if record is None:
                    del self.pods[key]
                    continue
            if record is None:
                continue
            if old is None or key in delta.renewed:
                self._seq += 1
                self.pods[key] = _Pod(self._seq, record[0], record[1])
            else:
                old.manifest, old.base = record
            dirty_pods.add(key)
        for name, base in delta.nodes.items():
            dirty_nodes.add(name)
            if base is None or name in delta.renewed_nodes:
                self.bases.pop(name, None)
                self.nodes.pop(name, None)
            if base is not None:
                self.bases[name] = base
        for key, template in delta.podgroups.items():
            existed = key in self.podgroups
            if template is not None and existed and key in delta.renewed_podgroups:
                del self.podgroups[key]  # (its job is rebuilt: it stays a job, in its new place)
                self.podgroups[key] = None
            if template is None:
                if existed:
                    del self.podgroups[key]
                    self._job_gone(key, dirty_pods, dirty_jobs)
                continue
            self.templates[key] = template
            self.podgroups[key] = None
            dirty_jobs.add(key)
            if not existed:
                if key in self.implicit:  # a pod's gang of one had this key: it goes, the PodGroup takes it
                    del self.implicit[key]
                    dirty_pods.update(self.members.get(key, {}).keys())
                dirty_pods.update(self.by_key.get(key))

    def _job_gone(self, key: str, dirty_pods: set[str], dirty_jobs: set[str]) -> None:
        self.templates.pop(key, None)
        self.implicit.pop(key, None)
        dirty_pods.update(self.members.get(key, {}).keys())
        dirty_pods.update(self.by_key.get(key))
        dirty_jobs.add(key)

    def _forget(self, key: str, pod: _Pod, dirty_jobs: set[str], dirty_nodes: set[str]) -> None:
        """Take the pod out of whatever the last build put it in (it is made again, or gone)."""
        if pod.kind == IN_JOB:
            dirty_jobs.add(pod.job)
            members = self.members.get(pod.job)
            if members is not None:
                members.pop(key, None)
            if pod.job == key and key in self.implicit:  # its gang of one goes with it (made again if it stays)
                del self.implicit[key]
                self.templates.pop(key, None)
        for name in (pod.node, pod.task.node_name if pod.task is not None else ""):
            if name:
                dirty_nodes.add(name)
                if pod.kind == OTHER:  # (other schedulers' tasks go in runs: one leaving may reorder the rest)
                    self.reordered.add(name)
                on = self.on_node.get(name)
                if on is not None:
                    on.pop(key, None)
        for job_key in pod.keys:
            self.by_key.discard(job_key, key)
        if pod.names:
            dirty_jobs.add(pod.names)
            self.named.discard(pod.names, key)
        self.orphans.discard(key)
        self.claimed.discard(key)
        self.devices.discard(key)
        pod.kind, pod.job, pod.task, pod.node, pod.keys, pod.orphan, pod.names = NONE, "", None, "", (), None, ""

    # ---- one pod, as build_snapshot reads it ----------------------------------------------------------------
    def _resolve(self, dirty_pods: set[str], dirty_jobs: set[str], dirty_nodes: set[str],
                 claims: ClaimResolver | None) -> None:
        ours, assumed, default_queue = self.rules.scheduler_names, self.assumed, self.rules.default_queue
        # (a pod the last session moved may be gone since) Not `intersection_update(self.pods)`: with a dict it
        # costs in proportion to the dict's entries, not the set's (30-85 ms a build at 550,000 pods against
        # 0.2 ms for this, the b500 profile in docs/benchmarks-history.md)
        pods = self.pods
        dirty_pods.difference_update([key for key in dirty_pods if key not in pods])
        for key in sorted(dirty_pods, key=lambda k: self.pods[k].seq):  # in order: implicit gangs as cold
            pod = self.pods[key]
            self._forget(key, pod, dirty_jobs, dirty_nodes)
            manifest, base = pod.manifest, pod.base
            scheduler = (manifest.get("spec") or {}).get("schedulerName", "default-scheduler")
            if type(scheduler) is not str or scheduler not in ours:
                # Only the job it names decides how it is accounted (`account_others`): keyed by that alone (most
                # pods of a large cluster: no owner's or plain PodGroup's key kept for each)
                pod.keys = (base.job,)
                self.by_key.add(base.job, key)
                self._other(key, pod, dirty_nodes)
                pod.names = base.job  # a PodGroup only other schedulers' pods name is not ours (`build_snapshot`)
                self.named.add(base.job, key)
                dirty_jobs.add(base.job)
                continue
            owner = owner_group_of(manifest, base)
            pod.keys = tuple(k for k in dict.fromkeys((base.job, owner, plain_group_of(manifest))) if k)
            for job_key in pod.keys:
                self.by_key.add(job_key, key)
            task = current_task(manifest, base, assumed)
            pending = task.status is TaskStatus.PENDING
            if task.claims and pending:  # made again every build, whether volumes are modelled now or not
                self.claimed.add(key)
                if claims is not None:
                    task.constraints = claims.constraints(task)
            if task.device_claims is not None and pending:
                self.devices.add(key)
            template = self.templates.get(task.job)
            if template is None:
                before = len(self.templates)
                template = gang_of(manifest, task, self.templates, default_queue)
                if template is not None and len(self.templates) > before:  # its gang of one, made now
                    self.implicit[template.key] = pod.seq
                    self._order_implicit()
            if template is None:
                if task.node_name:
                    self._other(key, pod, dirty_nodes)
                elif pending:
                    pod.orphan = (task.key, task.job.partition("/")[2] or task.job, task.creation)
                    self.orphans.add(key)
                continue
            pod.kind, pod.job, pod.task = IN_JOB, template.key, task
            pod.status, pod.node = task.status, task.node_name
            self.members.setdefault(template.key, {})[key] = pod.seq
            self.joined.add(template.key)
            dirty_jobs.add(template.key)
            if task.node_name:
                self.on_node.setdefault(task.node_name, {})[key] = None
                self.reordered.add(task.node_name)
                dirty_nodes.add(task.node_name)

    def _order_implicit(self) -> None:
        """Implicit jobs in their pods' order, as `build_snapshot` meets them (a new one is nearly always last)."""
        if len(self.implicit) < 2:
            return
        last = reversed(self.implicit.values())
        if next(last) < next(last):
            self.implicit = dict(sorted(self.implicit.items(), key=lambda kv: kv[1]))

    def _other(self, key: str, pod: _Pod, dirty_nodes: set[str]) -> None:
        """A pod that only takes node resources (`account_others`); the job it names decides whether its task is
        shared or made, which is known once every pod is resolved: `_build_node` makes it."""
        pod.kind = OTHER
        base = pod.base  # the node `_make_other`'s task will name
        if base.node_name and base.job not in self.templates:
            name = base.node_name
        else:
            name = str((pod.manifest.get("spec") or {}).get("nodeName") or "") or self.assumed.get(key, "")
        pod.node = name
        if name:
            self.on_node.setdefault(name, {})[key] = None
            self.reordered.add(name)
            dirty_nodes.add(name)

    # ---- jobs and nodes --------------------------------------------------------------------------------------
    def _build_job(self, key: str) -> None:
        template = self.templates.get(key)
        old = self.jobs.pop(key, None)
        if template is None:  # gone
            self.members.pop(key, None)
            return
        members = self.members.get(key, {})
        if (old is not None and not old.touched and key not in self.joined and not template.sub_groups
                and not old.sub_groups):
            gone = self._only_gone(old, members)
            if gone is not None:
                self._reuse(old, template, gone)
                self.jobs[key] = old
                return
        job = template.clone()
        pods = self.pods
        for pod_key, _ in sorted(members.items(), key=itemgetter(1)):
            task = pods[pod_key].task
            assert task is not None
            job.add_task(task)
        job.touched, job.journal, job.moves = False, self.job_journal, self.task_journal
        self.jobs[key] = job

    @staticmethod
    def _reuse(old: JobInfo, template: JobInfo, gone: list[TaskInfo]) -> None:
        """`old` (the job's last build, untouched since, no pod made again into it) made what a build from
        `template` and its members would make, in place: every field read from the PodGroup taken from
        `template`, the tasks in `gone` taken off (the rest keep their order, counts and sum). Most jobs a warm
        cycle rebuilds are so: a running gang that lost a pod, or one whose status and reasons the last session
        wrote, read back. The job stays among the lineage's changed jobs: every part of the session works it
        out again."""
        for name in _READ_FIELDS:
            setattr(old, name, getattr(template, name))
        if gone:
            old.drop_tasks(gone)

    @staticmethod
    def _only_gone(old: JobInfo, members: dict[str, int]) -> list[TaskInfo] | None:
        """The tasks of `old` whose pods are no longer members, for a job no pod was made again into in this build
        (`joined`): its members are then tasks of `old` (the very TaskInfos, in the order `old` has them: a
        session that did not change the job kept the order it was built in). None if not so after all."""
        tasks = old.tasks
        if len(members) == len(tasks):
            return []
        gone = [tasks[key] for key in tasks.keys() - members.keys()]
        return gone if len(tasks) - len(gone) == len(members) else None

    def _build_node(self, name: str, *, scratch: bool = False) -> bool:
        """Build the node; True if it is new to the snapshot. From its last build when that holds (`less`,
        `load_of`), unless `scratch`: a deferred node's last build missed the changes of the builds since, and a
        session may have changed its tasks through their jobs meanwhile."""
        base = self.bases.get(name)
        if base is None:
            self.nodes.pop(name, None)
            return False
        node = base.clone_empty()
        old = None if scratch else self.nodes.get(name)
        if old is not None and not old.touched and name not in self.reordered and less(
                old, self.on_node.get(name, {}), base, node):
            node.journal = self.node_journal
            self.nodes[name] = node  # its last build less the pods that went, in the order it had
            return False
        ours: list[_Pod] = []
        others: list[_Pod] = []
        for pod_key in self.on_node.get(name, ()):
            pod = self.pods[pod_key]
            (ours if pod.kind == IN_JOB else others).append(pod)
        tasks: list[TaskInfo] = [pod.task for pod in sorted(ours, key=lambda p: p.seq)]  # type: ignore[misc]
        runs: dict[tuple[int, TaskStatus], list[TaskInfo]] = {}
        for pod in sorted(others, key=lambda p: p.seq):
            if pod.task is None or pod.task.status is not pod.status or pod.task.node_name != pod.node:
                self._make_other(pod)
            task = pod.task
            assert task is not None
            runs.setdefault((id(task.resreq), task.status), []).append(task)
        for run in runs.values():
            tasks.extend(run)
        if old is None or not load_of(old, tasks, base, node):
            fill(node, tasks)
        new = name not in self.nodes
        node.journal = self.node_journal
        self.nodes[name] = node  # a node keeps its place
        return new

    def _make_other(self, pod: _Pod) -> None:
        base = pod.base
        task = base if base.node_name and base.job not in self.templates else current_task(
            pod.manifest, base, self.assumed)
        pod.task, pod.status = task, task.status
