"""Layer `framework`: what a plugin builds on — the `Plugin` base class and `SessionAPI`, the session as a plugin
sees it.

A plugin gets a `SessionAPI` when a session opens, and the same one when it closes. Through it, it reads the
snapshot, asks which nodes a task may go to, and writes what it learned (conditions, events, queue shares). It
cannot place tasks (only actions do, through a Statement) nor run the extension points: what it serves, it serves
as methods the runtime finds (`runtime.py`). Every member is listed here, with what it is for: a plugin needs
nothing else of the session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from operator import is_
from typing import Any, ClassVar, Generic, TypeVar, cast

from scheduler.api.decision import Status
from scheduler.api.disruption import DisruptionBudget
from scheduler.api.dra import ClaimWrite, DraObjects
from scheduler.api.job import Condition, JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.quota import ResourceQuotaInfo
from scheduler.api.resources import Resource
from scheduler.api.snapshot import VolumeBind
from scheduler.api.topology import NodeDomains
from scheduler.api.usage import QueueUsage
from scheduler.api.volumes import Storage
from scheduler.framework import points as P
from scheduler.framework.arrays import IntArray, NodeArrays
from scheduler.framework.backend import StatementBackEnd
from scheduler.framework.carry import JobChanges, moved
from scheduler.framework.conf import PluginOption, SchedulerConf
from scheduler.framework.conf_args import NO_ARGS, ArgReader, parse_unloaded
from scheduler.framework.faults import Faults, JobGuard
from scheduler.framework.fit import FeasibilityCache, FitErrors
from scheduler.framework.order import Orderings
from scheduler.framework.results import ResultsCollector

__all__ = ["Plugin", "SessionAPI"]

ArgsT = TypeVar("ArgsT", covariant=True)


class SessionAPI:
    """The session, as a plugin sees it (one per session, shared by its plugins).

    Snapshot data, to read: `jobs` (by uid), `queues` (by name), `node_list` (by name), `hypernodes`, `now`,
    `conf`, `storage` (PersistentVolumes, claims and StorageClasses; None when volumes are not modelled);
    `disruption_budgets`, the PodDisruptionBudgets (`api.disruption`), each field parsed;
    `resource_quotas`, the ResourceQuotas' status (`api.quota`), each field parsed;
    `arrays`, the nodes' resources as arrays in `node_list` order (the Statement keeps them current);
    `domains`, the nodes' topology domains per label key, by the same positions (`api.topology`);
    `trace`, where a plugin may explain its decisions when the cycle is traced (None when it is not);
    `queue_allocation_gate`, Volcano's feature gate SchedulingGatesQueueAdmission (`api.snapshot`);
    `dra`, the DRA objects (`api.dra`: slices, classes, claims, templates; None when DRA is not modelled);
    `changes`, which jobs changed since the last session and each plugin's store of per-job work (`carry.py`).
    """

    __slots__ = ("jobs", "queues", "node_list", "hypernodes", "now", "conf", "arrays", "domains", "trace",
                 "storage", "disruption_budgets", "resource_quotas", "queue_allocation_gate", "dra", "changes",
                 "_order", "_fit", "_results", "_total", "_used",
                 "_requests", "_faults")

    def __init__(
        self,
        *,
        jobs: dict[str, JobInfo],
        queues: dict[str, QueueInfo],
        node_list: list[NodeInfo],
        hypernodes: tuple[Mapping[str, Any], ...],
        now: float,
        conf: SchedulerConf,
        arrays: NodeArrays,
        domains: NodeDomains,
        trace: Callable[[str], None] | None,
        storage: Storage | None,
        disruption_budgets: tuple[DisruptionBudget, ...] = (),
        resource_quotas: tuple[ResourceQuotaInfo, ...] = (),
        order: Orderings,
        fit: FeasibilityCache,
        results: ResultsCollector,
        requests: StatementBackEnd,
        faults: Faults,
        queue_allocation_gate: bool = False,
        dra: DraObjects | None = None,
        changes: JobChanges | None = None,
    ) -> None:
        self.jobs = jobs
        self.queues = queues
        self.node_list = node_list
        self.hypernodes = hypernodes
        self.now = now
        self.conf = conf
        self.arrays = arrays
        self.domains = domains
        self.trace = trace
        self.storage = storage
        self.disruption_budgets = disruption_budgets
        self.resource_quotas = resource_quotas
        self.queue_allocation_gate = queue_allocation_gate
        self.dra = dra
        self.changes = changes if changes is not None else JobChanges(None, None)
        self._total: Resource | None = None
        self._used: Resource | None = None
        self._order = order
        self._fit = fit
        self._results = results
        self._requests = requests
        self._faults = faults

    # ---- a plugin's own per-job work ------------------------------------------------------------------
    def guard(self, job: JobInfo) -> JobGuard:
        """`with ssn.guard(job): ...` around the plugin's own work on one job (a per-job loop at open or close): an
        exception there faults that job alone, as in the actions (`faults.py`)."""
        return self._faults.guard(job)

    # ---- questions -----------------------------------------------------------------------------------
    def allocatable_total(self) -> Resource:
        """Every node's allocatable summed, the pods count included: worked out once per session."""
        if self._total is None:
            # the last session's sum stands while every node's allocatable is the very object it summed (a
            # Resource does not change; the snapshot shares it from the node as read)
            kept = self.changes.store("allocatable") if self.changes.keeps else {}
            resources = [node.allocatable for node in self.node_list]
            last = kept.get("resources")
            if last is not None and len(last) == len(resources) and all(map(is_, last, resources)):
                self._total = kept["total"]
            else:
                self._total = Resource.total(resources)
            if self.changes.keeps:
                kept["resources"], kept["total"] = resources, self._total
        return self._total

    def used_total(self) -> Resource:
        """Every node's `used` summed, the pods count included, as the nodes are at the first call (a plugin asks
        at open, before any action places anything): worked out once per session. With a store (`carry.py`) only
        the nodes whose `used` is not the very Resource the last session summed are summed again (a Resource does
        not change; a node's accounting replaces it), and the sum corrected by the difference: integer sums, so
        the same total as a pass over every node (tests/adapter/test_carry_equals_cold.py), at 5,000 nodes a
        fraction of a millisecond against ~15 ms (overcommit's open, bench/bench_cycle.py --warm)."""
        if self._used is None:
            useds = [node.used for node in self.node_list]
            kept = self.changes.store("used") if self.changes.keeps else {}
            last: list[Resource] | None = kept.get("useds")
            changed = moved(last, useds) if last is not None else None
            if last is not None and changed is not None:
                # position by position: which node sits where does not matter to a sum
                self._used = kept["total"] - Resource.total(last[i] for i in changed) + Resource.total(
                    useds[i] for i in changed) if changed else kept["total"]
            else:
                self._used = Resource.total(useds)
            if self.changes.keeps:
                kept["useds"], kept["total"] = useds, self._used
        return self._used

    def faulted(self, job: JobInfo) -> bool:
        """Whether a plugin or action failed on `job` this cycle (its condition then says so; leave it be)."""
        return self._results.faulted(job)

    def deferred(self, job: JobInfo) -> bool:
        """Whether allocate left `job` untried for the next cycle (its budget of binds spent): leave it be."""
        return self._results.deferred(job)

    def task_order(self, tasks: Iterable[TaskInfo]) -> list[TaskInfo]:
        """The tasks in TaskOrder, as the actions take them."""
        return self._order.task_order(tasks)

    def kept_for_nodes(self, name: str) -> dict[Any, Any]:
        """A store (`name`: the plugin's, with whatever else its answers depend on) for answers that depend only on
        the nodes' statics (labels, taints, readiness), a task's constraints and the conf, kept from cycle to cycle
        while those stay the same (`FeasibilityCache.kept`). Not for anything that reads the nodes' resources or a
        dynamic predicate's answer."""
        return self._fit.kept(name)

    def feasible_nodes(self, task: TaskInfo) -> list[NodeInfo]:
        """The nodes every predicate (the dynamic ones included) allows for the task."""
        return self._fit.feasible_nodes(task)

    def static_feasible_nodes(self, task: TaskInfo) -> list[NodeInfo]:
        """The nodes the constraint-only predicates allow, without the dynamic ones (for a dynamic predicate)."""
        return self._fit.static_feasible_nodes(task)

    def feasible_indices(self, task: TaskInfo) -> IntArray:
        """Positions (in `node_list`) of the nodes the constraint-only predicates allow."""
        return self._fit.feasible_indices(task)

    def fitting_indices(self, task: TaskInfo) -> IntArray:
        """Positions of the feasible nodes whose idle resources hold the task now."""
        return self._fit.fitting_indices(task)

    def node_scores(self, task: TaskInfo, indices: IntArray) -> P.FloatArray:
        """The configured node scorers' sum for the task on each node at `indices`, as allocate ranks them pod by
        pod (-inf where a scorer vetoes the node): what a gang placer ranks its placements by."""
        return self._fit.node_scores(task, indices)

    def carry_conditions(self, carried: dict[str, tuple[Condition, Status | None]]) -> None:
        """`set_condition` for many jobs as read, each given what the plugin gave it last session (the results
        collector sets them only where a status is worked out: `ResultsCollector.carry_conditions`)."""
        self._results.carry_conditions(carried)

    def troubled(self) -> set[str]:
        """The jobs a fault marked, a gate held, allocate deferred or a node turned a task of away this session:
        what `faulted`, `held`, `deferred` and `fit_errors` answer for."""
        return self._results.troubled() | self._fit.erred()

    def fit_errors(self, job: JobInfo) -> FitErrors | None:
        """Why the job's tasks fit no node this cycle (None: no task of it was tried and turned away)."""
        return self._fit.errors(job)

    def held(self, job: JobInfo) -> Status | None:
        """Why a gate (enqueue, a queue limit, a gang placer) held the job this cycle (None: none did)."""
        return self._results.held(job)

    def got_binds(self, job_uid: str) -> bool:
        """Whether a commit this cycle bound any of the job's tasks."""
        return self._requests.got_binds(job_uid)

    def committed_binds(self) -> list[tuple[str, str]]:
        """(task uid, node) of every bind committed so far this cycle."""
        return self._requests.committed_binds()

    # ---- what the plugin learned (mostly at close) --------------------------------------------------
    def set_condition(self, job: JobInfo, condition: Condition, status: Status | None = None) -> None:
        """The job's Scheduled/Unschedulable condition, and the Status an Unschedulable one was rendered from."""
        self._results.set_condition(job, condition, status)

    def hold(self, job: JobInfo, status: Status) -> None:
        """Why the job still waits, beside its gang's reasons in its Unschedulable condition (a victim filter that
        spared what the job could have taken); a gate's earlier reason this cycle is kept, the plugin's own is
        replaced."""
        earlier = self._results.held(job)
        self._results.hold(job, status, first=earlier is not None and earlier.plugin != status.plugin)

    def look_again(self, at: float) -> None:
        """What the plugin held back is let go by itself at `at` (a minimum runtime ends): a replay that skips idle
        time runs a cycle then (CycleResult.look_again)."""
        self._results.look_again(at)

    def add_condition(self, job: JobInfo, condition: Condition) -> None:
        """A condition beside the Scheduled/Unschedulable one (e.g. `Timeout`); one per type."""
        self._results.add_condition(job, condition)

    def override_min_member(self, job: JobInfo, min_member: int) -> None:
        """Schedule the job with a smaller minMember from now on (written to status.minMemberOverride)."""
        self._results.override_min_member(job, min_member)

    def event(self, kind: str, key: str, type_: str, reason: str, message: str) -> None:
        """A Kubernetes event on the object `kind`/`key` (a PodGroup's or a pod's uid)."""
        self._results.event(kind, key, type_, reason, message)

    def set_queue_share(self, queue: str, deserved: Resource, share: float, overused: bool) -> None:
        """The queue's deserved resources, share and overused flag, for its status and the queue metrics."""
        self._results.set_queue_share(queue, deserved, share, overused)

    def set_queue_usage(self, queue: str, usage: QueueUsage) -> None:
        """The queue's decayed usage at this cycle (time-based fair share), which the status writer keeps."""
        self._results.set_queue_usage(queue, usage)

    def annotate(self, task_uid: str, annotations: dict[str, str]) -> None:
        """Annotations the adapter writes on the pod before it binds it."""
        self._requests.annotate(task_uid, annotations)

    def annotate_podgroup(self, job: JobInfo, annotations: Mapping[str, str | None]) -> None:
        """Annotations the adapter merges into the job's PodGroup after the cycle (None: remove the key)."""
        self._results.annotate_podgroup(job, annotations)

    def bind_volumes(self, job_uid: str, volumes: Iterable[VolumeBind]) -> None:
        """Claims the adapter binds for the job's committed gang before any of its pods (`GangBind.volumes`)."""
        self._requests.bind_volumes(job_uid, volumes)

    def bind_device_claims(self, job_uid: str, writes: Iterable[ClaimWrite]) -> None:
        """DRA claims the adapter writes (allocation, reservedFor) before the job's pods (`GangBind.claims`)."""
        self._requests.bind_device_claims(job_uid, writes)


