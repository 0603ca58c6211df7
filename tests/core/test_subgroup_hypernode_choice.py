"""Which HyperNode each sub-group (and the job around them) goes to, against a reference written from Volcano's
rules: allocateForSubJob tries every HyperNode of the lowest gradient where the sub-group fits and keeps the one
HyperNodeOrderFn scores highest (network-topology-aware's hypernode binpack: the weighted mean over cpu and memory
of (used + the sub-group's requests) / allocatable, 0 if overused; equal scores broken by the share of its tasks
already there, then at random); allocateForJob keeps the job-level HyperNode with the highest sum of its
sub-groups' scores (pkg/scheduler/actions/allocate/allocate.go, plugins/network-topology-aware).
A soft sub-group is placed as a hard one at the job's tier, else the cluster's (framework/session.go
convertSoftToHardTopology)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction

import pytest
from subgroup_workloads import TOPOLOGY_CONF, partitioned_job, partitions_bound, racks, running

from scheduler.api.reasons import TopologyNoFit
from scheduler.cycle import conf_from_text
from scheduler.testing import ClusterBuilder, cluster

NODE_MEMORY_GI = 64
ON = conf_from_text(TOPOLOGY_CONF, source="test")
OFF = conf_from_text(TOPOLOGY_CONF.replace("  - name: network-topology-aware\n",
                                           "  - name: network-topology-aware\n    enabledHyperNodeOrder: false\n"),
                     source="test")
# Without the hypernode-level score of pods outside a network topology, binpack alone orders the nodes pod by pod.
NO_NORMAL_POD = conf_from_text(TOPOLOGY_CONF + "      hypernode.binpack.normal-pod.enable: false\n", source="test")


# ---- the reference --------------------------------------------------------------------------------------------

@dataclass
class Rack:
    """What Volcano's score reads of a tier-1 HyperNode, and how many more pods of one size it holds."""

    cpu: int  # allocatable, cores
    memory: int  # allocatable, Gi
    used_cpu: int
    used_memory: int  # Gi (every pod asks 1Gi)
    room: int  # pods of the job's size that still fit, node by node

    def score(self, pods: int, cpu: int) -> Fraction:
        """getSubJobHyperNodeBinPackingScore with cpu and memory weighted 1."""
        want_cpu, want_memory = self.used_cpu + pods * cpu, self.used_memory + pods
        if want_cpu > self.cpu or want_memory > self.memory:
            return Fraction(0)
        return (Fraction(want_cpu, self.cpu) + Fraction(want_memory, self.memory)) / 2

    def take(self, pods: int, cpu: int) -> None:
        self.used_cpu += pods * cpu
        self.used_memory += pods
        self.room -= pods


def random_case(seed: int) -> tuple[ClusterBuilder, dict[str, Rack], dict[str, str], int, int, int]:
    rng = random.Random(seed)
    node_cpu = rng.choice([4, 8])
    cpu = rng.randint(1, 2)
    layout = [[f"r{r}n{n}" for n in range(rng.randint(1, 3))] for r in range(rng.randint(2, 5))]
    c = racks(cluster(), layout, cpu=str(node_cpu))
    state: dict[str, Rack] = {}
    rack_of: dict[str, str] = {}
    for index, nodes in enumerate(layout):
        rack = state[f"rack{index}"] = Rack(node_cpu * len(nodes), NODE_MEMORY_GI * len(nodes), 0, 0, 0)
        for node in nodes:
            rack_of[node] = f"rack{index}"
            taken = rng.randint(1, node_cpu - 1) if rng.random() < 0.6 else 0
            if taken:
                running(c, f"busy-{node}", node, str(taken))
                rack.used_cpu += taken
                rack.used_memory += 1
            rack.room += (node_cpu - taken) // cpu
    partitions, size = rng.randint(1, 3), rng.randint(1, 3)
    partitioned_job(c, "job", partitions=partitions, size=size, min_partitions=partitions,
                    topology={"mode": "hard", "highestTierAllowed": 1}, cpu=str(cpu))
    return c, state, rack_of, partitions, size, cpu


