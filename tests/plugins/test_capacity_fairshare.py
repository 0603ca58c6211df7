"""Time-based fair share for `capacity` (the `usage.*` arguments, framework/fair_share.py): what a queue deserves
stays what it declares; the room nobody deserves goes to the queues that keep asking in proportion to
deserved x m, `m = max(1%, 1 + k x (1 - u / f))`, `f` the queue's deserved fraction of the cluster and `u` its
usage fraction (docs/configuration.md). Off (no arguments, or `usage.weight: 0`): placements as before.

Reference values come from the rule as the docs state it (a resource-second `a` seconds old weighs
`2^(-a / halfLife)`; the usage fraction is the decayed usage over what holding the whole cluster for the window
would give), by plain numeric summation, not from the code under test."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.api.usage import USAGE_ANNOTATION, QueueUsage, encode
from scheduler.framework.conf_values import ArgumentError
from scheduler.framework.fair_share import UsageArgs
from scheduler.plugins.capacity import CapacityArgs
from scheduler.testing import ClusterBuilder, cluster, conf_from_tiers

GPU = "nvidia.com/gpu"
HALF_LIFE, WINDOW = 600.0, 7200.0


def ref_decayed_holding(amount: float, seconds: float, half_life: float, steps: int = 20_000) -> float:
    dt = seconds / steps
    return sum(amount * 2 ** (-((i + 0.5) * dt) / half_life) * dt for i in range(steps))


def ref_multiplier(used_gpu_seconds: float, deserved: float, total: float, k: float) -> float:
    u = used_gpu_seconds / ref_decayed_holding(total, WINDOW, HALF_LIFE)
    f = deserved / total
    return max(0.01, 1 + k * (1 - u / f))


def history(gpu_seconds: float, at: float = 0.0) -> str:
    return encode(QueueUsage(at, HALF_LIFE, WINDOW, {GPU: gpu_seconds} if gpu_seconds else {}))


def capacity(weight: float | None, *, hierarchy: bool = False) -> dict[str, Any]:
    args: dict[str, Any] = {"enableHierarchy": True} if hierarchy else {}
    if weight is not None:
        args.update({"usage.weight": weight, "usage.halfLife": "10m", "usage.window": "2h"})
    return {"name": "capacity", "arguments": args} if args else {"name": "capacity"}


def conf(weight: float | None, *, hierarchy: bool = False, actions: str = "enqueue, allocate, backfill") -> Any:
    return conf_from_tiers(["priority", "gang"], ["predicates", capacity(weight, hierarchy=hierarchy), "nodeorder"],
                           actions=actions)


def add_queue(c: ClusterBuilder, name: str, deserved: int | None, usage: str | None = None,
              parent: str = "", capability: int | None = None) -> None:
    meta: dict[str, Any] = {"name": name}
    if usage is not None:
        meta["annotations"] = {USAGE_ANNOTATION: usage}
    spec: dict[str, Any] = {"weight": 1, "reclaimable": True}
    if deserved is not None:
        spec["deserved"] = {GPU: deserved}
    if parent:
        spec["parent"] = parent
    if capability is not None:
        spec["capability"] = {GPU: capability}
    c.sim.add_queue({"metadata": meta, "spec": spec, "status": {"state": "Open"}})


def held(c: ClusterBuilder, prefix: str) -> int:
    names = [key.split("/", 1)[1] for key in c.sim.podgroups]
    return sum(c.sim.used_gpus(n) for n in names if n.startswith(f"{prefix}-")) // 1000


# ---- the contested room -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(10))
def test_the_room_nobody_deserves_is_split_by_deserved_times_the_history_multiplier(seed: int) -> None:
    rng = random.Random(2000 + seed)
    nodes = rng.randint(2, 4)
    total = nodes * 8
    queues = [f"q{i}" for i in range(rng.randint(2, 3))]
    deserved = {q: rng.randint(1, total // (2 * len(queues))) for q in queues}  # at most half is deserved
    used = {q: rng.uniform(0, total * 900) for q in queues}  # usage fractions up to ~0.9
    k = rng.choice([0.5, 1.0, 2.0])
    c = cluster().nodes("n", nodes, gpu=8, cpu="1000", memory="4000Gi")
    for q in queues:
        add_queue(c, q, deserved[q], history(used[q]))
        for j in range(total):  # each queue asks for the whole cluster, one GPU per job
            c.job(f"{q}-{j}", queue=q, gpu=1, cpu="1")
    c.cycle(conf(k))  # the first session runs at the records' own time: nothing decayed yet
    got = {q: held(c, q) for q in queues}
    assert sum(got.values()) == total
    contested = total - sum(deserved.values())
    weights = {q: deserved[q] * ref_multiplier(used[q], deserved[q], total, k) for q in queues}
    for q in queues:
        assert got[q] >= deserved[q], (q, got, deserved)  # what a queue deserves does not depend on its past
        expected = deserved[q] + contested * weights[q] / sum(weights.values())
        # one GPU at a time to the lowest borrowed / (deserved x m): within n - 1 GPUs of the exact split
        assert abs(got[q] - expected) < len(queues) - 1 + 1e-6, (q, got, expected)


@pytest.mark.parametrize("hierarchy", [False, True])
def test_of_two_equal_queues_the_one_with_more_history_gets_less_of_the_contested_room(hierarchy: bool) -> None:
    c = cluster().nodes("n", 2, gpu=8, cpu="1000", memory="4000Gi")
    if hierarchy:
        add_queue(c, "root", None)
    add_queue(c, "a-heavy", 4, history(16 * 600.0))  # held the cluster's 16 GPUs for the last 10 minutes
    add_queue(c, "b-light", 4, history(2 * 300.0))  # first by name without history
    for q in ("a-heavy", "b-light"):
        for j in range(16):
            c.job(f"{q}-{j}", queue=q, gpu=1, cpu="1")
    c.cycle(conf(1.0, hierarchy=hierarchy))
    heavy, light = held(c, "a-heavy"), held(c, "b-light")
    assert heavy + light == 16 and heavy >= 4 and light >= 4
    assert light > heavy + 2, (heavy, light)  # without history: 8 and 8
    # the rule: heavy's u / f is above 2 (m at its floor, 1%), light's m is 1 + (1 - u / f)
    m_light = ref_multiplier(600.0, 4, 16, 1.0)
    assert abs(heavy - (4 + 8 * 0.01 / (0.01 + m_light))) < 1 + 1e-6


@pytest.mark.parametrize("weight", [None, 1.0])
def test_at_equal_shares_the_queue_that_used_less_against_what_it_deserves_goes_first(weight: float | None) -> None:
    """Two queues deserving the same, both holding nothing: with history on, the one that used less goes first
    and its 8-GPU gang takes the node; off, the first by name does (the tie stays a tie)."""
    c = cluster().node("n0", gpu=8, cpu="1000", memory="4000Gi")
    add_queue(c, "a-heavy", 4, history(8 * 300.0))  # first by name, and held the node for 5 minutes
    add_queue(c, "b-light", 4, history(2 * 300.0))
    for q in ("a-heavy", "b-light"):
        c.job(f"{q}-0", queue=q, replicas=8, gpu=1, cpu="1")
    c.cycle(conf(weight))
    assert (held(c, "a-heavy"), held(c, "b-light")) == ((8, 0) if weight is None else (0, 8))


def test_the_penalty_fades_as_the_usage_decays() -> None:
    seen = []
    for at in (0.0, 1200.0, 3600.0):
        c = cluster().nodes("n", 2, gpu=8, cpu="1000", memory="4000Gi")
        add_queue(c, "night", 4, history(16 * 3600.0))
        add_queue(c, "day", 4, None)
        for q in ("night", "day"):
            for j in range(16):
                c.job(f"{q}-{j}", queue=q, gpu=1, cpu="1")
        c.sim.now = at
        c.cycle(conf(1.0))
        seen.append(held(c, "night"))
    # at first night's m is at its floor: it borrows one GPU (a queue that borrowed nothing is served before any
    # that did, whatever its history); an hour (6 half-lives) later it is back near an even split
    assert seen == sorted(seen) and seen[0] == 5 and seen[-1] >= 7, seen


# ---- off: placements as before ---------------------------------------------------------------------------------


def seeded(seed: int, annotate: bool, hierarchy: bool) -> ClusterBuilder:
    rng = random.Random(seed)
    c = cluster().nodes("n", rng.randint(2, 5), gpu=rng.choice([4, 8]))
    queues = [f"q{i}" for i in range(rng.randint(2, 4))]
    if hierarchy:
        add_queue(c, "root", None)
    for name in queues:
        drawn = rng.uniform(0, 4e5)  # drawn either way, so both workloads are the same
        add_queue(c, name, rng.choice([None, 2, 4, 8]), history(drawn) if annotate else None,
                  capability=rng.choice([None, 16, 32]))
    for j in range(rng.randint(6, 16)):
        c.job(f"j{j}", queue=rng.choice(queues), replicas=rng.randint(1, 3), gpu=rng.choice([1, 2, 4]))
    return c


def run(c: ClusterBuilder, conf_: Any, cycles: int = 4) -> tuple[list[Any], list[Any]]:
    shares = []
    for _ in range(cycles):
        result = c.cycle(conf_)
        shares.append(sorted((q.queue, q.deserved, q.share) for q in result.queues))
    return [(r.time, r.task, r.node) for r in c.sim.bind_log], shares


@pytest.mark.parametrize("seed", range(12))
def test_with_the_weight_at_0_or_the_arguments_absent_shares_and_placements_are_todays(seed: int) -> None:
    hierarchy = seed % 3 == 0
    actions = "enqueue, allocate, reclaim, backfill"
    today = run(seeded(seed, False, hierarchy), conf(None, hierarchy=hierarchy, actions=actions))
    assert run(seeded(seed, False, hierarchy), conf(0, hierarchy=hierarchy, actions=actions)) == today
    assert run(seeded(seed, True, hierarchy), conf(0, hierarchy=hierarchy, actions=actions)) == today
    assert run(seeded(seed, True, hierarchy), conf(None, hierarchy=hierarchy, actions=actions)) == today


# ---- the history kept, and the arguments ------------------------------------------------------------------------


def test_capacity_keeps_each_queues_history_as_proportion_does() -> None:
    c = cluster().node("n0", gpu=8)
    add_queue(c, "team", 4)
    c.job("train", queue="team", replicas=2, gpu=2)  # holds 4 GPUs from the first cycle on
    c.cycles(102, conf(1.0))  # placed in the first; the record starts at the second session (t=1)
    kept = c.sim.queues["team"].usage
    assert kept is not None and kept.at == 101.0
    assert kept.used[GPU] == pytest.approx(ref_decayed_holding(4.0, 100.0, HALF_LIFE), rel=1e-6)
    assert kept.share == pytest.approx(kept.used[GPU] / ref_decayed_holding(8.0, WINDOW, HALF_LIFE), rel=1e-4)


@pytest.mark.parametrize(("key", "value"), [
    ("usage.weight", -1), ("usage.weight", 11), ("usage.weight", "nan"),
    ("usage.halfLife", "0s"), ("usage.halfLife", "9000h"), ("usage.window", "soon"), ("usage.window", True),
])
def test_a_bad_argument_is_one_clear_error_naming_capacity(key: str, value: Any) -> None:
    with pytest.raises(ArgumentError) as error:
        conf_from_tiers(["priority", "gang"], [{"name": "capacity", "arguments": {key: value}}])
    assert (error.value.key, error.value.plugin) == (key, "capacity")


def test_the_arguments_are_read_once_into_the_same_record_as_proportions() -> None:
    loaded = conf_from_tiers(["gang"], [{"name": "capacity", "arguments": {
        "usage.weight": "0.5", "usage.halfLife": "90m", "usage.window": 86400}}])
    args = next(p for tier in loaded.tiers for p in tier.plugins if p.name == "capacity").args
    assert isinstance(args, CapacityArgs)
    assert args.usage == UsageArgs(half_life=5400.0, window=86400.0, weight=0.5)