class Plugin(Generic[ArgsT]):
    """A plugin serves extension points with methods named after them (`job_order`, `job_valid`, `preemptable`,
    ...: `points.py`), hears placements through the hooks `on_allocate`, `on_deallocate` and `on_job_enqueued`,
    and may give accelerations beside its plain methods; the runtime (`runtime.py`) finds them and registers
    them in the plugin's tier when a session opens. `on_session_open` keeps per-session state; `on_session_close`
    writes what the plugin learned.

    `ArgsT` is the frozen value of its arguments, parsed once when the conf is loaded (`parse_args`) and read in
    `on_session_open` as `self.args`. A plugin without arguments is a `Plugin[NoArgs]`.
    """

    name: ClassVar[str] = ""

    def __init__(self, option: PluginOption) -> None:
        self.option = option
        # The loader parsed it with this class's parse_args (scheduler.plugins.registry.PLUGIN_ARGS).
        loaded = option.args is not None
        self.args: ArgsT = cast(ArgsT, option.args) if loaded else cast(ArgsT, parse_unloaded(option, self.parse_args))

    @classmethod
    def parse_args(cls, reader: ArgReader) -> ArgsT:
        """The plugin's typed arguments from its conf entry; a plugin with arguments overrides this."""
        return cast(ArgsT, NO_ARGS)

    def on_session_open(self, ssn: SessionAPI) -> None:
        pass

    def inactive_points(self) -> frozenset[str]:
        """Points (or hooks) this plugin implements but does not serve this session, asked after
        `on_session_open` (e.g. a scorer whose weight is 0, a volume filter when volumes are not modelled)."""
        return frozenset()

    def on_session_close(self, ssn: SessionAPI) -> None:
        pass
