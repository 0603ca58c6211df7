"""Layer `plugins`: `overcommit` — admit jobs while the cluster, overcommitted by a factor, can hold them.

JobEnqueueable: a job with minResources is admitted only if `allocatable x factor` of the whole cluster
holds what nodes already use, plus what admitted jobs still wait for, plus this job's minResources, on every
resource the job asks for. The rejection says which resource and by how much. A job without minResources
is admitted.

Arguments (Volcano's): `overcommit-factor` (default 1.2) and per resource `overcommit-factor.<name>`
(e.g. `overcommit-factor.nvidia.com/gpu: 1.0`). A factor below 1 falls back to the default, as in Volcano.
An admitted job reserves only the part of its minResources it does not hold yet (its running part is already
in the nodes' use; Volcano counts an Inqueue job's whole minResources).

When `preempt` or `reclaim` is among the actions, what they could free for the job counts as free: lower-
priority running tasks of its queue that may be evicted, and what other reclaimable queues hold above their
deserved shares (up to what the job's queue is short of its own). So a high-priority job is admitted to a full
cluster and then preempts, instead of waiting at enqueue for room only preemption can make.
"""

from __future__ import annotations

import logging
import math
from fractions import Fraction

from scheduler.api.decision import SUCCESS, Status, unschedulable
from scheduler.api.job import JobInfo
from scheduler.api.reasons import OvercommitLimit
from scheduler.api.resources import ZERO
from scheduler.framework import points as P
from scheduler.framework.conf import arg_float
from scheduler.framework.plugin import Plugin, SessionAPI
from scheduler.plugins.proportion import (
    cluster_total,
    dimensions,
    preemptable_for,
    reclaimable_for,
    reserved_by_admitted,
    without_pods,
)

log = logging.getLogger("volcano_py.plugins.overcommit")

FACTOR = "overcommit-factor"
DEFAULT_FACTOR = 1.2


class OvercommitPlugin(Plugin):
    name = "overcommit"

    def _read_factors(self) -> None:
        self.default_factor = self._valid(FACTOR, arg_float(self.option, FACTOR, DEFAULT_FACTOR))
        self.factors = {
            key[len(FACTOR) + 1 :]: self._valid(key, arg_float(self.option, key, DEFAULT_FACTOR))
            for key in self.option.arguments
            if key.startswith(f"{FACTOR}.")
        }

    def factor(self, resource: str) -> float:
        return self.factors.get(resource, self.default_factor)

    @staticmethod
    def _valid(key: str, value: float) -> float:
        if value < 1.0 or not math.isfinite(value):
            log.warning("overcommit: %s %s is below 1; using %s", key, value, DEFAULT_FACTOR)
            return DEFAULT_FACTOR
        return value

    def on_session_open(self, ssn: SessionAPI) -> None:
        self.ssn = ssn
        self._read_factors()
        self.total = cluster_total(ssn.node_list)
        self.used = ZERO
        for node in ssn.node_list:
            self.used = self.used + without_pods(node.used)
        self.admitted = ZERO
        for job in ssn.jobs.values():
            self.admitted = self.admitted + reserved_by_admitted(job)
        ssn.register(P.JOB_ENQUEUEABLE, self.enqueueable)
        ssn.on_job_enqueued(self._enqueued)

    def capacity(self, resource: str) -> int:
        """The cluster's allocatable of `resource` times its factor, rounded down, in integer units."""
        return math.floor(self.total.get(resource) * Fraction(str(self.factor(resource))))

    def enqueueable(self, job: JobInfo) -> Status:
        if job.min_resources is None:
            return SUCCESS
        minimum = without_pods(job.min_resources)
        over: list[OvercommitLimit] = []
        freeable = None
        for name, units in dimensions(minimum).items():
            need = self.used.get(name) + self.admitted.get(name) + units
            capacity = self.capacity(name)
            if need > capacity:
                if freeable is None:
                    freeable = preemptable_for(self.ssn, job) + reclaimable_for(self.ssn, job)
                need = max(units, need - freeable.get(name))
            if need > capacity:
                over.append(OvercommitLimit(name, self.total.get(name), self.factor(name), capacity,
                                            self.used.get(name), self.admitted.get(name), units, need))
        return unschedulable(*over) if over else SUCCESS

    def _enqueued(self, job: JobInfo) -> None:
        self.admitted = self.admitted + reserved_by_admitted(job)


