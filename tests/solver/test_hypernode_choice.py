"""network-topology-aware chooses a job's HyperNode as Volcano does (plugins/hypernode_score.py): tiers from
`highestTierAllowed` or `highestTierName`, the hypernode-level binpack score, and the job's HyperNode kept in the
PodGroup annotation `volcano.sh/job-allocated-hypernode`."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from scheduler.api.fields import ALLOCATED_HYPERNODE
from scheduler.api.reasons import FieldInvalid
from scheduler.cache.parse import ParseCache
from scheduler.cycle import conf_from_text
from scheduler.framework.conf import SchedulerConf
from scheduler.testing import ClusterBuilder, cluster, pod_object

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: network-topology-aware
    arguments:
      solver.timeLimitMs: 500
      solver.workers: 1
"""


def conf(extra: str = "") -> SchedulerConf:
    return conf_from_text(CONF + extra, source="test")


def hypernode(c: ClusterBuilder, name: str, tier: int, members: list[str], *, kind: str = "Node",
              tier_name: str = "") -> None:
    spec: dict[str, Any] = {"tier": tier, "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}}
                                                      for m in members]}
    if tier_name:
        spec["tierName"] = tier_name
    c.sim.add_hypernode({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                         "metadata": {"name": name}, "spec": spec})


def gang(c: ClusterBuilder, name: str, replicas: int, topology: dict[str, Any], cpu: str = "4",
         min_member: int | None = None) -> None:
    c.sim.add_podgroup({"metadata": {"name": name},
                        "spec": {"minMember": replicas if min_member is None else min_member, "queue": "default",
                                 "networkTopology": topology},
                        "status": {"phase": "Inqueue"}})
    for i in range(replicas):
        c.sim.add_pod(pod_object(f"{name}-{i}", group=name, cpu=cpu, memory="1Gi"))


def running(c: ClusterBuilder, name: str, node: str, cpu: str) -> None:
    obj = pod_object(name, cpu=cpu, memory="1Gi")
    obj["spec"]["nodeName"] = node
    obj["status"]["phase"] = "Running"
    c.sim.add_pod(obj)


def two_racks() -> ClusterBuilder:
    """Four 16-cpu nodes: rack-a = n0, n1; rack-b = n2, n3 (tier 1, tierName `rack`), under `spine` (tier 2)."""
    c = cluster()
    for name in ("n0", "n1", "n2", "n3"):
        c.node(name, cpu=16, memory="64Gi")
    hypernode(c, "rack-a", 1, ["n0", "n1"], tier_name="rack")
    hypernode(c, "rack-b", 1, ["n2", "n3"], tier_name="rack")
    hypernode(c, "spine", 2, ["rack-a", "rack-b"], kind="HyperNode", tier_name="spine")
    return c


def annotation(c: ClusterBuilder, group: str) -> str | None:
    return (c.sim.podgroup(f"default/{group}")["metadata"].get("annotations") or {}).get(ALLOCATED_HYPERNODE)


def test_a_hard_tier_one_job_goes_to_the_hypernode_whose_nodes_already_hold_work() -> None:
    """rack-b holds 6 cpu of work: its score, (6 + 8) / 32, beats rack-a's 8 / 32 (memory alike), so the gang goes
    there, though rack-a comes first by name and holds it as well."""
    c = two_racks()
    running(c, "work", "n3", "6")
    gang(c, "g", 2, {"mode": "hard", "highestTierAllowed": 1})
    c.cycle(conf())
    assert set(c.sim.bound("default/g").values()) <= {"n2", "n3"} and len(c.sim.bound("default/g")) == 2
    assert annotation(c, "g") == "rack-b"


def test_with_choose_domains_the_solver_objective_picks_instead() -> None:
    """The opt-in keeps volcano-py's former choice: CP-SAT over every allowed domain (here the nodes in order,
    rack-a), and no annotation is written."""
    c = two_racks()
    running(c, "work", "n3", "6")
    gang(c, "g", 2, {"mode": "hard", "highestTierAllowed": 1})
    c.cycle(conf("      solver.chooseDomains: true\n"))
    assert len(c.sim.bound("default/g")) == 2
    assert annotation(c, "g") is None