def best_racks(state: dict[str, Rack], size: int, cpu: int) -> list[str]:
    """The racks Volcano may pick for the next sub-group: those where it fits with the highest score."""
    fits = {name: rack.score(size, cpu) for name, rack in state.items() if rack.room >= size}
    return [name for name, score in fits.items() if score == max(fits.values())]


def may_fail(state: dict[str, Rack], left: int, size: int, cpu: int) -> bool:
    """Whether some run of Volcano's (equal scores picked at random) leaves one of `left` sub-groups nowhere."""
    if left == 0:
        return False
    choices = best_racks(state, size, cpu)
    if not choices:
        return True
    for name in choices:
        after = {n: Rack(**vars(r)) for n, r in state.items()}
        after[name].take(size, cpu)
        if may_fail(after, left - 1, size, cpu):
            return True
    return False


@pytest.mark.parametrize("seed", range(60))
def test_each_sub_group_goes_to_a_rack_volcano_scores_highest(seed: int) -> None:
    c, state, rack_of, partitions, size, cpu = random_case(seed)
    c.cycle(ON)
    bound = partitions_bound(c, "job")
    if not bound:  # every partition is required: the job waits whole, which Volcano's choices must allow
        assert may_fail(state, partitions, size, cpu), seed
        return
    for partition in range(partitions):  # Volcano's order: the required sub-groups by partition number
        chosen = {rack_of[node] for node in bound.get(str(partition), [])}
        assert len(chosen) == 1 and len(bound[str(partition)]) == size, (seed, partition, bound)
        (rack,) = chosen
        assert rack in best_racks(state, size, cpu), (seed, partition, rack)
        state[rack].take(size, cpu)


# ---- cases the old choice (the tightest domain first) got wrong ----------------------------------------------

def small_and_full() -> ClusterBuilder:
    """rack0: one empty 4-cpu node; rack1: four 4-cpu nodes with 3 cpu taken on each. rack0 has less room left
    (64Gi of memory against 256Gi), but a 2 x 1-cpu sub-group fills rack1 more: (12+2)/16 cpu."""
    c = racks(cluster(), [["a1"], ["b1", "b2", "b3", "b4"]])
    for node in ("b1", "b2", "b3", "b4"):
        running(c, f"busy-{node}", node, "3")
    return c


def test_the_sub_group_goes_to_the_rack_it_fills_most() -> None:
    c = partitioned_job(small_and_full(), "job", partitions=1, size=2, min_partitions=1, cpu="1",
                        topology={"mode": "hard", "highestTierAllowed": 1})
    c.cycle(ON)
    assert all(node.startswith("b") for node in partitions_bound(c, "job")["0"])


def test_with_enabled_hypernode_order_off_no_score_decides() -> None:
    """Volcano's HyperNodeOrderMapFn skips a plugin whose enabledHyperNodeOrder is false: every candidate scores
    0, and volcano-py then takes the tightest."""
    c = partitioned_job(small_and_full(), "job", partitions=1, size=2, min_partitions=1, cpu="1",
                        topology={"mode": "hard", "highestTierAllowed": 1})
    c.cycle(OFF)
    assert partitions_bound(c, "job")["0"] == ["a1", "a1"]


def two_spines() -> ClusterBuilder:
    """Spine s0: two racks of one 8-cpu node, 2 cpu taken on each (12 cpu free). Spine s1: two racks of four
    8-cpu nodes, 25 cpu taken in each (14 free). s0 is the tighter spine; each 2 x 2-cpu partition fills a rack
    of s1 more: (25+4)/32 against (2+4)/8."""
    c = cluster()
    layout = {"s0": {"r0": ["r0n0"], "r1": ["r1n0"]},
              "s1": {"r2": [f"r2n{i}" for i in range(4)], "r3": [f"r3n{i}" for i in range(4)]}}
    for spine, members in layout.items():
        for rack, nodes in members.items():
            for node in nodes:
                c.node(node, cpu="8", memory="64Gi")
            c.hypernode(rack, 1, nodes)
        c.hypernode(spine, 2, list(members), kind="HyperNode")
    for node in ("r0n0", "r1n0"):
        running(c, f"busy-{node}", node, "2")
    for rack in ("r2", "r3"):
        for i, taken in enumerate((7, 6, 6, 6)):
            running(c, f"busy-{rack}n{i}", f"{rack}n{i}", str(taken))
    return c


