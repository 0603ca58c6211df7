"""Layer `plugins`: `overcommit` — admit jobs while the cluster, overcommitted by a factor, can hold them.

JobEnqueueable: a job with minResources is admitted only if `allocatable x factor` of the whole cluster
holds what nodes already use, plus what admitted jobs still wait for, plus this job's minResources, on every
resource the job asks for. The rejection says which resource and by how much. A job without minResources
is admitted.

Arguments (Volcano's): `overcommit-factor` (default 1.2) and per resource `overcommit-factor.<name>`
(e.g. `overcommit-factor.nvidia.com/gpu: 1.0`). A factor below 1 falls back to the default, as in Volcano, with
a conf warning.
An admitted job reserves only the part of its minResources it does not hold yet (its running part is already
in the nodes' use; Volcano counts an Inqueue job's whole minResources).

When `preempt` or `reclaim` is among the actions, what they could free for the job counts as free: lower-
priority running tasks of its queue that may be evicted, and what other reclaimable queues hold above their
deserved shares (up to what the job's queue is short of its own). So a high-priority job is admitted to a full
cluster and then preempts, instead of waiting at enqueue for room only preemption can make.

`reserveAfter: <Go duration>` (beyond Volcano; off by default, so Volcano's confs behave as in Volcano, whose rule in
pkg/scheduler/plugins/overcommit/overcommit.go reserves nothing): the first job of the session that overcommit
refuses, that has waited at least that long since its creation and that an empty admission room would hold,
reserves the room it lacks for the rest of the session. A job asked after it that is behind it (lower priority,
or the same and created later) is admitted only into room beyond that reservation, as EASY backfill's head of the
queue reserves its start; older jobs are not held by it. Each session chooses afresh (a job is asked once a
session, so the reserving job is not admitted in the session it reserves in).
A job refused for the reservation alone says so by its `admitted` amount, which then includes the reserved room.
Put `proportion` before `overcommit` in the tier: enqueue's vote stops at the first rejection, so a job its queue
refuses is then never asked here and never reserves (the order alone changes no decision).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType

from scheduler.api.decision import SUCCESS, Status, unschedulable
from scheduler.api.job import JobInfo
from scheduler.api.reasons import OvercommitLimit
from scheduler.api.resources import ZERO, Resource
from scheduler.framework.conf_args import ArgReader
from scheduler.framework.plugin import Plugin, SessionAPI
from scheduler.plugins.queue_parts import job_parts
from scheduler.plugins.shares import (
    dimensions,
    preemptable_for,
    reclaimable_for,
    reserved_by_admitted,
    session_total,
    still_lacking,
    without_pods,
)

FACTOR = "overcommit-factor"
DEFAULT_FACTOR = 1.2
RESERVE_AFTER = "reserveAfter"  # volcano-py's: a job refused this long reserves its admission room
MAX_RESERVE_AFTER = 7 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class OvercommitArgs:
    default_factor: float = DEFAULT_FACTOR
    factors: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))  # resource -> factor
    reserve_after: float | None = None  # seconds; None: no job reserves admission room (Volcano's rule)

    def factor(self, resource: str) -> float:
        return self.factors.get(resource, self.default_factor)


def _factor(reader: ArgReader, key: str) -> float:
    value = reader.number(key, DEFAULT_FACTOR)
    if value < 1.0 or not math.isfinite(value):
        reader.warn(key, f"factor {value} is below 1 or not finite; using {DEFAULT_FACTOR}, as Volcano does")
        return DEFAULT_FACTOR
    return value


class OvercommitPlugin(Plugin[OvercommitArgs]):
    name = "overcommit"

    @classmethod
    def parse_args(cls, reader: ArgReader) -> OvercommitArgs:
        default = _factor(reader, FACTOR)
        prefix = f"{FACTOR}."
        factors = {key[len(prefix):]: _factor(reader, key) for key in reader.names() if key.startswith(prefix)}
        return OvercommitArgs(default, MappingProxyType(factors), _reserve_after(reader))

    def _factor(self, resource: str) -> float:
        return self.args.factor(resource)

    def on_session_open(self, ssn: SessionAPI) -> None:
        self.ssn = ssn
        self.total = session_total(ssn)
        # (summed in one pass each: the same integers as node by node and job by job, at a fraction of the cost)
        self.used = without_pods(ssn.used_total())
        # every job's reserved_by_admitted, kept from session to session for the jobs that did not change
        self.admitted = Resource.total(part[2] for part in job_parts(ssn).values())
        self.reserving: JobInfo | None = None  # reserveAfter: the job whose admission room is kept this session
        self.reserve = ZERO

    def _capacity(self, resource: str) -> int:
        """The cluster's allocatable of `resource` times its factor, rounded down, in integer units."""
        return math.floor(self.total.get(resource) * Fraction(str(self._factor(resource))))

    def _fits_empty(self, lacking: Resource) -> bool:
        """An admission room with nothing used or admitted would hold `lacking`."""
        return all(units <= self._capacity(name) for name, units in dimensions(lacking).items())

    def job_enqueueable(self, job: JobInfo) -> Status:
        if job.min_resources is None:
            return SUCCESS
        minimum = still_lacking(job)  # a gang admitted again holds the rest already, in the nodes' use
        over: list[OvercommitLimit] = []
        freeable = None
        reserve = ZERO if self.reserving is None or not _behind(job, self.reserving) else self.reserve
        admitted = self.admitted + reserve
        for name, units in dimensions(minimum).items():
            need = self.used.get(name) + admitted.get(name) + units
            capacity = self._capacity(name)
            if need > capacity:
                if freeable is None:
                    freeable = preemptable_for(self.ssn, job) + reclaimable_for(self.ssn, job)
                need = max(units, need - freeable.get(name))
            if need > capacity:
                over.append(OvercommitLimit(name, self.total.get(name), self._factor(name), capacity,
                                            self.used.get(name), admitted.get(name), units, need))
        if over and self._may_reserve(job, minimum):
            self.reserving, self.reserve = job, minimum
        return unschedulable(*over) if over else SUCCESS

    def _may_reserve(self, job: JobInfo, lacking: Resource) -> bool:
        """reserveAfter: the first job refused this session that has waited that long since its creation, and
        that an empty admission room would hold, reserves the room it lacks for the rest of the session."""
        after = self.args.reserve_after
        return (after is not None and self.reserving is None and self.ssn.now - job.creation >= after
                and self._fits_empty(lacking))

    def on_job_enqueued(self, job: JobInfo) -> None:
        self.admitted = self.admitted + reserved_by_admitted(job)


def _behind(job: JobInfo, head: JobInfo) -> bool:
    """`job` comes after `head` in the reservation's order: lower priority, or the same and created later."""
    return (-job.priority, job.creation, job.key) > (-head.priority, head.creation, head.key)


def _reserve_after(reader: ArgReader) -> float | None:
    value = reader.raw(RESERVE_AFTER)
    if value is None:
        return None
    return reader.duration(RESERVE_AFTER, value, MAX_RESERVE_AFTER)


