"""The preemption family's generator (issue 32): deterministic from a seed, aimed at the coverage targets, and
built so that Volcano's outcome does not depend on what it leaves to chance (map order, UIDs, creation times)."""

from collections import Counter

import yaml
from differential.preemption import (
    GANG_EVICTION_CONF,
    MAX_DOMAINS,
    TARGETS,
    Design,
    PreemptionWorkload,
    VictimDesign,
    designed_coverage,
    generate,
    predict,
)
from differential.workloads import NAMESPACE, SCHEDULER_NAME

SEEDS = range(1, 201)


def _pod_specs(wl):
    for g in wl.gangs:
        for m in g.manifests:
            if m["kind"] == "Job":
                for t in m["spec"]["tasks"]:
                    yield g, t["template"]["spec"]


def test_same_seed_same_workload_and_seeds_differ():
    a, b = generate(17), generate(17)
    assert a.describe() == b.describe()
    assert [g.manifests for g in a.gangs] == [g.manifests for g in b.gangs]
    assert (a.nodes, a.queues, a.priority_classes, a.hypernodes) == (b.nodes, b.queues, b.priority_classes,
                                                                      b.hypernodes)
    assert len({tuple(generate(s).describe()) for s in range(1, 51)}) == 50


def test_names_carry_the_seed_and_differ_from_the_random_family():
    for s in SEEDS:
        wl = generate(s)
        names = [n["metadata"]["name"] for n in wl.nodes] + wl.queue_names + [g.name for g in wl.gangs]
        names += [p["metadata"]["name"] for p in wl.priority_classes] + [h["metadata"]["name"] for h in wl.hypernodes]
        assert all(n.startswith(f"p{s}-") for n in names)
        assert len(set(names)) == len(names)


def test_every_pod_has_a_zero_grace_period_and_asks_for_volcano():
    pods = 0
    for s in SEEDS:
        for _, spec in _pod_specs(generate(s)):
            pods += 1
            assert spec["terminationGracePeriodSeconds"] == 0
            assert spec["schedulerName"] == SCHEDULER_NAME
    assert pods > 400


def test_jobs_pass_volcanos_validation_and_the_preemptor_arrives_last():
    for s in SEEDS:
        wl = generate(s)
        *victims, pre = wl.gangs
        assert [g.wave for g in wl.gangs] == [0] * len(victims) + [1] and victims
        for g in wl.gangs:
            (job,) = g.manifests
            spec = job["spec"]
            assert job["metadata"]["namespace"] == NAMESPACE and spec["queue"] in wl.queue_names
            total = sum(t["replicas"] for t in spec["tasks"])
            assert 1 <= spec["minAvailable"] <= total == g.replicas
            assert all(t.get("minAvailable", t["replicas"]) <= t["replicas"] for t in spec["tasks"])
            assert spec["priorityClassName"] in {p["metadata"]["name"] for p in wl.priority_classes}


def test_outcome_cannot_hang_on_placement_every_pod_is_one_unit_and_nodes_hold_whole_units():
    for s in SEEDS:
        wl = generate(s)
        reqs = {(t.requests.cpu_m, t.requests.mem_mi, t.requests.gpu) for g in wl.gangs for t in g.tasks}
        assert len(reqs) == 1
        ((cpu, mem, gpu),) = reqs
        caps = {tuple(sorted(n["status"]["allocatable"].items())) for n in wl.nodes}
        assert len(caps) == 1
        cap = wl.nodes[0]["status"]["allocatable"]
        k = int(cap["cpu"].removesuffix("m")) // cpu
        assert cap["cpu"] == f"{k * cpu}m" and cap["memory"] == f"{k * mem}Mi"
        assert int(cap.get("nvidia.com/gpu", 0)) == k * gpu


def test_victim_order_never_falls_to_uid_or_creation_time():
    """Preempt: victims of one queue have distinct priorities (the job order decides). Reclaim: one victim job per
    victim queue (safe bundles tie on ROI and then on job UID in SortBundlesForReclaim)."""
    for s in SEEDS:
        d = generate(s).design
        per_queue = Counter(v.queue for v in d.victims)
        same_queue = [v.priority for v in d.victims if v.queue == d.preemptor_queue]
        assert len(same_queue) == len(set(same_queue))
        for q, n in per_queue.items():
            if q != d.preemptor_queue:
                assert n == 1


