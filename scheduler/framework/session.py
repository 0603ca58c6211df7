"""Layer `framework`: a scheduling session opened on a snapshot.

The session owns the snapshot's infos for one cycle (`jobs`, `queues`, `nodes`, `node_list`, `hypernodes`,
`now`, `conf`, `arrays`, the nodes' resources as arrays, and `domains`, their topology domains per label key)
and composes the parts that work on them:

- `tiers` (`tiers.py`): what plugins registered at each extension point; `tiers.run(point, ...)` asks them.
- `order` (`order.py`): JobOrder, QueueOrder and TaskOrder, with their defaults.
- `fit` (`fit.py`): which nodes a task may go to and the best of them, cached; why tasks fit nowhere.
- `results` (`results.py`): conditions, events, phases and queue shares, folded into the `CycleResult` at close.
- the Statement's back end (`backend.py`), reached only through `statement()`: actions change the session only
  through a Statement.

Plugins see none of this directly: each gets a `SessionAPI` (`plugin.py`) when the session opens.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from operator import attrgetter

from scheduler.api.job import JobInfo
from scheduler.api.node import NodeInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.snapshot import ClusterSnapshot, CycleResult
from scheduler.api.topology import NodeDomains
from scheduler.framework.arrays import NodeArrays
from scheduler.framework.backend import StatementBackEnd
from scheduler.framework.carry import JobChanges
from scheduler.framework.conf import SchedulerConf
from scheduler.framework.faults import CLOSE, OPEN, Faults, JobGuard
from scheduler.framework.fit import FeasibilityCache
from scheduler.framework.holds import HoldBook
from scheduler.framework.memo import CycleMemo
from scheduler.framework.order import Orderings
from scheduler.framework.plugin import Plugin, SessionAPI
from scheduler.framework.results import ResultsCollector
from scheduler.framework.runtime import serve
from scheduler.framework.statement import Statement
from scheduler.framework.tiers import TierRunner

_NAME = attrgetter("name")


class Session:
    def __init__(
        self,
        snapshot: ClusterSnapshot,
        conf: SchedulerConf,
        plugin_types: dict[str, type[Plugin[object]]],
        *,
        trace: Callable[[str], None] | None = None,
        memo: CycleMemo | None = None,
        accelerate: bool = True,
    ) -> None:
        self.nodes: dict[str, NodeInfo] = snapshot.nodes
        self.node_list: list[NodeInfo] = sorted(snapshot.nodes.values(), key=_NAME)  # (a key of C: ~0.24 ms
        # at 5,000 nodes against ~0.34 ms for a lambda)
        # which jobs changed since the last session, and what its per-job work left for the others (`carry.py`)
        self.changes = JobChanges(memo.carry if memo is not None else None, snapshot.lineage)
        self.arrays = NodeArrays(self.node_list) if not self.changes.keeps else NodeArrays.carried(
            self.node_list, self.changes.store("arrays"))
        self.domains = NodeDomains([n.labels for n in self.node_list])
        self.jobs: dict[str, JobInfo] = snapshot.jobs
        self.queues: dict[str, QueueInfo] = snapshot.queues
        self.now = snapshot.now
        self.hypernodes = snapshot.hypernodes
        self.storage = snapshot.storage
        self.dra = snapshot.dra
        self.disruption_budgets = snapshot.disruption_budgets
        self.resource_quotas = snapshot.resource_quotas
        self.queue_allocation_gate = snapshot.queue_allocation_gate  # SchedulingGatesQueueAdmission
        self.unreadable_queues = snapshot.unreadable_queues  # queues left out, and why (their jobs wait with it)
        self.conf = conf
        self.trace = trace  # a sink for a traced cycle's explanations (`volcano-py simulate --trace`), or None
        self.timings: dict[str, float] = {}  # as CycleResult.timings
        self.tiers = TierRunner()
        self.results = ResultsCollector(self.jobs, self.queues, self.changes)
        # One job's failure costs that job alone (`faults.py`): actions run each job's turn under `guard(job)`.
        self.faults = Faults(self.results, memo, self.tiers.plugin_modules, self._jobs_of_queue)
        self.order = Orderings(self.tiers, self.faults)
        self.fit = FeasibilityCache(self.node_list, self.arrays, self.tiers, conf, memo=memo, trace=trace,
                                    shard=snapshot.shard)
        # room held for moved jobs (`holds.py`): the memo's, so it lasts from cycle to cycle; else this cycle's own
        self.holds: HoldBook = memo.holds if memo is not None else HoldBook()
        self._back_end = StatementBackEnd(self.jobs, self.nodes, self.arrays, self.tiers)
        self.accelerate = accelerate  # build the plugins' accelerations (off: the plain methods alone, same answers)
        self.plugins: list[tuple[int, Plugin[object]]] = []
        for tier_index, tier in enumerate(conf.tiers):
            for option in tier.plugins:
                factory = plugin_types.get(option.name)
                if factory is not None:
                    self.plugins.append((tier_index, factory(option)))
                    self.tiers.plugin_modules.setdefault(factory.__module__, option.name)
        self._view = self._make_view()
        self._open()

    def _make_view(self) -> SessionAPI:
        return SessionAPI(
            jobs=self.jobs, queues=self.queues, node_list=self.node_list, hypernodes=self.hypernodes, now=self.now,
            conf=self.conf, arrays=self.arrays, domains=self.domains, trace=self.trace, storage=self.storage,
            disruption_budgets=self.disruption_budgets, resource_quotas=self.resource_quotas, order=self.order,
            fit=self.fit, results=self.results, requests=self._back_end, faults=self.faults,
            queue_allocation_gate=self.queue_allocation_gate, dra=self.dra, changes=self.changes,
        )

    def _jobs_of_queue(self, queue: str) -> list[JobInfo]:
        return [job for job in self.jobs.values() if job.queue == queue]

    def _open(self) -> None:
        self.faults.action = OPEN
        for tier_index, plugin in self.plugins:
            started = time.perf_counter()
            plugin.on_session_open(self._view)
            serve(plugin, self.tiers, tier=tier_index, option=plugin.option, accelerate=self.accelerate)
            self.timings[f"plugin:{plugin.name}:OnSessionOpen"] = time.perf_counter() - started
        self.fit.scorers_registered()

    def statement(self) -> Statement:
        """A new Statement on this session: the only way an action places, pipelines or evicts."""
        statement = Statement(self._back_end)
        self.faults.opened(statement)  # discarded if the job's turn that opened it fails
        return statement

    def guard(self, job: JobInfo) -> JobGuard:
        """`with ssn.guard(job): ...` around one job's turn in an action's per-job loop: an exception in it
        faults that job alone (its statements discarded, an Error Status, left out of the rest of the cycle)."""
        return self.faults.guard(job)

    def faulted(self, job: JobInfo) -> bool:
        """Whether a plugin or action failed on `job` this cycle: every action leaves it out from then on."""
        return self.results.faulted(job)

    def deferred(self, job: JobInfo) -> bool:
        """Whether allocate left the job for the next cycle (its budget of binds spent): no action takes it up."""
        return self.results.deferred(job)

    def binds_committed(self) -> int:
        """Binds committed so far this cycle, every action's."""
        return self._back_end.bind_count

    def close(self) -> CycleResult:
        """Let plugins write what they learned, and return the cycle's binds, evictions and status changes."""
        self.fit.close(self.jobs)
        self.changes.at_close(self.jobs)
        self.faults.action = CLOSE
        for _, plugin in self.plugins:
            started = time.perf_counter()
            plugin.on_session_close(self._view)
            self.timings[f"plugin:{plugin.name}:OnSessionClose"] = time.perf_counter() - started
        self.faults.close()
        result = self.results.close(self._back_end, self.timings)
        self.changes.completed()
        return result
