"""Minimum runtime in every evicting action, on seeded random workloads (the minruntime plugin, beyond Volcano).

Low-priority jobs fill 8 GPUs, bound at different times, some annotated with their own minimum runtime (some
unreadably); the plugin has a random default and a random minimum for the victims' queue. Then a job arrives that
preempt, gangpreempt (same queue, higher priority), reclaim or gangreclaim (another queue) would make room for.

- with minruntime: no pod is evicted before its job's start plus its minimum runtime (the annotation if readable,
  capped at maxMinRuntime, else the queue's, else the default), whichever action evicts it;
- without it, the same workloads lose such young jobs (in every action), so the first check can fail;
- listed without arguments and with no annotation, the plugin changes no eviction and no bind.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import pytest

from scheduler.durations import SECOND, DurationError, parse_go_duration
from scheduler.framework.conf import SchedulerConf
from scheduler.plugins.minruntime import ANNOTATION
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers, pod_object

ACTIONS = ("preempt", "reclaim", "gangpreempt", "gangreclaim")
SEEDS = range(30)
DAY = 24 * 3600.0
ANNOTATIONS = (None, None, "2m", "10m", "45m", "soon")


@dataclass(frozen=True)
class Case:
    action: str
    args: dict[str, Any]
    annotations: dict[str, str | None]  # victim job -> its pods' annotation
    victim_queue: str


def conf(action: str, minruntime: dict[str, Any] | None) -> SchedulerConf:
    first: list[Any] = ["priority", {"name": "gang", "enablePreemptable": False}, "conformance"]
    if minruntime is not None:
        first.append({"name": "minruntime", "arguments": minruntime})
    no_starving = {"allocate": {"starvationThresholdSeconds": -1}}
    if action in ("preempt", "reclaim"):
        return conf_from_tiers(first, [{"name": "drf", "enablePreemptable": False}, "predicates",
                                       {"name": "proportion", "enableReclaimable": False}, "nodeorder"],
                               actions=f"enqueue, allocate, {action}, backfill", configurations=no_starving)
    return conf_from_tiers(first, [{"name": "drf", "enablePreemptable": False}, "predicates", "capacity",
                                   "nodeorder", "binpack"],
                           actions="allocate, backfill, gangreclaim, gangpreempt", configurations=no_starving)


def seconds(text: str) -> float | None:
    try:
        value = parse_go_duration(text) / SECOND
    except DurationError:
        return None
    return value if value >= 0 else None


def minimum_of(case: Case, job: str) -> float:
    """The job's minimum runtime as the plugin's documentation resolves it."""
    asked = case.annotations.get(job)
    if asked is not None and (value := seconds(asked)) is not None:
        return min(value, DAY)
    queue = case.args.get("queueMinRuntime", {}).get(case.victim_queue)
    if queue is not None:
        return seconds(queue) or 0.0
    return seconds(case.args.get("minRuntime", "0s")) or 0.0


def build(seed: int, action: str, *, annotate: bool = True) -> tuple[ClusterBuilder, Case, tuple[str, int]]:
    rng = random.Random(seed)
    c = cluster().priority_class("low", 10).priority_class("high", 1000)
    c.nodes("n", 2, gpu=4, cpu="64", memory="256Gi")
    if action in ("preempt", "gangpreempt"):
        victim_queue, own_queue = "default", "default"
    elif action == "reclaim":
        c.queue("batch").queue("team")
        victim_queue, own_queue = "batch", "team"
    else:
        c.queue("q1", deserved={"nvidia.com/gpu": "8", "cpu": "32", "memory": "128Gi"})
        c.queue("q2", deserved={"cpu": "32", "memory": "128Gi"})
        victim_queue, own_queue = "q2", "q1"
    args: dict[str, Any] = {"minRuntime": rng.choice(("0s", "1m", "5m"))}
    if rng.random() < 0.6:
        args["queueMinRuntime"] = {victim_queue: rng.choice(("3m", "20m"))}
    annotations: dict[str, str | None] = {}
    left, index = 8, 0
    while left:
        size = min(left, rng.randint(1, 4))
        name = f"run{index}"
        annotations[name] = rng.choice(ANNOTATIONS) if annotate else None
        c.sim.add_podgroup({"metadata": {"name": name, "namespace": "default"},
                            "spec": {"minMember": rng.randint(1, size), "queue": victim_queue,
                                     "priorityClassName": "low"}})
        for i in range(size):
            pod = pod_object(f"{name}-{i}", group=name, gpu=1, priority_class="low")
            if annotations[name] is not None:
                pod["metadata"]["annotations"][ANNOTATION] = annotations[name]
            c.sim.add_pod(pod)
        c.cycle(conf(action, None))  # placed under any conf alike: evictions come later
        c.sim.now += rng.choice((30, 120, 600))
        left, index = left - size, index + 1
    c.sim.now += rng.choice((10, 60, 300, 900, 3000))
    return c, Case(action, args, annotations, victim_queue), (own_queue, rng.randint(2, 4))


def evictions(seed: int, action: str, minruntime: bool | None, *, annotate: bool = True
              ) -> tuple[Case, list[tuple[str, float, float]], list[tuple[str, str]]]:
    """(case, [(victim pod, evicted at, its job's start + minimum runtime)], binds) over three cycles.
    `minruntime`: True with the case's arguments, None without the plugin, False listed with no arguments."""
    c, case, (queue, replicas) = build(seed, action, annotate=annotate)
    plugin = case.args if minruntime else ({} if minruntime is False else None)
    c.job("urgent", queue=queue, replicas=replicas, gpu=1, priority_class="high")
    seen: list[tuple[str, float, float]] = []
    binds: list[tuple[str, str]] = []
    for _ in range(3):
        at, before = c.sim.now, len(c.sim.evicted)
        starts: dict[str, float] = {}  # job -> its first pod's bind (an evicted pod is gone after the cycle)
        for key, pod in c.sim.pods.items():
            job = key.split("/", 1)[1].rsplit("-", 1)[0]
            if pod.bound_at is not None:
                starts[job] = min(starts.get(job, pod.bound_at), pod.bound_at)
        result = c.cycle(conf(action, plugin))
        binds.extend(b for gang in result.binds for b in gang.binds)
        for key in c.sim.evicted[before:]:
            job = key.split("/", 1)[1].rsplit("-", 1)[0]
            seen.append((key, at, starts[job] + minimum_of(case, job)))
    return case, seen, binds


@pytest.mark.parametrize("action", ACTIONS)
def test_no_victim_is_younger_than_its_minimum_runtime_in_any_evicting_action(action: str) -> None:
    evicted_with = young_without = 0
    for seed in SEEDS:
        _, seen, _ = evictions(seed, action, True)
        for key, at, until in seen:
            assert until <= at, (action, seed, key, at, until)
        evicted_with += bool(seen)
        _, seen, _ = evictions(seed, action, None)
        young_without += any(until > at for _, at, until in seen)
    assert evicted_with >= 3, (action, evicted_with)  # the rule still lets old enough jobs go
    assert young_without >= 3, (action, young_without)  # without it, the same workloads evict young jobs


@pytest.mark.parametrize("action", ACTIONS)
def test_listed_without_arguments_or_annotations_it_changes_no_eviction_and_no_bind(action: str) -> None:
    for seed in SEEDS:
        _, off, off_binds = evictions(seed, action, None, annotate=False)
        _, listed, listed_binds = evictions(seed, action, False, annotate=False)
        assert listed == off and listed_binds == off_binds, (action, seed)