def test_the_job_goes_to_the_spine_whose_sub_groups_score_highest() -> None:
    """No rack holds the whole job (8 cpu), so the tier-2 gradient decides: s0's partitions would score
    (6/8 + 3/64)/2 each, s1's (29/32 + 6/256)/2 each; Volcano's allocateForJob takes s1 (the higher sum)."""
    c = partitioned_job(two_spines(), "job", partitions=2, size=2, min_partitions=2, cpu="2",
                        topology={"mode": "hard", "highestTierAllowed": 1},
                        job_topology={"mode": "hard", "highestTierAllowed": 2})
    c.cycle(ON)
    bound = partitions_bound(c, "job")
    assert sorted(bound) == ["0", "1"]
    assert {node[:2] for nodes in bound.values() for node in nodes} == {"r2", "r3"}
    assert {p: {node[:2] for node in nodes} for p, nodes in bound.items()} in ({"0": {"r2"}, "1": {"r3"}},
                                                                                {"0": {"r3"}, "1": {"r2"}})


# ---- soft sub-groups (item: convertSoftToHardTopology) ---------------------------------------------------------

def split_bait() -> ClusterBuilder:
    """Two racks of two 4-cpu nodes; b1 has 2 cpu free and a1 1: binpack pod by pod puts a 2-cpu pod on b1, the
    next on a2, splitting a partition across racks."""
    c = racks(cluster(), [["a1", "a2"], ["b1", "b2"]])
    running(c, "busy-a1", "a1", "3")
    running(c, "busy-b1", "b1", "2")
    return c


def test_a_soft_sub_group_that_fits_in_one_rack_takes_one_rack() -> None:
    """Soft becomes hard at the cluster's tier: tier 1 (the racks) is tried first, so the partition does not
    split where binpack pod by pod would."""
    c = partitioned_job(split_bait(), "job", partitions=1, size=2, min_partitions=1, cpu="2",
                        topology={"mode": "soft"})
    c.cycle(NO_NORMAL_POD)
    (nodes,) = partitions_bound(c, "job").values()
    assert len(nodes) == 2 and len({n[0] for n in nodes}) == 1


def test_a_soft_sub_group_too_big_for_a_rack_still_spans_racks() -> None:
    c = racks(cluster(), [["a1"], ["b1"]])
    c = partitioned_job(c, "job", partitions=1, size=2, min_partitions=1, cpu="3", topology={"mode": "soft"})
    c.cycle(ON)
    assert sorted(partitions_bound(c, "job")["0"]) == ["a1", "b1"]


def test_a_soft_sub_group_never_leaves_the_hard_jobs_spine() -> None:
    """Soft under a job hard at tier 2 becomes hard at tier 2: it may span racks of the job's spine only."""
    c = cluster()
    for spine, rack_names in (("s0", ("r0", "r1")), ("s1", ("r2",))):
        for r in rack_names:
            c.node(f"{r}-n", cpu="4", memory="64Gi").hypernode(r, 1, [f"{r}-n"])
        c.hypernode(spine, 2, list(rack_names), kind="HyperNode")
    c.hypernode("top", 3, ["s0", "s1"], kind="HyperNode")
    running(c, "busy", "r2-n", "1")
    c = partitioned_job(c, "job", partitions=1, size=2, min_partitions=1, cpu="3", topology={"mode": "soft"},
                        job_topology={"mode": "hard", "highestTierAllowed": 2})
    c.cycle(ON)
    assert sorted(partitions_bound(c, "job")["0"]) == ["r0-n", "r1-n"]


