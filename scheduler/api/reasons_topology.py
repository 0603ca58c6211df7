"""Layer `api`: the reasons of network topology, sub-groups and admission (quotas, minimum runtime); listed with
the others in `api/reasons.py`, which every reader imports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from scheduler.api.reason_base import Reason


@dataclass(frozen=True, slots=True)
class TopologyLimit(Reason):
    """network-topology-aware, hard mode: no `domain` (a tier-`tier` domain, e.g. a rack) holds the gang's
    `needed` `resource`; the best one, `best_domain`, has `best` free (`usable` of it on nodes that hold one of
    the gang's tasks)."""

    kind: ClassVar[str] = "TopologyLimit"
    tier: int
    domain: str
    resource: str
    needed: int
    best: int
    usable: int
    best_domain: str = ""


@dataclass(frozen=True, slots=True)
class TopologyNoNode(Reason):
    """network-topology-aware, hard mode: no node the gang's predicates allow."""

    kind: ClassVar[str] = "TopologyNoNode"
    tier: int
    domain: str
    resource: str
    needed: int


@dataclass(frozen=True, slots=True)
class TopologyNoFit(Reason):
    """network-topology-aware, hard mode: the gang's tasks fit no node at all."""

    kind: ClassVar[str] = "TopologyNoFit"
    tier: int


@dataclass(frozen=True, slots=True)
class SubGroupsShort(Reason):
    """A sub-group policy (PodGroup `spec.subGroupPolicy`, api/subgroups.py) short of its `minSubGroups`: with
    `live`, the sub-groups its pods make at all (JobValid); otherwise the ones placed whole (JobReady)."""

    kind: ClassVar[str] = "SubGroupsShort"
    policy: str
    have: int
    needed: int
    live: bool


@dataclass(frozen=True, slots=True)
class SubGroupNoDomain(Reason):
    """A sub-group in hard network-topology mode whose `tasks` pending pods fit inside no single domain of tier
    `tier` (`domain` names the tier) of the domain the job may use."""

    kind: ClassVar[str] = "SubGroupNoDomain"
    group: str
    tasks: int
    tier: int
    domain: str


@dataclass(frozen=True, slots=True)
class ResourceQuotaExceeded(Reason):
    """JobEnqueueable (resourcequota): for one resource the ResourceQuota `namespace/quota` limits, the job's
    minResources on top of what the quota's status says is used and what this cycle already admitted in the
    namespace passes the quota's hard limit: used + enqueued + requested = total > hard. `resource` is the name as
    both spell it (`requests.cpu`, `cpu`, `count/pods`); amounts are nano-units, the quota's exact quantities
    (api/quota.py: a quantity times 10^9), not volcano-py's usual units."""

    kind: ClassVar[str] = "ResourceQuotaExceeded"
    namespace: str
    quota: str
    resource: str
    hard: int
    used: int
    enqueued: int
    requested: int

    @property
    def total(self) -> int:
        return self.used + self.enqueued + self.requested

    @property
    def short(self) -> int:
        return self.total - self.hard


@dataclass(frozen=True, slots=True)
class MinRuntimeProtected(Reason):
    """Evicting running jobs could have made room, but `jobs` of them had not yet run their minimum runtime, so
    none of their pods was a victim (the minruntime plugin, a rule beyond Volcano's). `job` is the one whose
    protection ends first: `remaining_seconds` left of its `min_runtime_seconds`, set by `source`."""

    kind: ClassVar[str] = "MinRuntimeProtected"
    jobs: int
    job: str
    remaining_seconds: float
    min_runtime_seconds: float
    source: str