def test_topology_domains_are_alike_and_one_victim_fills_every_node():
    """Whichever maxDomains of the eligible domains Volcano's gradient lists first (it walks a Go map), the plan
    evicts the same number of pods of the same job."""
    seen = 0
    for s in SEEDS:
        wl = generate(s)
        d = wl.design
        if d.scenario != "topology":
            assert not wl.hypernodes
            continue
        seen += 1
        tier1 = [h for h in wl.hypernodes if h["spec"]["tier"] == 1]
        assert len(tier1) == d.domains > MAX_DOMAINS
        members = [m["selector"]["exactMatch"]["name"] for h in tier1 for m in h["spec"]["members"]]
        assert sorted(members) == sorted(n["metadata"]["name"] for n in wl.nodes)
        assert {len(h["spec"]["members"]) for h in tier1} == {d.nodes_per_domain}
        (victim,) = d.victims
        assert victim.replicas == d.nodes * d.units_per_node
        pre = wl.gangs[-1].manifests[0]["spec"]
        assert pre["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
        assert pre["minAvailable"] <= d.nodes_per_domain * d.units_per_node
    assert seen >= 40


def test_role_victims_have_one_role_at_its_minimum_and_roles_enforced():
    fixed = 0
    for s in SEEDS:
        wl = generate(s)
        for v in wl.design.victims:
            if v.key in wl.task_split_fixed():
                fixed += 1
                mins = [m for _, _, m in v.tasks]
                assert None not in mins and v.min_available >= sum(mins)  # bundle.go enforceRoles
                spare = [r - m for _, r, m in v.tasks]
                assert sorted(spare)[0] == 0 and sum(spare) == v.replicas - v.min_available
            elif v.kind == "loose-roles":
                assert v.min_available < sum(m for _, _, m in v.tasks)
    assert fixed >= 40


def test_coverage_by_construction_on_seeds_1_to_200_clears_every_target():
    """What can be known without Volcano: the structure (topology workloads with more eligible domains than
    maxDomains; role victims) and the generator's own reading of each design (`predict`)."""
    wls = [generate(s) for s in SEEDS]
    structural_topology = sum(w.eligible_domains() > MAX_DOMAINS for w in wls)
    assert structural_topology >= TARGETS["topology_over_max_domains"] + 10
    designed = designed_coverage(wls)
    for k, target in TARGETS.items():
        assert designed[k] >= target + 10, (k, designed[k], target)
    assert designed["evicted"] < len(wls)  # some workloads where nothing may be evicted


def _design(**kw) -> PreemptionWorkload:
    d = Design(**kw)
    wl = generate(1)
    return PreemptionWorkload(1, wl.nodes, wl.queues, wl.priority_classes, wl.gangs, design=d)


def test_predict_takes_safe_bundles_before_whole_ones_and_lower_priority_first():
    rigid = VictimDesign("job/a", "rigid", "q", 10, (("worker", 4, None),), 4)
    elastic = VictimDesign("job/b", "elastic", "q", 20, (("worker", 4, None),), 2)
    base = dict(scenario="preempt", units_per_node=4, nodes=2, preemptor="job/hi", preemptor_queue="q",
                preemptor_priority=1000, victims=[rigid, elastic], deserved={"q": 8})
    # need 2: b's safe bundle (2 spare pods) comes before a's whole bundle although a has the lower priority
    p = predict(_design(preemptor_units=2, **base))
    assert p.evicted == {"job/b": 2} and not p.broken
    # need 3: b's safe bundle, then the whole bundles in reversed job order: a (priority 10) first
    p = predict(_design(preemptor_units=3, **base))
    assert p.evicted == {"job/b": 2, "job/a": 4} and p.broken == {"job/a"}
    # equal priority protects: a preemptor of priority 10 may not take a's pods
    p = predict(_design(preemptor_units=3, **{**base, "preemptor_priority": 10}))
    assert p.evicted == {} and not p.preemptor_bound


def test_the_conf_is_volcanos_gang_eviction_conf_with_max_domains():
    conf = yaml.safe_load(GANG_EVICTION_CONF)
    assert [a.strip() for a in conf["actions"].split(",")] == ["allocate", "backfill", "gangreclaim", "gangpreempt"]
    args = {c["name"]: c["arguments"] for c in conf["configurations"]}
    assert args["gangpreempt"]["maxDomains"] == args["gangreclaim"]["maxDomains"] == MAX_DOMAINS
    plugins = {p["name"]: p for t in conf["tiers"] for p in t["plugins"]}
    assert "capacity" in plugins and "proportion" not in plugins
    assert plugins["gang"]["enablePreemptable"] is False and plugins["drf"]["enablePreemptable"] is False


def test_a_victim_queue_other_than_the_preemptors_keeps_an_unevictable_anchor():
    """Without it the victim queue's share can drop to 0 with the reclaimer's, the queue order falls to creation
    time and UID, and Volcano hands the freed nodes back to the victim and evicts again (a loop)."""
    anchored = 0
    for s in SEEDS:
        wl = generate(s)
        d = wl.design
        if d.scenario == "topology":
            continue
        other = {v.queue for v in d.victims} - {d.preemptor_queue}
        assert set(d.anchors) == other
        for q in other:
            anchored += 1
            (anchor,) = [g for g in wl.gangs if g.queue == q and g.name.startswith(f"p{s}-anchor")]
            meta = anchor.manifests[0]["spec"]["tasks"][0]["template"]["metadata"]
            assert anchor.replicas == 1 and meta["annotations"]["volcano.sh/preemptable"] == "false"
    assert anchored >= 60