FOO = "      hypernode.binpack.resources: example.com/foo\n"


@pytest.mark.parametrize(("arguments", "rack"), [("", ("n0", "n1")), (FOO, ("n2", "n3"))])
def test_a_hypernode_the_job_would_overuse_scores_zero(arguments: str, rack: tuple[str, ...]) -> None:
    """rack-a holds 12 cpu of work, so by cpu and memory it wins. With example.com/foo in the score, the requests
    of all the job's 3 tasks (1 foo each) would overuse rack-a's 2 foo: it scores 0 and rack-b wins, though the
    job's minimum (1 task) fits in either."""
    c = cluster()
    for name, foo in (("n0", "1"), ("n1", "1"), ("n2", "8"), ("n3", "8")):
        c.node(name, cpu=16, memory="64Gi", extra={"example.com/foo": foo})
    hypernode(c, "rack-a", 1, ["n0", "n1"])
    hypernode(c, "rack-b", 1, ["n2", "n3"])
    running(c, "work", "n1", "12")
    c.sim.add_podgroup({"metadata": {"name": "g"}, "spec": {"minMember": 1, "queue": "default",
                                                          "networkTopology": {"mode": "hard",
                                                                              "highestTierAllowed": 1}},
                        "status": {"phase": "Inqueue"}})
    for i in range(3):
        pod = pod_object(f"g-{i}", group="g", cpu="1", memory="1Gi")
        pod["spec"]["containers"][0]["resources"]["requests"]["example.com/foo"] = "1"
        c.sim.add_pod(pod)
    c.cycle(conf(arguments))
    assert c.sim.bound("default/g")["g-0"] in rack


@pytest.mark.parametrize(("tier_name", "bound"), [("rack", 0), ("spine", 3)])
def test_highest_tier_name_is_the_tier_of_the_hypernodes_that_carry_it(tier_name: str, bound: int) -> None:
    """Three 12-cpu tasks: no rack holds them (two 16-cpu nodes each), the spine does. `rack` names tier 1, so the
    job waits; `spine` names tier 2, so it spans racks."""
    c = two_racks()
    gang(c, "g", 3, {"mode": "hard", "highestTierName": tier_name}, cpu="12")
    c.cycle(conf())
    assert len(c.sim.bound("default/g")) == bound
    assert annotation(c, "g") == ("spine" if bound else None)


def test_a_highest_tier_name_no_hypernode_carries_leaves_the_job_without_a_limit_and_logs_once(caplog) -> None:
    c = two_racks()
    gang(c, "g", 3, {"mode": "hard", "highestTierName": "zone"}, cpu="12")
    with caplog.at_level(logging.WARNING, logger="volcano_py.scheduler"):
        c.cycle(conf())
        c.cycle(conf())
    assert len(c.sim.bound("default/g")) == 3
    assert sum("'zone'" in r.getMessage() for r in caplog.records) == 1


def test_a_podgroup_with_both_tier_fields_is_left_out_with_a_typed_reason_and_others_are_read(caplog) -> None:
    """Past the webhook (it refuses both), the scheduler reads such a PodGroup as unreadable: a FieldInvalid
    naming spec.networkTopology, one log line, and the other PodGroups are read as usual."""
    skipped: list[tuple[str, str, str]] = []
    parser = ParseCache(frozenset({"volcano-py"}), threading.Lock(),
                        lambda kind, key, message: skipped.append((kind, key, message)))

    def podgroup(name: str, topology: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "default", "resourceVersion": "1"},
                "spec": {"minMember": 1, "queue": "default", "networkTopology": topology}, "status": {}}

    both = podgroup("both", {"mode": "hard", "highestTierAllowed": 1, "highestTierName": "rack"})
    with caplog.at_level(logging.WARNING):
        jobs = parser.podgroups([both, podgroup("named", {"highestTierName": "rack"})], {}, "default")
        parser.podgroups([both], {}, "default")
    assert [j.key for j in jobs] == ["default/named"]
    assert jobs[0].extra["networkTopology"] == {"mode": "hard", "highestTierName": "rack"}
    (reason,) = parser.problems[("PodGroup", "default/both")]
    assert isinstance(reason, FieldInvalid) and reason.path == "spec.networkTopology"
    assert "highestTierAllowed and highestTierName" in reason.problem
    assert [k for k, key, _ in skipped if key == "default/both"] == ["PodGroup"]


