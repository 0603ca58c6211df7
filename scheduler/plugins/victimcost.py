"""Layer `plugins`: `victimcost` — when evictions are needed, take the cheapest victims, and not too many.

A rule beyond Volcano's, opt-in (off unless listed in the conf: a Volcano conf keeps Volcano's victim order, so
the gang-eviction differential is unchanged). Served at the victim filter every evicting action asks last
(`points.VICTIM_FILTER`); listed after `minruntime` it orders what that one lets go.

Order: candidates are grouped by job, and the jobs taken cheapest first:
1. gangs broken: a job whose ready pods are not exactly its minAvailable (above it, losing one leaves it whole;
   below it, already broken this cycle, losing one more breaks no other gang) before one at its minimum (losing
   one breaks the gang);
2. lost work: the least work lost first: now minus the job's last checkpoint (`volcano-py.io/last-checkpoint` on
   its pods, RFC 3339, the latest over its pods that is not in the future), else minus its start (the earliest
   `PodScheduled` time of its pods on nodes, else their creation);
3. the order the action gave (its own victim order), which also orders a job's pods among themselves.

Bounds (the plugin's arguments, integers from 1 to 100000): `maxEvictionsPerCycle` (default 64) pods evicted by
all evicting actions in one cycle, and `maxEvictionsPerJob` (default 64) pods of any one victim job in one cycle.
Evictions a plan made and undid do not count. Once a bound is met, the filter lets no more pods (of that job) go;
it lets go at most what is left of the budget, cheapest first.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.phases import TaskStatus
from scheduler.api.timestamps import parse_datetime
from scheduler.framework.conf_args import ArgReader
from scheduler.framework.evictable import EvictionContext
from scheduler.framework.plugin import Plugin, SessionAPI

log = logging.getLogger("volcano_py.plugins.victimcost")

CHECKPOINT = "volcano-py.io/last-checkpoint"
PER_CYCLE = "maxEvictionsPerCycle"
PER_JOB = "maxEvictionsPerJob"
DEFAULT_PER_CYCLE = 64
DEFAULT_PER_JOB = 64
LIMIT = 100_000
ON_NODE = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.BINDING, TaskStatus.RELEASING})


@dataclass(frozen=True, slots=True)
class VictimCostArgs:
    per_cycle: int = DEFAULT_PER_CYCLE
    per_job: int = DEFAULT_PER_JOB


def _bounded(reader: ArgReader, key: str, default: int) -> int:
    value = reader.integer(key, default)
    if not 1 <= value <= LIMIT:
        raise reader.fail(key, f"an integer from 1 to {LIMIT}")
    return value


def checkpoint_of(task: TaskInfo, now: float) -> float | None:
    """The pod's last checkpoint (seconds since the epoch); None if absent, unreadable or in the future."""
    value = task.annotations.get(CHECKPOINT) if task.annotations else None
    if value is None:
        return None
    parsed = parse_datetime(value)
    at = parsed.timestamp() if parsed is not None else None
    if at is None or at > now:
        log.debug("pod %s: annotation %s=%r is not a past RFC 3339 time; its start is used", task.key, CHECKPOINT,
                  value[:64])
        return None
    return at


def lost_work(job: JobInfo, now: float) -> float:
    """Seconds of work the job loses if evicted now: since its last checkpoint, else since its start."""
    on_node = [t for t in job.tasks.values() if t.status in ON_NODE]
    if not on_node:
        return 0.0
    start = min(t.scheduled_at if t.scheduled_at is not None else t.creation for t in on_node)
    marks = [c for c in (checkpoint_of(t, now) for t in on_node) if c is not None]
    since = max(start, max(marks)) if marks else start
    return max(0.0, now - since)


class VictimCostPlugin(Plugin[VictimCostArgs]):
    name = "victimcost"

    @classmethod
    def parse_args(cls, reader: ArgReader) -> VictimCostArgs:
        per_cycle = _bounded(reader, PER_CYCLE, DEFAULT_PER_CYCLE)
        return VictimCostArgs(per_cycle, _bounded(reader, PER_JOB, DEFAULT_PER_JOB))

    def on_session_open(self, ssn: SessionAPI) -> None:
        self.jobs = ssn.jobs
        self.now = ssn.now
        self.evicted: dict[str, TaskInfo] = {}  # tasks evicted this cycle (a plan's undone ones are back Running)
        self.lost: dict[str, float] = {}

    def on_deallocate(self, task: TaskInfo) -> None:
        if task.status is TaskStatus.RELEASING:
            self.evicted[task.key] = task

    def _cost(self, job_key: str) -> tuple[int, float]:
        job = self.jobs.get(job_key)
        if job is None:
            return (1, 0.0)
        lost = self.lost.get(job_key)
        if lost is None:
            lost = self.lost[job_key] = lost_work(job, self.now)
        return (0 if job.ready_task_num() != job.min_available else 1, lost)

    def victim_filter(self, ctx: EvictionContext, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        live = [t for t in self.evicted.values() if t.status is TaskStatus.RELEASING]
        budget = self.args.per_cycle - len(live)
        if budget <= 0:
            return []
        taken: dict[str, int] = {}
        for task in live:
            taken[task.job] = taken.get(task.job, 0) + 1
        first_seen: dict[str, int] = {}
        for i, task in enumerate(candidates):
            first_seen.setdefault(task.job, i)
        ordered = sorted(enumerate(candidates),
                         key=lambda it: (*self._cost(it[1].job), first_seen[it[1].job], it[0]))
        kept: list[TaskInfo] = []
        for _, task in ordered:
            if len(kept) >= budget:
                break
            if taken.get(task.job, 0) >= self.args.per_job:
                continue
            taken[task.job] = taken.get(task.job, 0) + 1
            kept.append(task)
        return kept
