"""Layer `plugins`: the pods inter-pod affinity and topology spread count, per topology domain, kept current.

A helper of the `predicates` plugin (no plugin of its own). Counted are the pods placed or bound and not
terminating, on the session's nodes. `PlacedPods` finds them once, on the first question of the session, and
from then on hears every placement and eviction a Statement makes through the session's event handler
(`changed`), so no question rescans the nodes:

- `counts(selection, me)`: per domain of the selection's topology key (`api.topology`, the session's
  `domains`), how many counted pods other than `me` the selection picks. Each selection's counts are built on
  first use and brought up to date from the log of changes since it was last asked.
- `repelled(task)`: the domains, per topology key, that a counted pod's required anti-affinity term keeps
  `task` out of (the symmetric half of anti-affinity), from counts kept per (term, namespace of its pod).

Arrays indexed by domain id carry one extra, always-zero last slot, which `NO_DOMAIN` (-1) reads: a node
without the label has no matching pods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.api.job import TaskInfo
from scheduler.api.phases import TaskStatus
from scheduler.api.pod import PodAffinityTerm
from scheduler.api.selectors import LabelSelector
from scheduler.api.topology import NO_DOMAIN, LabelDomains
from scheduler.framework.arrays import IntArray
from scheduler.framework.plugin import SessionAPI

BoolArray = npt.NDArray[np.bool_]

# Placed or bound and not terminating: what affinity and spread count.
COUNTED = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.PIPELINED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING}
)


@dataclass(frozen=True, slots=True)
class TermSelection:
    """The pods an affinity term of a pod in `namespace` selects."""

    term: PodAffinityTerm
    namespace: str

    @property
    def key(self) -> str:
        return self.term.topology_key

    def selects(self, other: TaskInfo) -> bool:
        return self.term.selects(self.namespace, other.namespace, other.labels)


@dataclass(frozen=True, slots=True)
class SpreadSelection:
    """The pods of `namespace` a spread constraint's selector matches, per `key` domain."""

    selector: LabelSelector
    namespace: str
    key: str

    def selects(self, other: TaskInfo) -> bool:
        return other.namespace == self.namespace and self.selector.matches(other.labels)


Selection = TermSelection | SpreadSelection


@dataclass(slots=True)
class _Counts:
    domains: LabelDomains
    per_domain: IntArray  # count + 1 slots, the last always 0
    seen: int = 0  # how much of the change log is in `per_domain`


class PlacedPods:
    def __init__(self, ssn: SessionAPI) -> None:
        self._ssn = ssn
        self._position = ssn.arrays.position
        self._at: dict[str, tuple[int, TaskInfo]] | None = None  # uid -> (position, pod); None until first asked
        self._log: list[tuple[int, TaskInfo, int]] = []  # (position, pod, +1 placed | -1 gone), in order
        self._counts: dict[Selection, _Counts] = {}
        self._repellers: dict[tuple[PodAffinityTerm, str], _Counts] = {}  # kept current with every change

    # ---- keeping up ------------------------------------------------------------------------------------
    def changed(self, task: TaskInfo) -> None:
        """The session's event handler: a Statement placed `task`, took it back or marked it releasing."""
        if self._at is None:
            return  # nothing asked yet: the first question reads the nodes as they are then
        before = self._at.get(task.key)
        now = self._counted(task)
        if before is None and now is None or before and now and before[0] == now[0] and before[1] is now[1]:
            return
        if before is not None:
            self._record(before[0], before[1], -1)
        if now is not None:
            self._record(now[0], now[1], 1)

    def changed_many(self, tasks: Sequence[TaskInfo]) -> None:
        """`changed` for each of `tasks`, in order."""
        if self._at is None:
            return  # as `changed`: nothing asked yet
        for task in tasks:
            self.changed(task)

    def _counted(self, task: TaskInfo) -> tuple[int, TaskInfo] | None:
        position = self._position.get(task.node_name)
        if position is None:
            return None
        held = self._ssn.node_list[position].tasks.get(task.key)
        return (position, held) if held is not None and held.status in COUNTED else None

    def _placed(self) -> Mapping[str, tuple[int, TaskInfo]]:
        if self._at is None:
            self._at = {}
            for position, node in enumerate(self._ssn.node_list):
                for other in node.tasks.values():
                    if other.status in COUNTED:
                        self._record(position, other, 1)
        return self._at

    def _record(self, position: int, pod: TaskInfo, sign: int) -> None:
        assert self._at is not None
        if sign > 0:
            self._at[pod.key] = (position, pod)
        else:
            del self._at[pod.key]
        self._log.append((position, pod, sign))
        for term in dict.fromkeys(pod.constraints.pod_anti_affinity):  # a term listed twice repels once
            repel = self._repellers.get((term, pod.namespace))
            if repel is None:
                repel = self._repellers[(term, pod.namespace)] = self._empty(term.topology_key)
            domain = repel.domains.of[position]
            if domain != NO_DOMAIN:
                repel.per_domain[domain] += sign

    def _empty(self, key: str) -> _Counts:
        domains = self._ssn.domains.key(key)
        return _Counts(domains, np.zeros(domains.count + 1, dtype=np.int64))

    # ---- questions -----------------------------------------------------------------------------------
    def counts(self, selection: Selection, me: TaskInfo) -> tuple[LabelDomains, IntArray]:
        """The selection's key domains, and per domain how many counted pods other than `me` it selects (to
        read, not to change: it may be the kept array itself)."""
        placed = self._placed()
        entry = self._counts.get(selection)
        if entry is None:
            entry = self._counts[selection] = self._empty(selection.key)
        of, per_domain = entry.domains.of, entry.per_domain
        for position, pod, sign in self._log[entry.seen:]:
            domain = of[position]
            if domain != NO_DOMAIN and selection.selects(pod):
                per_domain[domain] += sign
        entry.seen = len(self._log)
        mine = placed.get(me.key)
        if mine is not None and of[mine[0]] != NO_DOMAIN and selection.selects(mine[1]):
            per_domain = per_domain.copy()
            per_domain[of[mine[0]]] -= 1
        return entry.domains, per_domain

    def repelled(self, task: TaskInfo) -> list[tuple[LabelDomains, BoolArray]]:
        """Per topology key, the domains (a mask with the empty last slot) whose counted pods other than `task`
        have a required anti-affinity term selecting `task`."""
        mine = self._placed().get(task.key)
        out: dict[str, tuple[LabelDomains, BoolArray]] = {}
        for (term, namespace), repel in self._repellers.items():
            if not term.selects(namespace, task.namespace, task.labels):
                continue
            per_domain = repel.per_domain
            if mine is not None and mine[1].namespace == namespace and term in mine[1].constraints.pod_anti_affinity:
                domain = repel.domains.of[mine[0]]
                if domain != NO_DOMAIN:
                    per_domain = per_domain.copy()
                    per_domain[domain] -= 1
            hit = per_domain > 0
            if not hit.any():
                continue
            known = out.get(term.topology_key)
            out[term.topology_key] = (repel.domains, hit if known is None else known[1] | hit)
        return list(out.values())