def test_a_killed_pod_comes_back_in_the_job_hypernode_though_another_now_scores_higher() -> None:
    """The gang is placed in rack-b (its work scores it higher). The work then moves to rack-a, and one of the
    gang's pods is killed: the job's HyperNode, read back from the annotation, keeps the new pod in rack-b."""
    c = two_racks()
    running(c, "work", "n3", "6")
    gang(c, "g", 2, {"mode": "hard", "highestTierAllowed": 1})
    c.cycle(conf())
    assert annotation(c, "g") == "rack-b"
    c.sim.delete_pod("default/work")
    running(c, "work-a", "n0", "10")
    victim = next(iter(c.sim.bound("default/g")))
    c.sim.delete_pod(f"default/{victim}")
    c.sim.add_pod(pod_object(victim, group="g", cpu="4", memory="1Gi"))
    c.cycle(conf())
    assert set(c.sim.bound("default/g").values()) <= {"n2", "n3"} and len(c.sim.bound("default/g")) == 2
    assert annotation(c, "g") == "rack-b"


def test_without_the_annotation_a_lone_replacement_follows_the_score() -> None:
    """The same story with the annotation gone and the gang's other pod gone too: the job holds no node, so it
    has no HyperNode (Volcano drops it) and the score sends it to rack-a, whose nodes now hold the work."""
    c = two_racks()
    running(c, "work", "n3", "6")
    gang(c, "g", 2, {"mode": "hard", "highestTierAllowed": 1})
    c.cycle(conf())
    c.sim.delete_pod("default/work")
    running(c, "work-a", "n0", "10")
    for name in list(c.sim.bound("default/g")):
        c.sim.delete_pod(f"default/{name}")
        c.sim.add_pod(pod_object(name, group="g", cpu="4", memory="1Gi"))
    c.cycle(conf())
    assert set(c.sim.bound("default/g").values()) <= {"n0", "n1"} and len(c.sim.bound("default/g")) == 2
    assert annotation(c, "g") == "rack-a"


def test_the_annotation_is_recovered_from_placed_pods_and_dropped_for_a_hypernode_that_is_gone() -> None:
    """A job running with no annotation (placed by an older scheduler) gets the lowest HyperNode holding its
    pods; an annotation naming a HyperNode that no longer exists is replaced the same way."""
    c = two_racks()
    c.sim.add_podgroup({"metadata": {"name": "g", "annotations": {ALLOCATED_HYPERNODE: "gone"}},
                        "spec": {"minMember": 2, "queue": "default",
                                 "networkTopology": {"mode": "hard", "highestTierAllowed": 2}},
                        "status": {"phase": "Running"}})
    for i, node in enumerate(("n1", "n2")):
        pod = pod_object(f"g-{i}", group="g", cpu="4", memory="1Gi")
        pod["spec"]["nodeName"] = node
        pod["status"]["phase"] = "Running"
        c.sim.add_pod(pod)
    c.cycle(conf())
    assert annotation(c, "g") == "spine"


# ---- seeded workloads against a reference written from Volcano's rules -----------------------------------

GI = 2**30


