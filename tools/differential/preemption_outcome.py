"""What the preemption family observes and compares. Pure: works on pod watch events and records.

Evictions are counted from the pod watch: a pod the scheduler evicts carries ``DisruptionTarget=True`` with reason
``PreemptionByScheduler`` before it is deleted (Volcano: pkg/scheduler/cache/cache.go defaultEvictor.Evict writes
the condition with UpdateStatus and then deletes; volcano-py: scheduler/cache/evictor.py), so the modification or
the deletion event of that pod shows it, while pods the runner or a controller delete do not. A pod is counted
once (by UID); the Job controller's replacement has the same name and a new UID.

A victim job is *broken* when, after its first eviction, its live bound pods (bound, not terminated, not being
deleted, not marked for disruption) fell below its minimum: the evictions took a whole bundle.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from .outcome import Difference, gang_of_pod, is_bound
from .preemption import MAX_DOMAINS, TARGET_WORKLOADS, TARGETS, PreemptionWorkload

TASK_SPEC = "volcano.sh/task-spec"
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


def evicted_by_scheduler(pod: dict) -> bool:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if (c.get("type") == DISRUPTION_TARGET and c.get("status") == "True"
                and c.get("reason") == PREEMPTION_BY_SCHEDULER):
            return True
    return False


def task_of_pod(pod: dict, gang_name: str) -> str:
    meta = pod.get("metadata") or {}
    for source in (meta.get("labels") or {}, meta.get("annotations") or {}):
        if source.get(TASK_SPEC):
            return str(source[TASK_SPEC])
    name = str(meta.get("name") or "")
    rest = name[len(gang_name) + 1:] if name.startswith(f"{gang_name}-") else name
    return rest.rsplit("-", 1)[0] if "-" in rest else rest


@dataclass(slots=True)
class EvictionLog:
    """Fed with the pod watch's events in order; counts evictions per gang and per task and the lowest number of
    live bound pods each victim gang had after its first eviction."""

    workload: PreemptionWorkload
    live: dict[str, tuple[str, bool]] = field(default_factory=dict)  # uid -> (gang, live and bound)
    evicted_uids: set[str] = field(default_factory=set)
    evicted: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    evicted_tasks: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    lowest: dict[str, int] = field(default_factory=dict)
    events: int = 0

    def seed(self, pods: list[dict]) -> None:
        """The state the watch starts from (the list it resumes after)."""
        for pod in pods:
            self.feed("ADDED", pod)

    def _count(self, gang: str) -> int:
        return sum(1 for g, ok in self.live.values() if g == gang and ok)

    def feed(self, kind: str, pod: dict) -> None:
        self.events += 1
        gang = gang_of_pod(pod, self.workload)
        if gang is None:
            return
        uid = str((pod.get("metadata") or {}).get("uid") or (pod.get("metadata") or {}).get("name"))
        marked = evicted_by_scheduler(pod)
        if marked and uid not in self.evicted_uids:
            self.evicted_uids.add(uid)
            self.evicted[gang] += 1
            self.evicted_tasks[gang][task_of_pod(pod, gang.split("/", 1)[1])] += 1
        if kind == "DELETED":
            self.live.pop(uid, None)
        else:
            self.live[uid] = (gang, is_bound(pod) and not marked)
        if self.evicted.get(gang):
            n = self._count(gang)
            self.lowest[gang] = min(self.lowest.get(gang, n), n)

    def result(self) -> dict:
        mins = {g.key: g.min_member for g in self.workload.gangs}
        return {
            "evicted": dict(sorted(self.evicted.items())),
            "evicted_tasks": {g: dict(sorted(t.items())) for g, t in sorted(self.evicted_tasks.items())},
            "lowest_live": dict(sorted(self.lowest.items())),
            "broken": sorted(g for g, n in self.lowest.items() if n < mins.get(g, 0)),
        }


def compare(seed: int, wl: PreemptionWorkload, volcano: dict, volcano_py: dict) -> list[Difference]:
    """Per gang: ready (bound >= minimum) and the bound count; per victim job: evicted pods (and per task where the
    role rule fixes the split, PreemptionWorkload.task_split_fixed); the set of broken gangs."""
    diffs: list[Difference] = []
    vg, pg = volcano.get("gangs", {}), volcano_py.get("gangs", {})
    for key in sorted(set(vg) | set(pg)):
        a, b = vg.get(key), pg.get(key)
        if a is None or b is None:
            diffs.append(Difference(seed, key, "present", a is not None, b is not None))
            continue
        ready_a, ready_b = a["bound"] >= a["min_member"], b["bound"] >= b["min_member"]
        if ready_a != ready_b:
            diffs.append(Difference(seed, key, "ready", ready_a, ready_b))
        if a["bound"] != b["bound"]:
            diffs.append(Difference(seed, key, "bound", a["bound"], b["bound"]))
    ea, eb = volcano.get("evicted", {}), volcano_py.get("evicted", {})
    for key in sorted(set(ea) | set(eb)):
        if ea.get(key, 0) != eb.get(key, 0):
            diffs.append(Difference(seed, key, "evicted", ea.get(key, 0), eb.get(key, 0)))
    ta, tb = volcano.get("evicted_tasks", {}), volcano_py.get("evicted_tasks", {})
    for key in sorted(wl.task_split_fixed()):
        if ea.get(key, 0) == eb.get(key, 0) and ta.get(key, {}) != tb.get(key, {}):
            diffs.append(Difference(seed, key, "evicted per task", ta.get(key, {}), tb.get(key, {})))
    ba, bb = set(volcano.get("broken", [])), set(volcano_py.get("broken", []))
    for key in sorted(ba ^ bb):
        diffs.append(Difference(seed, key, "broken", key in ba, key in bb))
    return diffs


def coverage_of(wl: PreemptionWorkload, volcano: dict) -> dict[str, bool]:
    """Which coverage targets one workload reaches on Volcano's side."""
    evicted = {k for k, n in volcano.get("evicted", {}).items() if n}
    return {
        "evicted": bool(evicted),
        "whole_bundle": bool(volcano.get("broken")),
        "role_minimums": bool(evicted & wl.task_split_fixed()),
        "topology_over_max_domains": bool(evicted) and wl.eligible_domains() > MAX_DOMAINS,
    }


def coverage(pairs: list[tuple[PreemptionWorkload, dict]]) -> dict[str, int]:
    """Coverage counts over (workload, Volcano's outcome) pairs."""
    out = dict.fromkeys(TARGETS, 0)
    for wl, o in pairs:
        for k, hit in coverage_of(wl, o).items():
            out[k] += hit
    return out


def verdict(counts: dict[str, int], workloads: int) -> tuple[bool, list[str]]:
    """Whether the family counts: at least TARGET_WORKLOADS workloads compared and every target reached."""
    short = [f"{k} {counts.get(k, 0)} < {v}" for k, v in TARGETS.items() if counts.get(k, 0) < v]
    if workloads < TARGET_WORKLOADS:
        short.insert(0, f"{workloads} workloads < {TARGET_WORKLOADS}")
    return not short, short
