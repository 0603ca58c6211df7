"""proportion: deserved shares by weighted water-filling, the capability gate at enqueue, fair convergence."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from scheduler.api.queue import QueueInfo
from scheduler.api.reasons import CAPABILITY, QueueLimit
from scheduler.api.resources import ZERO, Resource
from scheduler.plugins.proportion import QueueDemand, deserved_shares, real_capability
from scheduler.testing import ClusterBuilder, cluster

GPU = "nvidia.com/gpu"


def gpus(n: int) -> Resource:
    return Resource.of(scalars={GPU: n * 1000})


# ---- deserved shares ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Q:
    name: str
    weight: int = 1
    request: int = 1000  # GPUs
    capability: int | None = None
    guarantee: int = 0


@dataclass(frozen=True)
class ShareCase:
    name: str
    total: int
    queues: tuple[Q, ...]
    expected: dict[str, int] = field(default_factory=dict)  # GPUs deserved


SHARE_CASES = [
    ShareCase("weights 1 and 3 with enough demand split 64 GPUs 16/48", 64,
              (Q("a", 1), Q("b", 3)), {"a": 16, "b": 48}),
    ShareCase("equal weights split evenly", 64, (Q("a"), Q("b")), {"a": 32, "b": 32}),
    ShareCase("a capability caps the share and the rest goes to the other queue", 64,
              (Q("a", capability=8), Q("b")), {"a": 8, "b": 56}),
    ShareCase("a guarantee is a floor, and the other queue is limited to what is not guaranteed", 64,
              (Q("a", 1, guarantee=24), Q("b", 3)), {"a": 24, "b": 40}),
    ShareCase("a queue that asks for less gets what it asks and the rest is redistributed by weight", 64,
              (Q("small", 2, request=8), Q("b"), Q("c")), {"small": 8, "b": 28, "c": 28}),
    ShareCase("queues that together ask for less than the cluster get all they ask", 64,
              (Q("a", request=10), Q("b", 3, request=20)), {"a": 10, "b": 20}),
    ShareCase("a queue asking for nothing deserves nothing", 64, (Q("idle", request=0), Q("b")),
              {"idle": 0, "b": 64}),
]


@pytest.mark.parametrize("case", SHARE_CASES, ids=lambda c: c.name)
def test_deserved_shares(case: ShareCase) -> None:
    total = gpus(case.total)
    infos = [
        QueueInfo(q.name, q.weight, None if q.capability is None else gpus(q.capability), gpus(q.guarantee))
        for q in case.queues
    ]
    total_guarantee = ZERO
    for info in infos:
        total_guarantee = total_guarantee + info.guarantee
    demands = [
        QueueDemand(q.name, q.weight, gpus(q.request), info.guarantee,
                    real_capability(info, total, total_guarantee)[0])
        for q, info in zip(case.queues, infos, strict=True)
    ]
    shares = deserved_shares(total, demands)
    assert {name: r.gpu // 1000 for name, r in shares.items()} == case.expected


# ---- the capability gate at enqueue ------------------------------------------------------------------------
def test_a_queue_at_12_of_16_gpus_holds_an_8_gpu_podgroup_pending_and_says_why() -> None:
    c = (
        cluster()
        .nodes("n", 4, gpu=8)
        .queue("team-a", capability={GPU: 16})
        .job("running", queue="team-a", replicas=3, gpu=4)
    )
    c.cycle()
    assert len(c.sim.bound("running")) == 3
    c.job("big", queue="team-a", replicas=8, gpu=1, min_resources={GPU: 8})
    for _ in range(3):
        c.cycle()
    assert c.sim.podgroup("big")["status"]["phase"] == "Pending"
    assert c.sim.bound("big") == {}
    condition = c.sim.condition("big")
    assert condition is not None and condition["reason"] == "NotEnqueued"
    assert c.sim.reasons("big") == (
        QueueLimit("team-a", CAPABILITY, GPU, limit_amount=16_000, total=20_000, requested=8_000, allocated=12_000),
    )


def test_a_podgroup_that_fits_under_the_capability_is_admitted() -> None:
    c = cluster().nodes("n", 4, gpu=8).queue("team-a", capability={GPU: 16})
    c.job("running", queue="team-a", replicas=3, gpu=4).cycle()
    c.job("fits", queue="team-a", replicas=4, gpu=1, min_resources={GPU: 4}).cycle()
    assert len(c.sim.bound("fits")) == 4


def test_a_queue_with_a_16_gpu_capability_never_runs_more_than_16_gpus() -> None:
    c = cluster().nodes("n", 4, gpu=8).queue("team-a", capability={GPU: 16})
    for i in range(12):
        c.job(f"small-{i}", queue="team-a", replicas=1, gpu=2)
    used = []
    for step in range(6):
        c.cycle()
        used.append(c.sim.allocated_by_queue()["team-a"].gpu // 1000)
        if step == 2:  # two jobs finish; their GPUs go to the next ones, still within 16
            for name in ("small-0", "small-1"):
                for pod in c.sim.pods_of(name):
                    c.sim.finish_pod(pod.task.key)
    assert max(used) == 16
    assert sum(len(c.sim.bound(f"small-{i}")) for i in range(12)) == 10


def test_admitted_podgroups_count_against_the_capability_before_they_run() -> None:
    c = cluster().nodes("n", 4, gpu=8).queue("team-a", capability={GPU: 16})
    c.job("first", queue="team-a", replicas=10, gpu=1, min_resources={GPU: 10})
    c.job("second", queue="team-a", replicas=10, gpu=1, min_resources={GPU: 10})
    c.cycle()
    phases = {n: c.sim.podgroup(n)["status"]["phase"] for n in ("first", "second")}
    assert sorted(phases.values()) == ["Inqueue", "Pending"]  # the admitted one is binding this cycle
    held = next(n for n, p in phases.items() if p == "Pending")
    condition = c.sim.condition(held)
    assert condition is not None
    limit = c.sim.reasons(held)[0]
    assert isinstance(limit, QueueLimit) and limit.limit == CAPABILITY
    assert (limit.allocated, limit.admitted, limit.requested, limit.total, limit.limit_amount) == (
        0, 10_000, 10_000, 20_000, 16_000)
    c.cycle()
    assert c.sim.podgroup(held)["status"]["phase"] == "Pending"
    assert c.sim.podgroup(next(n for n in phases if n != held))["status"]["phase"] == "Running"


# ---- fairness over time ------------------------------------------------------------------------------------
def run_with_lifetime(c: ClusterBuilder, cycles: int, lifetime: int = 3) -> list[tuple[int, int]]:
    """Cycles in which every pod runs `lifetime` cycles after binding; (light, heavy) GPUs after each."""
    started: dict[str, int] = {}
    shares = []
    for step in range(cycles):
        c.cycle()
        for key, pod in c.sim.pods.items():
            if pod.manifest["spec"].get("nodeName"):
                started.setdefault(key, step)
        for key, at in started.items():
            if at == step - lifetime + 1 and c.sim.pods[key].manifest["status"]["phase"] == "Running":
                c.sim.finish_pod(key)
        allocated = c.sim.allocated_by_queue()
        shares.append((allocated["light"].gpu // 1000, allocated["heavy"].gpu // 1000))
    return shares


def test_weights_1_and_3_split_the_gpus_a_quarter_and_three_quarters_from_the_start() -> None:
    c = cluster().nodes("n", 8, gpu=8).queue("light", weight=1).queue("heavy", weight=3)
    for i in range(100):  # more 1-GPU jobs than either queue can finish in these cycles
        c.job(f"light-{i}", queue="light", gpu=1)
    for i in range(250):
        c.job(f"heavy-{i}", queue="heavy", gpu=1)
    shares = run_with_lifetime(c, 12)
    assert all(light == 16 and heavy == 48 for light, heavy in shares), shares


def test_a_late_queue_converges_to_its_quarter_as_the_other_queues_jobs_finish() -> None:
    c = cluster().nodes("n", 8, gpu=8).queue("light", weight=1).queue("heavy", weight=3)
    for i in range(300):
        c.job(f"heavy-{i}", queue="heavy", gpu=1)
    assert run_with_lifetime(c, 2, lifetime=4)[-1] == (0, 64)  # alone, heavy may use the whole cluster
    for i in range(100):
        c.job(f"light-{i}", queue="light", gpu=1)
    shares = run_with_lifetime(c, 10, lifetime=4)
    assert shares[0][0] < 16  # no reclaim: light waits for heavy's jobs to finish
    for light, heavy in shares[-4:]:
        assert abs(light - 16) <= 1 and abs(heavy - 48) <= 1, shares


def test_shares_are_exact_to_the_unit_after_several_rounds() -> None:
    """Differential seed 108: 6 cpus, 20Gi and 1 GPU between queues of weight 4, 1 and 4. The third queue is due
    6 - 2.5 = 3.5 cpus exactly and the first the one GPU; rounded down every round they got 3.499 cpus and 0.999
    GPUs, and a 0.5-cpu task that fitted the third queue's share to the milli-cpu was refused."""
    gi = 2**30
    total = Resource.of(6000, 20 * gi, 0, {GPU: 1000})
    demands = [QueueDemand("q0", 4, Resource.of(2500, 10 * gi, 0, {GPU: 5000})), QueueDemand("q1", 1, ZERO),
               QueueDemand("q2", 4, Resource.of(4000, 8448 * 2**20))]
    shares = deserved_shares(total, demands)
    assert {name: (r.cpu, r.gpu) for name, r in shares.items()} == {"q0": (2500, 1000), "q1": (0, 0), "q2": (3500, 0)}


def test_a_cluster_split_three_ways_loses_at_most_a_unit_to_rounding() -> None:
    shares = deserved_shares(gpus(8), [QueueDemand(q, 1, gpus(8)) for q in ("a", "b", "c")])
    assert sorted(r.gpu for r in shares.values()) == [2667, 2667, 2667]  # 8000 / 3 = 2666.67, to the nearest
