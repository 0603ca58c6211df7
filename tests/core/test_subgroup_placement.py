"""Sub-groups (PodGroup `spec.subGroupPolicy`) through full scheduling cycles: each sub-group is a gang of its own
(Volcano's CheckSubJobReady / CheckSubJobValid, pkg/scheduler/api/job_info.go) and a hard sub-group sits inside
one domain of its tier (allocate.go allocateForSubJob), whichever placer the conf configures."""

from __future__ import annotations

import random

import pytest
from subgroup_workloads import domains_spanned, partitioned_job, partitions_bound, racks, running, topology_of

from scheduler.api.reasons import SubGroupNoDomain, SubGroupsShort
from scheduler.cycle import builtin_default_conf, conf_from_text
from scheduler.framework.conf import SchedulerConf
from scheduler.testing import ClusterBuilder, cluster

BINPACK = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: binpack
"""
CPSAT = BINPACK + """  - name: network-topology-aware
    arguments:
      solver.timeLimitMs: 500
      solver.workers: 1
"""
EVERY_GANG = CPSAT + "      solver.everyGang: true\n"
NO_BULK = BINPACK.replace('"enqueue, allocate, backfill"', '"enqueue, allocate, backfill"\nconfigurations:\n'
                          '- name: allocate\n  arguments:\n    bulk: false')
HARD_RACK = {"mode": "hard", "highestTierAllowed": 1}


def confs() -> dict[str, SchedulerConf]:
    return {
        "builtin": builtin_default_conf(),
        "binpack": conf_from_text(BINPACK, source="test"),
        "cpsat": conf_from_text(CPSAT, source="test"),
        "every-gang": conf_from_text(EVERY_GANG, source="test"),
    }


def split_bait() -> ClusterBuilder:
    """Two racks of two 4-cpu nodes; b1 has 2 cpu free and a1 1: binpack pod by pod puts a 2-cpu pod on b1, the
    next on a2, splitting the first partition across racks."""
    c = racks(cluster(), [["a1", "a2"], ["b1", "b2"]])
    running(c, "busy-a1", "a1", "3")
    running(c, "busy-b1", "b1", "2")
    return c


@pytest.mark.parametrize("name", ["builtin", "binpack", "cpsat", "every-gang"])
def test_each_hard_partition_lands_inside_one_rack(name: str) -> None:
    c = partitioned_job(split_bait(), "pipe", partitions=2, size=2, min_partitions=2, topology=HARD_RACK, cpu="2")
    c.cycle(confs()[name])
    bound = partitions_bound(c, "pipe")
    topo = topology_of(c)
    assert sorted(bound) == ["0", "1"] and all(len(nodes) == 2 for nodes in bound.values())
    assert {p: domains_spanned(topo, nodes, 1) for p, nodes in bound.items()} == {"0": 1, "1": 1}


def test_a_partition_that_fits_in_no_rack_holds_the_gang_with_the_reason() -> None:
    """rack0 has room for two 2-cpu pods, rack1 for one: the second partition fits in no rack, so the gang
    (minPartitions 2) waits, whole, and says which partition and which tier."""
    c = racks(cluster(), [["a1"], ["b1"]])
    running(c, "busy-b1", "b1", "2")
    partitioned_job(c, "pipe", partitions=2, size=2, min_partitions=2, topology=HARD_RACK, cpu="2")
    c.cycle(confs()["binpack"])
    assert c.sim.bound("pipe") == {}
    (why,) = [r for r in c.sim.reasons("pipe") if isinstance(r, SubGroupNoDomain)]
    assert (why.group, why.tasks, why.tier) == ("stage-1", 2, 1)


def test_with_min_partitions_one_the_partition_that_fits_is_placed_alone() -> None:
    c = racks(cluster(), [["a1"], ["b1"]])
    running(c, "busy-b1", "b1", "2")
    partitioned_job(c, "pipe", partitions=2, size=2, min_partitions=1, topology=HARD_RACK, cpu="2")
    c.cycle(confs()["binpack"])
    assert partitions_bound(c, "pipe") == {"0": ["a1", "a1"]}


def test_each_sub_group_is_a_gang_of_its_own() -> None:
    """minMember 2, but minSubGroups 2 of size 2: with room for 3 pods, nothing is bound (the second sub-group
    would be split), although minMember alone would let 3 pods bind."""
    c = cluster().node("n1", cpu="3", memory="64Gi")
    partitioned_job(c, "pipe", partitions=2, size=2, min_partitions=2, min_member=2, cpu="1")
    c.cycle(confs()["binpack"])
    assert c.sim.bound("pipe") == {}
    assert SubGroupsShort("stage", 0, 2, False) in c.sim.reasons("pipe")  # at close: nothing kept


def test_a_policy_with_fewer_sub_groups_than_its_minimum_is_invalid() -> None:
    c = cluster().node("n1", cpu="8", memory="64Gi")
    partitioned_job(c, "pipe", partitions=1, size=2, min_partitions=2, min_member=2, cpu="1")
    c.cycle(confs()["binpack"])
    assert c.sim.bound("pipe") == {}
    assert SubGroupsShort("stage", 1, 2, True) in c.sim.reasons("pipe")


def test_the_job_level_hard_topology_holds_around_its_sub_groups() -> None:
    """The job in one tier-2 domain (a spine), each partition in one rack of it."""
    c = cluster()
    for spine, rack_names in (("s0", ("r0", "r1")), ("s1", ("r2", "r3"))):
        for r in rack_names:
            c.node(f"{r}-n", cpu="4", memory="64Gi").hypernode(r, 1, [f"{r}-n"])
        c.hypernode(spine, 2, list(rack_names), kind="HyperNode")
    c.hypernode("top", 3, ["s0", "s1"], kind="HyperNode")
    running(c, "busy", "r1-n", "2")  # spine s0 has 6 cpu free, s1 8: the job needs 8
    partitioned_job(c, "pipe", partitions=2, size=2, min_partitions=2, topology=HARD_RACK, cpu="2",
                    job_topology={"mode": "hard", "highestTierAllowed": 2})
    c.cycle(confs()["binpack"])
    assert sorted(c.sim.bound("pipe").values()) == ["r2-n", "r2-n", "r3-n", "r3-n"]


# ---- the property: no placer ever splits a hard sub-group ---------------------------------------------------

def random_workload(seed: int) -> ClusterBuilder:
    rng = random.Random(seed)
    layout = [[f"r{r}n{n}" for n in range(rng.randint(1, 4))] for r in range(rng.randint(2, 5))]
    c = racks(cluster(), layout, cpu=str(rng.choice([4, 8])))
    for nodes in layout:
        for node in nodes:
            if rng.random() < 0.5:
                running(c, f"busy-{node}", node, str(rng.randint(1, 3)))
    for j in range(rng.randint(1, 4)):
        partitions, size = rng.randint(1, 4), rng.randint(1, 4)
        tier = rng.choice([1, 1, 2])
        mode = rng.choice(["hard", "hard", "soft"])
        partitioned_job(c, f"job{j}", partitions=partitions, size=size, min_partitions=rng.randint(0, partitions),
                        topology={"mode": mode, "highestTierAllowed": tier}, cpu=str(rng.randint(1, 3)),
                        master=rng.choice([0, 0, 1]))
    return c


@pytest.mark.parametrize("seed", range(40))
def test_no_placer_ever_splits_a_hard_sub_group(seed: int) -> None:
    for name, conf in confs().items():
        c = random_workload(seed)
        for _ in range(3):
            c.cycle(conf)
        topo = topology_of(c)
        for group in c.sim.podgroups:
            pg = c.sim.podgroup(group)
            (policy,) = pg["spec"]["subGroupPolicy"]
            spec = policy["networkTopology"]
            bound = partitions_bound(c, group)
            if spec["mode"] == "hard":
                spans = {p: domains_spanned(topo, nodes, spec["highestTierAllowed"]) for p, nodes in bound.items()}
                assert all(n == 1 for n in spans.values()), (name, group, spans)
            if bound:  # a gang per sub-group: the partitions bound are whole, and at least minSubGroups of them
                whole = [p for p, nodes in bound.items() if len(nodes) == policy["subGroupSize"]]
                assert len(whole) == len(bound) >= policy["minSubGroups"], (name, group, bound)


def test_a_sub_group_allowed_up_to_tier_2_still_takes_one_rack_when_one_holds_it() -> None:
    """Volcano's gradient tries tier-1 HyperNodes before tier 2 (hyperNodeGradientFn, tiers ascending): with
    binpack pod by pod the partition would take the fuller nodes of both racks."""
    c = partitioned_job(split_bait(), "pipe", partitions=1, size=2, min_partitions=1, cpu="2",
                        topology={"mode": "hard", "highestTierAllowed": 2})
    c.cycle(confs()["binpack"])
    bound = partitions_bound(c, "pipe")
    assert len(bound["0"]) == 2 and domains_spanned(topology_of(c), bound["0"], 1) == 1


def test_hard_mode_without_a_tier_constrains_nothing_as_in_volcano() -> None:
    """SubJobInfo.IsHardTopologyMode needs highestTierAllowed: without one the partition may span racks."""
    c = racks(cluster(), [["a1"], ["b1"]])
    partitioned_job(c, "pipe", partitions=1, size=2, min_partitions=1, topology={"mode": "hard"}, cpu="3")
    c.cycle(confs()["binpack"])
    assert sorted(partitions_bound(c, "pipe")["0"]) == ["a1", "b1"]


def test_a_ready_job_takes_its_extra_partitions_only_after_the_others_have_their_minimum() -> None:
    """Volcano's allocateForJob stops at JobReady and the job waits its turn for more: two elastic jobs (1 of 2
    partitions needed) on room for two partitions get one each, not two for the first and none for the second."""
    c = cluster().node("n1", cpu="4", memory="64Gi")
    for name in ("a", "b"):
        partitioned_job(c, name, partitions=2, size=2, min_partitions=1, cpu="1")
    c.cycle(confs()["binpack"])
    assert (len(c.sim.bound("a")), len(c.sim.bound("b"))) == (2, 2)


def test_a_starving_partitioned_job_is_still_placed_partition_by_partition() -> None:
    """The starvation guard (actions/starvation.py) reserves pod by pod; a job with sub-groups goes to the
    sub-group placer there too, so its partitions stay inside one rack each."""
    text = BINPACK + "configurations:\n- name: allocate\n  arguments:\n    starvationThresholdSeconds: 0\n"
    c = partitioned_job(split_bait(), "pipe", partitions=2, size=2, min_partitions=2, topology=HARD_RACK, cpu="2")
    c.cycle(conf_from_text(text, source="test"))
    bound = partitions_bound(c, "pipe")
    assert {p: domains_spanned(topology_of(c), nodes, 1) for p, nodes in bound.items()} == {"0": 1, "1": 1}


@pytest.mark.parametrize("name", ["builtin", "binpack", "cpsat"])
def test_a_hard_sub_group_named_by_its_tier_name_lands_inside_one_rack(name: str) -> None:
    """highestTierName resolved through the HyperNodes' spec.tierName (Volcano's session translates it to a tier):
    with the racks named `example.com/rack`, a partition allowed up to that name stays inside one rack, where
    binpack pod by pod splits it (the same bait as test_each_hard_partition_lands_inside_one_rack)."""
    c = cluster()
    for index, nodes in enumerate([["a1", "a2"], ["b1", "b2"]]):
        for node in nodes:
            c.node(node, cpu="4", memory="64Gi")
        c.hypernode(f"rack{index}", 1, nodes, tier_name="example.com/rack")
    c.hypernode("spine", 2, ["rack0", "rack1"], kind="HyperNode", tier_name="example.com/spine")
    running(c, "busy-a1", "a1", "3")
    running(c, "busy-b1", "b1", "2")
    topology = {"mode": "hard", "highestTierName": "example.com/rack"}
    partitioned_job(c, "pipe", partitions=2, size=2, min_partitions=2, topology=topology, cpu="2")
    c.cycle(confs()[name])
    bound = partitions_bound(c, "pipe")
    assert sorted(bound) == ["0", "1"] and all(len(nodes) == 2 for nodes in bound.values())
    assert {p: domains_spanned(topology_of(c), nodes, 1) for p, nodes in bound.items()} == {"0": 1, "1": 1}