def reference_choice(racks: dict[str, list[str]], capacity: dict[str, tuple[int, int]],
                     used: dict[str, tuple[int, int]], replicas: int, cpu: int, memory: int) -> set[str]:
    """The HyperNodes Volcano may pick for a hard tier-1 gang of identical tasks: among the racks that hold the
    gang (identical tasks fit wherever the sum over nodes of how many fit each node reaches the count), those
    with the highest mean over cpu and memory of (used + the gang's request) / allocatable, 0 if over."""
    best: dict[str, float] = {}
    for rack, members in racks.items():
        slots = sum(min((capacity[n][0] - used[n][0]) // cpu, (capacity[n][1] - used[n][1]) // memory)
                    for n in members)
        if slots < replicas:
            continue
        ratios = []
        for dim, request in ((0, replicas * cpu), (1, replicas * memory)):
            room = sum(capacity[n][dim] for n in members)
            taken = sum(used[n][dim] for n in members)
            ratios.append(-1.0 if taken + request > room else (taken + request) / room)
        best[rack] = 0.0 if min(ratios) < 0 else sum(ratios) / 2
    if not best:
        return set()
    top = max(best.values())
    return {rack for rack, score in best.items() if score >= top - 1e-9}


@pytest.mark.parametrize("seed", range(40))
def test_the_chosen_hypernode_is_volcanos_on_seeded_workloads(seed: int) -> None:
    import random

    rng = random.Random(seed)
    c = cluster()
    racks: dict[str, list[str]] = {}
    capacity: dict[str, tuple[int, int]] = {}
    used: dict[str, tuple[int, int]] = {}
    for r in range(rng.randint(2, 4)):
        members = [f"r{r}n{i}" for i in range(rng.randint(1, 3))]
        racks[f"rack-{r}"] = members
        for name in members:
            capacity[name] = (rng.choice((8, 16, 32)), rng.choice((32, 64, 128)))
            used[name] = (0, 0)
            c.node(name, cpu=capacity[name][0], memory=f"{capacity[name][1]}Gi")
        hypernode(c, f"rack-{r}", 1, members)
    for i in range(rng.randint(0, 8)):
        name = rng.choice(sorted(capacity))
        cpu, memory = rng.randint(1, 6), rng.randint(1, 8)
        if used[name][0] + cpu <= capacity[name][0] and used[name][1] + memory <= capacity[name][1]:
            used[name] = (used[name][0] + cpu, used[name][1] + memory)
            pod = pod_object(f"work-{i}", cpu=str(cpu), memory=f"{memory}Gi")
            pod["spec"]["nodeName"] = name
            pod["status"]["phase"] = "Running"
            c.sim.add_pod(pod)
    replicas, cpu, memory = rng.randint(1, 4), rng.randint(1, 8), rng.randint(1, 8)
    c.sim.add_podgroup({"metadata": {"name": "g"},
                        "spec": {"minMember": replicas, "queue": "default",
                                 "networkTopology": {"mode": "hard", "highestTierAllowed": 1}},
                        "status": {"phase": "Inqueue"}})
    for i in range(replicas):
        c.sim.add_pod(pod_object(f"g-{i}", group="g", cpu=str(cpu), memory=f"{memory}Gi"))
    expected = reference_choice(racks, capacity, used, replicas, cpu, memory)
    c.cycle(conf())
    bound = c.sim.bound("default/g")
    if not expected:
        assert bound == {}
        return
    assert len(bound) == replicas
    chosen = {rack for rack, members in racks.items() if set(bound.values()) <= set(members)}
    assert chosen & expected, (chosen, expected)
    assert annotation(c, "g") == min(expected)  # equal scores: by name, where Volcano walks a Go map


@pytest.mark.parametrize(("max_domains", "preempted"), [(2, False), (4, True)])
def test_gang_eviction_bounds_a_job_named_by_tier_name_as_by_tier_number(max_domains: int, preempted: bool) -> None:
    """As tests/preemption's maxDomains case, with `highestTierName: rack` in place of `highestTierAllowed: 1`:
    the gang looks for victims one rack at a time, in the first `maxDomains` racks (hn-d, the only one with a
    low-priority gang, is the fourth). Read as no limit, the whole cluster was one domain and hn-d's gang went."""
    from scheduler.testing import conf_from_tiers

    c = cluster().priority_class("low", 10).priority_class("high", 1000)
    for domain in "abcd":
        c.nodes(f"{domain}-", 2, gpu=2, cpu="64", memory="256Gi")
        hypernode(c, f"hn-{domain}", 1, [f"{domain}-0", f"{domain}-1"], tier_name="rack")
    hypernode(c, "spine", 2, [f"hn-{d}" for d in "abcd"], kind="HyperNode", tier_name="spine")
    for domain in "abcd":
        pc = "low" if domain == "d" else "high"
        c.sim.add_podgroup({"metadata": {"name": f"busy-{domain}"}, "spec": {"minMember": 2, "priorityClassName": pc}})
        for i in range(2):
            c.sim.add_pod(pod_object(f"busy-{domain}-{i}", group=f"busy-{domain}", gpu=2, priority_class=pc,
                                     node_selector={"kubernetes.io/hostname": f"{domain}-{i}"}))
    conf = conf_from_tiers(["priority", {"name": "gang", "enablePreemptable": False}, "conformance"],
                           [{"name": "drf", "enablePreemptable": False}, "predicates", "nodeorder",
                            {"name": "network-topology-aware", "arguments": {}}],
                           actions="allocate, backfill, gangreclaim, gangpreempt",
                           configurations={"gangpreempt": {"maxDomains": max_domains}})
    c.cycle(conf)
    c.sim.add_podgroup({"metadata": {"name": "high"},
                        "spec": {"minMember": 2, "priorityClassName": "high",
                                 "networkTopology": {"mode": "hard", "highestTierName": "rack"}}})
    for i in range(2):
        c.sim.add_pod(pod_object(f"high-{i}", group="high", gpu=2, priority_class="high"))
    for _ in range(3):
        c.cycle(conf)
    assert (set(c.sim.evicted) == {"default/busy-d-0", "default/busy-d-1"}) is preempted
    assert len(c.sim.evicted) == (2 if preempted else 0)


# ---- pods of jobs without a network topology: hypernode.binpack.normal-pod.* ------------------------------


def scores_of(c: ClusterBuilder, text: str, pod: str) -> dict[str, float]:
    import numpy as np

    from scheduler.framework.session import Session
    from scheduler.plugins.registry import PLUGINS

    ssn = Session(c.sim.snapshot(), conf(text), PLUGINS)
    task = next(t for job in ssn.jobs.values() for t in job.tasks.values() if t.name == pod)
    return {n.name: float(ssn.fit.node_scores(task, np.array([ssn.arrays.position[n.name]]))[0])
            for n in ssn.node_list}


def test_a_pod_without_a_topology_scores_nodes_by_the_hypernodes_around_them() -> None:
    """Worked from Volcano's batchNodeOrderFnForNormalPods by hand: tiers 1 (racks), 2 (spine) and 3 (the whole
    cluster), weighed 1, 0.8, 0.64; a 1-cpu 1-GiB pod; 6 cpu and 1 GiB of work on n3. On n0: rack-a's
    (1/32 + 1/128)/2, the spine's and the cluster's (7/64 + 2/256)/2 each; on n2, rack-b's (7/32 + 2/128)/2."""
    c = two_racks()
    running(c, "work", "n3", "6")
    c.pod("lone", cpu="1", memory="1Gi")
    scores = scores_of(c, "", "lone")
    spine = (7 / 64 + 2 / 256) / 2
    expected_n0 = 100 * (1 * (1 / 32 + 1 / 128) / 2 + 0.8 * spine + 0.64 * spine) / 2.44
    expected_n2 = 100 * (1 * (7 / 32 + 2 / 128) / 2 + 0.8 * spine + 0.64 * spine) / 2.44
    assert scores["n0"] == pytest.approx(expected_n0) and scores["n1"] == pytest.approx(expected_n0)
    assert scores["n2"] == pytest.approx(expected_n2) and scores["n3"] == pytest.approx(expected_n2)
    assert set(scores_of(c, "      hypernode.binpack.normal-pod.enable: false\n", "lone").values()) == {0.0}


@pytest.mark.parametrize(("arguments", "nodes"), [("", {"n2", "n3"}),
                                                  ("      hypernode.binpack.normal-pod.enable: false\n", {"n0"})])
def test_a_pod_without_a_topology_goes_where_hypernodes_hold_work(arguments: str, nodes: set[str]) -> None:
    """With the normal-pod score on (Volcano's default) the pod joins rack-b, which holds work; off, every node
    ties and the first by name wins."""
    c = two_racks()
    running(c, "work", "n3", "6")
    c.pod("lone", cpu="1", memory="1Gi")
    c.cycle(conf(arguments))
    assert c.sim.pods["default/lone"].manifest["spec"]["nodeName"] in nodes