def test_equal_scores_go_to_the_rack_that_holds_more_of_the_sub_group() -> None:
    """A tier-2 sub-group with one of its two pods running in rack1 (b1); rack0's a1 holds 1 cpu of other work.
    Both racks score (1 + 2) / 8 cpu (the score counts all the sub-group's pods), so Volcano's scoreWithTaskNum
    breaks the tie: rack1 holds half the sub-group, rack0 none."""
    c = racks(cluster(), [["a1"], ["b1"]], cpu="8")
    running(c, "busy-a1", "a1", "1")
    c = partitioned_job(c, "job", partitions=1, size=2, min_partitions=1, cpu="1",
                        topology={"mode": "hard", "highestTierAllowed": 2})
    first = c.sim.pods["default/job-stage-0"].manifest
    first["spec"]["nodeName"], first["status"]["phase"] = "b1", "Running"
    c.cycle(ON)
    assert sorted(partitions_bound(c, "job")["0"]) == ["b1", "b1"]


@pytest.mark.parametrize("rack_count", [4, 16, 17, 40])
def test_a_job_no_rack_holds_goes_to_the_spine_however_many_racks_there_are(rack_count: int) -> None:
    """A job whose tier is the spine, with two sub-groups each filling one rack: no single rack holds the job, so
    it goes to the spine's gradient, one rack per sub-group (Volcano's allocateForJob tries every gradient up to
    the job's tier). The job-level domains tried per turn are capped per tier; a cap shared by all tiers once spent
    every try on the racks when there were more than 16, and the job never ran."""
    c = racks(cluster(), [[f"r{r}-a", f"r{r}-b"] for r in range(rack_count)], cpu="4")
    partitioned_job(c, "job", partitions=2, size=2, min_partitions=2, cpu="3",
                    topology={"mode": "hard", "highestTierAllowed": 1},
                    job_topology={"mode": "hard", "highestTierAllowed": 2})
    c.cycle(ON)
    bound = partitions_bound(c, "job")
    assert sorted(bound) == ["0", "1"]
    rack_of = {node: node.split("-")[0] for nodes in bound.values() for node in nodes}
    assert all(len({rack_of[n] for n in nodes}) == 1 and len(nodes) == 2 for nodes in bound.values())
    assert rack_of[bound["0"][0]] != rack_of[bound["1"][0]]


def test_a_job_held_to_tier_0_is_told_tier_0() -> None:
    """highestTierAllowed 0 (no HyperNode is that low) places nothing, and the reason names tier 0, not the
    cluster's tier (0 is a tier, not "no limit")."""
    c = racks(cluster(), [["a1", "a2"], ["b1"]])
    partitioned_job(c, "job", partitions=2, size=1, min_partitions=1,
                    topology={"mode": "hard", "highestTierAllowed": 1},
                    job_topology={"mode": "hard", "highestTierAllowed": 0})
    result = c.cycle(ON)
    (status,) = [s for s in result.podgroups if s.job == "default/job"]
    assert status.decision is not None
    assert [r.tier for r in status.decision.reasons if isinstance(r, TopologyNoFit)] == [0]
    assert c.sim.bound("job") == {}


@pytest.mark.parametrize("releasing", [True, False])
def test_a_rack_whose_room_is_being_released_is_in_the_jobs_gradient(releasing: bool) -> None:
    """Volcano's isEligibleHyperNode takes a HyperNode whose idle or future idle holds the job's minResources. Both
    racks are full; a1's pod is being deleted, so rack0's future idle holds the job: it is the job's domain, and
    its sub-group is told it fits no HyperNode there yet (allocate seats on idle room only). Without the pod
    releasing no rack is eligible at all, and the job is told its tier holds it nowhere."""
    c = racks(cluster(), [["a1"], ["b1"]])
    running(c, "going", "a1", "4")
    running(c, "busy", "b1", "4")
    if releasing:
        c.sim.pods["default/going"].manifest["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    partitioned_job(c, "job", partitions=1, size=2, min_partitions=1,
                    topology={"mode": "hard", "highestTierAllowed": 1},
                    job_topology={"mode": "hard", "highestTierAllowed": 1})
    c.sim.podgroups["default/job"].manifest["spec"]["minResources"] = {"cpu": "2", "memory": "2Gi"}
    result = c.cycle(ON)
    (status,) = [s for s in result.podgroups if s.job == "default/job"]
    assert status.decision is not None
    kinds = {type(r).__name__ for r in status.decision.reasons}
    assert ("SubGroupNoDomain" in kinds) is releasing
    assert ("TopologyNoFit" in kinds) is not releasing
    assert c.sim.bound("job") == {}
