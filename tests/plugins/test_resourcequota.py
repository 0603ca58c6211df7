"""resourcequota: at enqueue, a PodGroup's minResources plus what the cycle already admitted in its namespace
must fit each of the namespace's ResourceQuotas' `status.hard - status.used`, name by exact name (Volcano's
pkg/scheduler/plugins/resourcequota/resourcequota.go and its resourcequota_test.go cases)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from scheduler.api.reasons import QueueLimit, ResourceQuotaExceeded
from scheduler.framework.conf import SchedulerConf
from scheduler.testing import cluster, conf_from_tiers

G = 10**9  # nano-units per unit: the reasons' amounts are the quota's exact quantities times 10^9
ENQUEUE = "enqueue"  # held jobs stay Pending; only enqueue runs, so an admitted job reads Inqueue


def conf(*tiers: tuple[str | dict[str, Any], ...]) -> SchedulerConf:
    return conf_from_tiers(*(tiers or (("priority", "gang"), ("resourcequota",))), actions=ENQUEUE)


def quota(namespace: str, name: str, hard: Mapping[str, str], used: Mapping[str, str] | None = None) -> dict:
    """A ResourceQuota as the quota controller leaves it: its status says hard and used."""
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": namespace},
            "spec": {"hard": dict(hard)},
            "status": {"hard": dict(hard), "used": dict(used if used is not None else dict.fromkeys(hard, "0"))}}


def phase(c: Any, key: str) -> str:
    return str(c.sim.podgroup(key)["status"]["phase"])


@dataclass(frozen=True)
class Case:
    name: str
    quotas: tuple[dict, ...]
    jobs: tuple[tuple[str, dict[str, str] | None], ...]  # (namespace/name, minResources), submitted in order
    admitted: frozenset[str]
    held: dict[str, tuple[ResourceQuotaExceeded, ...]] = field(default_factory=dict)


NORMAL = {"cpu": "2", "memory": "2G"}  # Volcano's test: api.BuildResourceList("2000m", "2G")
HUGE = {"cpu": "20", "memory": "20G"}
CASES = [
    Case("a quota that holds the job's minResources admits it",
         (quota("default", "test", NORMAL),), (("default/pg1", NORMAL),), frozenset({"default/pg1"})),
    Case("a quota that cannot hold them keeps the job Pending, one reason per resource it passes",
         (quota("default", "test", NORMAL),), (("default/pg2", HUGE),), frozenset(),
         {"default/pg2": (ResourceQuotaExceeded("default", "test", "cpu", 2 * G, 0, 0, 20 * G),
                          ResourceQuotaExceeded("default", "test", "memory", 2 * 10**9 * G, 0, 0, 20 * 10**9 * G))}),
    Case("with no ResourceQuota in the namespace any job is admitted",
         (), (("default/pg2", HUGE),), frozenset({"default/pg2"})),
    Case("a job without minResources is admitted",
         (quota("default", "test", NORMAL),), (("default/pg3", None),), frozenset({"default/pg3"})),
    Case("what the quota's status says is used counts",
         (quota("default", "q", {"cpu": "4"}, {"cpu": "3"}),), (("default/a", {"cpu": "2"}),), frozenset(),
         {"default/a": (ResourceQuotaExceeded("default", "q", "cpu", 4 * G, 3 * G, 0, 2 * G),)}),
    Case("what the cycle admitted before counts: the second of two 2-cpu jobs passes a 3-cpu quota",
         (quota("default", "q", {"cpu": "3"}),), (("default/a", {"cpu": "2"}), ("default/b", {"cpu": "2"})),
         frozenset({"default/a"}),
         {"default/b": (ResourceQuotaExceeded("default", "q", "cpu", 3 * G, 0, 2 * G, 2 * G),)}),
    Case("a quota on requests.cpu does not hold a minResources that names cpu alone (names are not translated)",
         (quota("default", "q", {"requests.cpu": "1"}),), (("default/a", {"cpu": "4"}),), frozenset({"default/a"})),
    Case("a quota on requests.cpu holds a minResources that names requests.cpu, as Volcano's job controller writes",
         (quota("default", "q", {"requests.cpu": "1"}),), (("default/a", {"cpu": "4", "requests.cpu": "4"}),),
         frozenset(), {"default/a": (ResourceQuotaExceeded("default", "q", "requests.cpu", G, 0, 0, 4 * G),)}),
    Case("a quota on count/pods holds the pod count the job controller writes",
         (quota("default", "q", {"count/pods": "2"}, {"count/pods": "1"}),),
         (("default/a", {"cpu": "1", "count/pods": "2", "pods": "2"}),), frozenset(),
         {"default/a": (ResourceQuotaExceeded("default", "q", "count/pods", 2 * G, G, 0, 2 * G),)}),
    Case("a resource the quota does not name is not limited",
         (quota("default", "q", {"memory": "1Gi"}),), (("default/a", {"cpu": "64", "memory": "1Gi"}),),
         frozenset({"default/a"})),
    Case("every quota of the namespace must hold the job; the first that fails (by name) is the reason",
         (quota("default", "b-wide", {"cpu": "100"}), quota("default", "a-tight", {"cpu": "1"})),
         (("default/a", {"cpu": "2"}),), frozenset(),
         {"default/a": (ResourceQuotaExceeded("default", "a-tight", "cpu", G, 0, 0, 2 * G),)}),
    Case("a quantity finer than a millicore is compared exactly",
         (quota("default", "q", {"cpu": "1000001u"}),), (("default/a", {"cpu": "1000002u"}),), frozenset(),
         {"default/a": (ResourceQuotaExceeded("default", "q", "cpu", 1_000_001_000, 0, 0, 1_000_002_000),)}),
    Case("a job in another namespace is not held by this namespace's quota",
         (quota("team-a", "q", {"cpu": "1"}),), (("team-a/a", {"cpu": "2"}), ("team-b/b", {"cpu": "2"})),
         frozenset({"team-b/b"}),
         {"team-a/a": (ResourceQuotaExceeded("team-a", "q", "cpu", G, 0, 0, 2 * G),)}),
]


def run(case_quotas: tuple[dict, ...], jobs: tuple[tuple[str, dict[str, str] | None], ...],
        scheduler_conf: SchedulerConf | None = None) -> Any:
    c = cluster().node("n1", cpu="64", memory="256Gi")
    for q in case_quotas:
        c.sim.add_resource_quota(q)
    for key, minimum in jobs:
        namespace, name = key.split("/")
        c.job(name, namespace=namespace, replicas=1, cpu="1", min_resources=minimum)
        c.sim.now += 1.0  # submitted in order: enqueue takes the older first
    c.cycle(scheduler_conf or conf())
    return c


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_resourcequota_enqueue_gate(case: Case) -> None:
    c = run(case.quotas, case.jobs)
    assert {key for key, _ in case.jobs if phase(c, key) == "Inqueue"} == case.admitted
    assert {key for key, _ in case.jobs if phase(c, key) == "Pending"} == {k for k, _ in case.jobs} - case.admitted
    for key, reasons in case.held.items():
        condition = c.sim.condition(key)
        assert condition is not None and condition["reason"] == "NotEnqueued"
        assert condition["message"].startswith("resource quota insufficient: ResourceQuota ")
        decision = c.sim.decision(key)
        assert decision is not None and decision.plugin == "resourcequota" and decision.reasons == reasons


def test_without_the_plugin_the_quota_holds_nothing() -> None:
    over = CASES[1]
    c = run(over.quotas, over.jobs, conf(("priority", "gang"), ("predicates",)))
    assert phase(c, "default/pg2") == "Inqueue"


def test_a_job_another_plugin_of_the_tier_rejects_does_not_use_the_quota() -> None:
    """Volcano's TestJobEnqueuedOnOtherPluginsReject: only a job every plugin admits adds to the namespace's
    admitted amounts, so the next job that fits alone is admitted."""
    scheduler_conf = conf(("priority", "gang"), ("resourcequota", "proportion"))
    c = cluster().node("n1", cpu="64", memory="256Gi").queue("a-small", capability={"cpu": "500m"})
    c.queue("b-big")
    c.sim.add_resource_quota(quota("ns1", "rq1", {"cpu": "1"}))  # exactly one 1-cpu job fits
    c.job("pga", namespace="ns1", queue="a-small", cpu="500m", min_resources={"cpu": "1"})
    c.sim.now += 1.0
    c.job("pgb", namespace="ns1", queue="b-big", cpu="500m", min_resources={"cpu": "1"})
    c.cycle(scheduler_conf)
    held = c.sim.decision("ns1/pga")
    assert phase(c, "ns1/pga") == "Pending"
    assert held is not None and held.plugin == "proportion" and [type(r) for r in held.reasons] == [QueueLimit]
    assert phase(c, "ns1/pgb") == "Inqueue"


def test_a_permit_in_an_earlier_tier_decides_as_in_volcano() -> None:
    """resourcequota permits (Volcano's util.Permit, not an abstention): with it in the first tier, the second
    tier's enqueue gate (proportion's capability here) is not asked; in the same tier, it is."""
    over_capability: dict[str, str] = {"cpu": "4"}
    for tiers, admitted in (((("priority", "gang", "resourcequota"), ("proportion",)), True),
                            ((("priority", "gang"), ("resourcequota", "proportion")), False)):
        c = cluster().node("n1", cpu="64", memory="256Gi").queue("small", capability={"cpu": "1"})
        c.job("a", queue="small", cpu="1", min_resources=over_capability)
        c.cycle(conf(*tiers))
        assert (phase(c, "default/a") == "Inqueue") is admitted
        if not admitted:
            decision = c.sim.decision("default/a")
            assert decision is not None and [type(r) for r in decision.reasons] == [QueueLimit]


def test_enable_job_enqueued_false_turns_the_gate_off() -> None:
    """Volcano registers both the vote and the enqueued hook behind `enableJobEnqueued`."""
    over = CASES[1]
    for switch, held in ((True, True), (False, False)):
        scheduler_conf = conf(("priority", "gang"), ({"name": "resourcequota", "enableJobEnqueued": switch},))
        c = run(over.quotas, over.jobs, scheduler_conf)
        assert (phase(c, "default/pg2") == "Pending") is held


# ---- a property over seeded random namespaces, quotas and PodGroups ---------------------------------------

NAMES = ("cpu", "requests.cpu", "limits.cpu", "memory", "requests.memory", "count/pods")


def amount(name: str, units: int) -> str:
    """`units` of `name` as a quantity: millicores for cpu names, Mi for memory names, a count for pods."""
    return f"{units}m" if name.endswith("cpu") else f"{units}Mi" if name.endswith("memory") else str(units)


@dataclass
class World:
    quotas: list[tuple[str, str, dict[str, int], dict[str, int]]]  # (namespace, name, hard, used) in units
    jobs: list[tuple[str, dict[str, int] | None]]  # (namespace/name, minResources in units), in order


def world(seed: int) -> World:
    rng = random.Random(seed)
    quotas, jobs = [], []
    for n in range(rng.randint(1, 4)):
        namespace = f"ns{n}"
        for q in range(rng.choice((0, 1, 1, 2))):
            names = rng.sample(NAMES, rng.randint(1, 3))
            hard = {name: rng.randint(0, 8000) for name in names}
            used = {name: rng.randint(0, hard[name] + 500) for name in names}  # used may pass hard already
            quotas.append((namespace, f"q{q}", hard, used))
        for j in range(rng.randint(1, 6)):
            minimum = None if rng.random() < 0.15 else {
                name: rng.randint(0, 4000) for name in rng.sample(NAMES, rng.randint(1, len(NAMES)))}
            jobs.append((f"{namespace}/j{j}", minimum))
    return World(quotas, jobs)


def play(w: World, namespaces: set[str] | None = None) -> set[str]:
    """The jobs enqueued in one cycle, with only the objects of `namespaces` (all when None)."""
    keep = (lambda ns: True) if namespaces is None else (lambda ns: ns in namespaces)
    def quantities(units: dict[str, int]) -> dict[str, str]:
        return {k: amount(k, v) for k, v in units.items()}

    quotas = tuple(quota(ns, name, quantities(hard), quantities(used)) for ns, name, hard, used in w.quotas if keep(ns))
    jobs = tuple((key, quantities(minimum) if minimum is not None else None)
                 for key, minimum in w.jobs if keep(key.split("/")[0]))
    c = run(quotas, jobs)
    return {key for key, _ in jobs if phase(c, key) == "Inqueue"}


@pytest.mark.parametrize("seed", range(30))
def test_never_enqueues_beyond_hard_minus_used_and_other_namespaces_are_unaffected(seed: int) -> None:
    w = world(seed)
    admitted = play(w)
    minimums = dict(w.jobs)
    for ns, _, hard, used in w.quotas:
        mine = [minimums[key] for key in admitted if key.startswith(f"{ns}/") and minimums[key] is not None]
        for name, limit in hard.items():
            counted = [m[name] for m in mine if m is not None and name in m]
            if counted:  # a resource no admitted job names is not checked (Volcano masks to the job's names)
                assert used[name] + sum(counted) <= limit, (ns, name)
    for key, minimum in w.jobs:  # a held job passes some quota even on top of what was admitted
        ns = key.split("/")[0]
        if key in admitted:
            continue
        assert minimum is not None
        others = [minimums[k] for k in admitted if k.startswith(f"{ns}/")]
        assert any(used[name] + sum(m[name] for m in others if m is not None and name in m) + minimum[name] > limit
                   for q_ns, _, hard, used in w.quotas if q_ns == ns
                   for name, limit in hard.items() if name in minimum), key
    for ns in {key.split("/")[0] for key, _ in w.jobs}:  # each namespace decides alone
        alone = play(w, {ns})
        assert alone == {key for key in admitted if key.startswith(f"{ns}/")}

