"""Layer `framework`: the victim filter of gang-aware eviction (`gangpreempt`, `gangreclaim`), and the domains a
gang looks for victims in.

Volcano asks one question of its plugins for both gang actions, UnifiedEvictable (pkg/scheduler/framework/
session_plugins.go, api/types.go `EvictionContext`): given who evicts (the preemptor or reclaimer job), for which
kind of eviction, inside which domain, which of these candidate tasks may go? A plugin answers with the tasks it
allows, or abstains. Its tier rule, which `combine.unified_victims` follows:

- tiers in order; inside a tier, the plugins in order, each asked with the same candidates;
- a plugin that abstains is skipped; one that allows none ends the tier with no answer;
- the answer so far is intersected with each plugin's; an empty intersection leaves no answer so far, so the
  next plugin's answer is taken whole (Volcano keeps a nil slice there);
- the first tier with an answer gives it; no tier with one: no victims.

No enableXxx switch turns a plugin's function off at this point: Volcano's UnifiedEvictable asks every plugin
that registered one (gang, priority, capacity, conformance). The legacy switches (enablePreemptable,
enableReclaimable) apply to the legacy `preempt` and `reclaim` only.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from scheduler.api.job import JobInfo, TaskInfo

CLUSTER_DOMAIN = "<cluster>"  # the domain that holds every node (Volcano's ClusterTopHyperNode)


class EvictionKind(enum.Enum):
    GANG_PREEMPT = "gangpreempt"
    GANG_RECLAIM = "gangreclaim"
    # The legacy actions, for the victim filters (VICTIM_FILTER) every evicting action asks; EVICTABLE is asked
    # by the gang actions alone.
    PREEMPT = "preempt"
    RECLAIM = "reclaim"
    # volcano-py's `consolidate`: victims are moved (evicted and placed again), not taken
    CONSOLIDATE = "consolidate"

    @property
    def cross_queue(self) -> bool:
        """Reclaim and gangreclaim take from other queues; preempt and gangpreempt from the preemptor's own."""
        return self in (EvictionKind.RECLAIM, EvictionKind.GANG_RECLAIM)


@dataclass(frozen=True, slots=True)
class EvictionContext:
    """Who asks for victims: the action's kind, the job that would take their place, and the domain searched."""

    kind: EvictionKind
    job: JobInfo
    domain: str = CLUSTER_DOMAIN


class Evictable(Protocol):
    """fn(context, candidates) -> the candidates the plugin allows (in the order given), or None to abstain."""

    def __call__(self, ctx: EvictionContext, candidates: Sequence[TaskInfo], /) -> list[TaskInfo] | None: ...


class VictimFilter(Protocol):
    """fn(context, candidates) -> the candidates the plugin lets go, cheapest first (the given order unless it has
    a cost of its own); every evicting action asks it after its own rules and the victim plugins, whatever tier
    answered (`points.VICTIM_FILTER`)."""

    def __call__(self, ctx: EvictionContext, candidates: Sequence[TaskInfo], /) -> list[TaskInfo]: ...


@dataclass(frozen=True, slots=True)
class Domain:
    """Where a gang looks for victims and room: a HyperNode (its name, tier and nodes) or the whole cluster."""

    name: str
    tier: int
    nodes: frozenset[str]


class EvictDomains(Protocol):
    """fn(job) -> the domains to search for `job`, in order, widest first (Volcano's HyperNodeGradientForJobFn
    with PurposeEvict, flattened); an empty list when the job's topology allows none."""

    def __call__(self, job: JobInfo, /) -> list[Domain]: ...
