"""The greedy placers and the CP-SAT solver on small problems with known optimal answers."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np
import pytest

from scheduler.solver.cpsat import solve
from scheduler.solver.evaluate import GangProblem, Group, evaluate
from scheduler.solver.greedy import per_pod_binpack, topology_greedy
from scheduler.solver.local import improve
from scheduler.solver.seating import refine
from scheduler.solver.topology import RACK, from_hypernodes, from_labels

G = 1000  # one GPU in milli-units


def problem(
    free_gpus: list[int],
    racks: list[str],
    shapes: list[tuple[int, int]],
    *,
    max_tier: int | None = None,
    hard: bool = False,
    nvlink: list[str] | None = None,
) -> GangProblem:
    """Nodes with the given free GPUs (64 cpu each) in racks of one zone; shapes are (tasks, GPUs per task)."""
    names = [f"n{i}" for i in range(len(free_gpus))]
    labels = [{"volcano.sh/rack": r, "topology.kubernetes.io/zone": "z"} for r in racks]
    for label, domain in zip(labels, nvlink or [], strict=False):
        label["volcano.sh/nvlink-domain"] = domain
    topo = from_labels(names, labels)
    idle = np.zeros((4, len(names)), dtype=np.int64)
    idle[0] = 64_000
    idle[3] = np.array(free_gpus) * G
    groups = tuple(Group(n, np.array([1000, 0, 0, gpus * G]), np.arange(len(names))) for n, gpus in shapes)
    return GangProblem(groups, idle, 3, topo, topo.top if max_tier is None else max_tier, hard)


@dataclass(frozen=True)
class Case:
    name: str
    problem: GangProblem
    greedy_places: bool
    nodes: int  # nodes the optimal placement uses
    racks: int
    stranded: int


CASES = [
    Case(
        "roles of different shapes that per-pod greedy strands are placed by the solver",
        problem([5, 3], ["a", "a"], [(1, 2), (2, 3)]),
        False,
        2,
        1,
        0,
    ),
    Case(
        "a gang that fits one rack is kept in that rack though greedy would spread it",
        problem([2, 2, 2, 2, 8, 8], ["a", "a", "a", "a", "b", "b"], [(4, 2)]),
        True,
        1,
        1,
        0,
    ),
    Case(
        "a gang is packed onto the fewest nodes and strands no GPU when an exact fit exists",
        problem([3, 5, 8, 4], ["a", "a", "a", "a"], [(2, 4)]),
        True,
        1,
        1,
        0,
    ),
    Case(
        "a gang too big for any rack spans the fewest racks",
        problem([8] * 6, ["a", "a", "b", "b", "c", "c"], [(3, 8)]),
        True,
        3,
        2,
        0,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_solver_finds_the_known_optimum_and_never_loses_to_greedy(case: Case) -> None:
    result = solve(case.problem, time_limit_ms=2000, workers=1)
    assert result.score.placed
    assert (result.score.nodes, result.score.racks, result.score.stranded) == (case.nodes, case.racks, case.stranded)
    for name in ("binpack-greedy", "topology-greedy"):
        assert result.score <= result.scores[name], name
    assert (per_pod_binpack(case.problem) is not None) == case.greedy_places


def test_hard_mode_never_spans_above_the_allowed_tier() -> None:
    hard = problem([4, 4, 8, 8], ["a", "a", "b", "c"], [(2, 8)], max_tier=RACK, hard=True)
    assert solve(hard, workers=1).placement is None
    assert topology_greedy(hard) is None
    soft = problem([4, 4, 8, 8], ["a", "a", "b", "c"], [(2, 8)], max_tier=RACK, hard=False)
    # soft: the evaluator does not veto spanning; topology greedy and CP-SAT may go up to the cluster
    soft = GangProblem(soft.groups, soft.idle, soft.gpu_row, soft.topology, soft.topology.top, False)
    result = solve(soft, workers=1)
    assert result.score.placed and result.score.racks == 2


def test_a_gang_stays_inside_one_nvlink_domain_when_one_holds_it() -> None:
    p = problem([4, 4, 4, 4], ["a"] * 4, [(2, 4)], nvlink=["x", "y", "y", "x"])
    result = solve(p, workers=1)
    touched = np.unique(np.concatenate(result.placement or ()))
    assert result.score.max_tier == 1 and len(set(p.topology.domain[1, touched].tolist())) == 1


def test_tier_distance_from_labels_and_missing_labels() -> None:
    topo = from_labels(
        ["a", "b", "c", "d"],
        [
            {"volcano.sh/rack": "r1", "topology.kubernetes.io/zone": "z"},
            {"volcano.sh/rack": "r1", "topology.kubernetes.io/zone": "z", "nvidia.com/gpu.clique": "q"},
            {"topology.kubernetes.io/zone": "z"},
            {},
        ],
    )
    assert topo.distance(0, 0) == 0
    assert topo.distance(0, 1) == RACK
    assert topo.distance(0, 2) == 3  # c has no rack: its own rack, same zone
    assert topo.distance(2, 3) == topo.top
    assert topo.graph.has_node(("cluster", topo.top, 0))


def test_hypernodes_give_tiers_with_exact_and_regex_members() -> None:
    hypernodes = [
        {
            "metadata": {"name": "s0"},
            "spec": {
                "tier": 1,
                "members": [
                    {"type": "Node", "selector": {"exactMatch": {"name": "a"}}},
                    {"type": "Node", "selector": {"exactMatch": {"name": "b"}}},
                ],
            },
        },
        {
            "metadata": {"name": "s1"},
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-[0-9]+$"}}}]},
        },
        {
            "metadata": {"name": "spine"},
            "spec": {
                "tier": 2,
                "members": [
                    {"type": "HyperNode", "selector": {"exactMatch": {"name": "s0"}}},
                    {"type": "HyperNode", "selector": {"exactMatch": {"name": "s1"}}},
                ],
            },
        },
    ]
    topo = from_hypernodes(["a", "b", "gpu-1", "gpu-2", "lone"], hypernodes)
    assert topo.top == 3
    assert topo.distance(0, 1) == 1
    assert topo.distance(2, 3) == 1
    assert topo.distance(0, 2) == 2
    assert topo.distance(0, 4) == 3


def test_evaluator_rejects_a_placement_that_overfills_a_node() -> None:
    p = problem([4], ["a"], [(2, 4)])
    bad = (np.array([0, 0]),)
    assert p.idle[3, 0] == 4 * G and not evaluate(p, bad).placed


def test_a_gang_of_many_cpu_shapes_is_merged_by_gpu_request_and_its_real_tasks_are_seated() -> None:
    names = [f"n{i}" for i in range(4)]
    topo = from_labels(names, [{"volcano.sh/rack": "a" if i < 2 else "b"} for i in range(4)])
    idle = np.array(
        [[16_000, 64_000, 16_000, 64_000], [0] * 4, [110] * 4, [8 * G, 8 * G, 8 * G, 8 * G]], dtype=np.int64
    )
    groups = tuple(
        Group(1, np.array([cpu, 0, 1, 2 * G]), np.flatnonzero(idle[0] >= cpu))
        for cpu in (1_000, 2_000, 3_000, 4_000, 5_000, 20_000, 24_000, 8_000)
    )
    p = GangProblem(groups, idle, 3, topo, topo.top)
    result = solve(p, time_limit_ms=2000, workers=1)
    assert result.score.placed and result.score.racks == 1 and result.score.nodes == 2
    assert result.score <= result.scores["binpack-greedy"]


def test_a_greedy_answer_that_meets_the_lower_bounds_skips_the_model() -> None:
    p = problem([8, 8, 8, 8], ["a", "a", "b", "b"], [(2, 8)])
    result = solve(p, workers=1)
    assert result.stats.status == "greedy meets the lower bounds" and result.stats.models == 0
    assert (result.score.nodes, result.score.racks, result.score.stranded) == (2, 1, 0)


def _two_nodes(cpu: list[int], shapes: list[tuple[int, int]]) -> GangProblem:
    """Two 4-GPU nodes in one rack with the given free cpu; shapes are (tasks of one GPU, cpu per task)."""
    topo = from_labels(["a", "b"], [{"volcano.sh/rack": "r"}] * 2)
    idle = np.array([cpu, [0, 0], [110, 110], [4 * G, 4 * G]], dtype=np.int64)
    groups = tuple(Group(n, np.array([c, 0, 1, G]), np.arange(2)) for n, c in shapes)
    return GangProblem(groups, idle, 3, topo, topo.top)


def _per_node(placement: tuple[np.ndarray, ...] | None) -> list[list[int]]:
    assert placement is not None
    return [sorted(np.bincount(nodes, minlength=2).tolist()) for nodes in placement]


def test_real_tasks_too_big_for_the_merged_slots_are_seated_on_the_same_nodes_by_room() -> None:
    # The model's slots (3 on a, 1 on b) cannot take cpu 5, 5, 1, 1 on a 6 + 10 cpu pair; b 5+1+1, a 5 can.
    p = _two_nodes([6_000, 10_000], [(2, 5_000), (2, 1_000)])
    merged = (np.array([0, 0, 0, 1]),)
    seated = refine(p, [[0, 1]], merged)
    assert seated is not None and evaluate(p, seated).placed
    assert [np.bincount(nodes, minlength=2).tolist() for nodes in seated] == [[1, 1], [0, 2]]


def test_real_tasks_that_need_an_exact_packing_are_seated_by_the_seating_model() -> None:
    # cpu 3, 3, 2, 2, 2 on two 6-cpu nodes fits only as {3, 3} and {2, 2, 2}; largest-first packing misses it.
    p = _two_nodes([6_000, 6_000], [(2, 3_000), (3, 2_000)])
    merged = (np.array([0, 0, 0, 1, 1]),)
    assert refine(p, [[0, 1]], merged) is None  # no time given for the model
    seated = refine(p, [[0, 1]], merged, deadline=time.perf_counter() + 2)
    assert seated is not None and evaluate(p, seated).placed
    assert _per_node(seated) == [[0, 2], [0, 3]]
    assert len({int(seated[0][0]), int(seated[0][1])}) == 1


def test_below_the_greedy_tier_only_racks_with_holes_of_the_right_size_are_probed() -> None:
    # Rack x and the four y racks are the tightest by free GPUs (and the y racks the largest by 2-GPU holes, so
    # a zone-wide model keeps only them) but none has a 3-GPU hole; rack a holds the gang on two nodes
    # (5 = 3 + 2, 3 = 3), which greedy misses (its 2-GPU task takes the 3-GPU hole), so greedy spans two racks.
    racks = ["x"] * 8 + [f"y{i // 4}" for i in range(16)] + ["a"] * 3
    p = problem([1] * 8 + [2] * 16 + [5, 3, 1], racks, [(1, 2), (2, 3)])
    assert topology_greedy(p) is not None and evaluate(p, topology_greedy(p)).racks == 2
    result = solve(p, time_limit_ms=2000, workers=1)
    assert (result.score.racks, result.score.nodes, result.score.stranded) == (1, 2, 0)


def test_at_the_greedy_tier_the_rack_that_needs_the_fewest_nodes_is_tried_though_not_the_tightest() -> None:
    # Three racks of 4 + 4 + 4 + 1 free GPUs are tighter than rack z (8 + 4 + 2), which holds 3 x 4 GPUs on
    # two nodes instead of three.
    free = [4, 4, 4, 1] * 3 + [8, 4, 2]
    p = problem(free, ["x1"] * 4 + ["x2"] * 4 + ["x3"] * 4 + ["z"] * 3, [(3, 4)])
    result = solve(p, time_limit_ms=2000, workers=1)
    assert (result.score.racks, result.score.nodes, result.score.stranded) == (1, 2, 0)
    touched = np.unique(np.concatenate(result.placement or ()))
    assert set(touched.tolist()) == {12, 13}


def test_stranded_gpus_rank_before_nodes_inside_the_racks_and_the_issue_order_is_kept_on_request() -> None:
    # 4 x 2 GPUs in one rack of 5, 5, 2, 2, 2, 2 free: the two 5-GPU nodes strand 2; the four 2-GPU holes none.
    p = problem([5, 5, 2, 2, 2, 2], ["a"] * 6, [(4, 2)])
    result = solve(p, time_limit_ms=2000, workers=1)
    assert (result.score.racks, result.score.stranded, result.score.nodes) == (1, 0, 4)
    nodes_first = dataclasses.replace(p, stranded_first=False)
    result = solve(nodes_first, time_limit_ms=2000, workers=1)
    assert (result.score.racks, result.score.stranded, result.score.nodes) == (1, 2, 2)


def test_nodes_that_are_their_own_nvlink_domains_do_not_rank_the_node_count_first() -> None:
    p = problem([5, 5, 2, 2, 2, 2], ["a"] * 6, [(4, 2)])
    assert p.topology.redundant(1) and not p.topology.redundant(2)
    holes = (np.array([2, 3, 4, 5]),)
    fewest_nodes = (np.array([0, 0, 1, 1]),)
    assert evaluate(p, holes) < evaluate(p, fewest_nodes)
    assert evaluate(p, holes).domains == (1, 1, 4)  # still reported per tier
    # With real NVLink domains (nodes 0-1, 2-3, 4-5) the two 5-GPU nodes share one: the tier spanned decides.
    nv = problem([5, 5, 2, 2, 2, 2], ["a"] * 6, [(4, 2)], nvlink=["p", "p", "q", "q", "r", "r"])
    assert not nv.topology.redundant(1)
    assert evaluate(nv, fewest_nodes) < evaluate(nv, holes)


def test_a_task_that_fits_no_touched_node_swaps_with_one_already_seated() -> None:
    # cpu/memory: node a 6/8, node b 6/7; tasks 6/1, 1/6, 1/2. Largest first by any measure puts 6/1 on a
    # and then 1/6 on b, after which 1/2 fits nowhere; moving 6/1 to b makes room for it on a.
    topo = from_labels(["a", "b"], [{"volcano.sh/rack": "r"}] * 2)
    idle = np.array([[6_000, 6_000], [8_000, 7_000], [110, 110], [8 * G, 8 * G]], dtype=np.int64)
    shapes = ((6_000, 1_000), (1_000, 6_000), (1_000, 2_000))
    groups = tuple(Group(1, np.array([cpu, mem, 1, G]), np.arange(2)) for cpu, mem in shapes)
    p = GangProblem(groups, idle, 3, topo, topo.top)
    seated = refine(p, [[0, 1, 2]], (np.array([0, 0, 1]),))
    assert seated is not None and evaluate(p, seated).placed
    assert [nodes.tolist() for nodes in seated] == [[1], [0], [0]]


def test_a_zone_model_keeps_the_racks_with_the_empty_nodes_its_8_gpu_tasks_need() -> None:
    # Racks r1-r4 have the most free GPUs (7 + 7) but no empty node; e1 and e2 have one each (8 + 1). Two
    # 8-GPU tasks and two 1-GPU tasks fit e1 and e2 exactly; greedy puts the 1-GPU tasks in rack f (3 racks).
    free = [1, 1] + [7, 7] * 4 + [8, 1, 8, 1]
    racks = ["f", "f"] + [f"r{i // 2}" for i in range(8)] + ["e1", "e1", "e2", "e2"]
    p = problem(free, racks, [(2, 8), (2, 1)])
    assert evaluate(p, topology_greedy(p)).racks == 3
    result = solve(p, time_limit_ms=2000, workers=1)
    assert (result.score.racks, result.score.stranded, result.score.nodes) == (2, 0, 4)


def test_real_tasks_that_no_seating_fits_on_the_chosen_nodes_spill_onto_another_node_of_their_rack() -> None:
    # Three tasks of 4 cpu cannot share two 6-cpu nodes; the third goes to node c of the same rack, not to
    # node d (a tighter GPU fit, but in another rack).
    topo = from_labels(["a", "b", "c", "d"], [{"volcano.sh/rack": r} for r in ("r1", "r1", "r1", "r2")])
    idle = np.array([[6_000] * 4, [10_000] * 4, [110] * 4, [4 * G, 4 * G, 4 * G, G]], dtype=np.int64)
    groups = tuple(Group(n, np.array([4_000, mem, 1, G]), np.arange(4)) for n, mem in ((2, 0), (1, 1_000)))
    p = GangProblem(groups, idle, 3, topo, topo.top)
    seated = refine(p, [[0, 1]], (np.array([0, 0, 1]),))
    assert seated is not None
    score = evaluate(p, seated)
    assert score.placed and (score.racks, score.nodes) == (1, 3)


def test_the_local_search_moves_a_task_to_an_exact_hole_in_a_rack_already_touched_and_not_beyond() -> None:
    # Two 2-GPU tasks on nodes 0 (3 free: strands 1) and 1 (2 free); node 2 in the same rack has exactly 2.
    p = problem([3, 2, 2, 2], ["a", "a", "a", "b"], [(2, 2)])
    improved = improve(p, (np.array([0, 1]),))
    assert improved is not None
    assert sorted(improved[0].tolist()) == [1, 2]
    assert (evaluate(p, improved).stranded, evaluate(p, improved).racks) == (0, 1)
    # The only exact hole is in rack b: no move, the rack count stays.
    p = problem([3, 2, 1, 2], ["a", "a", "a", "b"], [(2, 2)])
    assert improve(p, (np.array([0, 1]),)) is None


# ---- node scores: the configured scorers rank after the topology terms and stranded GPUs --------------------


def scored(p: GangProblem, per_node: list[float]) -> GangProblem:
    """The problem with every group scoring `per_node` (one task's score on each node)."""
    scores = np.array(per_node, dtype=np.float64)
    return dataclasses.replace(p, groups=tuple(dataclasses.replace(g, scores=scores) for g in p.groups))


def test_the_scorers_sum_ranks_after_stranded_gpus_and_before_the_node_count() -> None:
    # Three 4-GPU tasks in one rack: the three 4-GPU holes or the 8-GPU node and one hole strand nothing.
    p = scored(problem([4, 8, 4, 4], ["a"] * 4, [(3, 4)]), [0.0, 0.0, 5.0, 5.0])
    holes = (np.array([0, 2, 3]),)  # three nodes, scores 10
    fewer_nodes = (np.array([1, 1, 0]),)  # two nodes, scores 0
    stranding = (np.array([1, 2, 3]),)  # strands 4 GPUs on node 1, scores 10
    assert evaluate(p, holes).node_score == 10.0
    assert evaluate(p, holes) < evaluate(p, fewer_nodes) < evaluate(p, stranding)


def test_the_racks_a_gang_spans_outrank_the_scorers() -> None:
    p = scored(problem([8, 8, 8], ["a", "a", "b"], [(2, 8)]), [0.0, 0.0, 100.0])
    assert evaluate(p, (np.array([0, 1]),)) < evaluate(p, (np.array([1, 2]),))


def test_pod_by_pod_by_score_goes_where_the_scorers_say_and_binpack_greedy_breaks_ties_by_them() -> None:
    p = scored(problem([8, 8, 4], ["a"] * 3, [(2, 2)]), [0.0, 3.0, 1.0])
    by_score = per_pod_binpack(p, by_score=True)
    assert by_score is not None and by_score[0].tolist() == [1, 1]
    fewest_left = per_pod_binpack(p)
    assert fewest_left is not None and fewest_left[0].tolist() == [2, 2]
    tie = scored(problem([8, 8], ["a"] * 2, [(2, 2)]), [0.0, 3.0])
    assert (per_pod_binpack(tie) or ())[0].tolist() == [1, 1]


def test_the_solver_seats_a_model_answer_on_the_nodes_that_score_best_among_identical_ones() -> None:
    # Nodes 0/2 (5 free) and 1/3 (3 free) are identical pairs to the model; the scorers prefer 2 and 3.
    p = scored(problem([5, 3, 5, 3], ["a"] * 4, [(1, 2), (2, 3)]), [0.0, 0.0, 1.0, 1.0])
    result = solve(p, time_limit_ms=2000, workers=1)
    assert (result.score.stranded, result.score.nodes, result.score.node_score) == (0, 2, 3.0)
    assert set(np.concatenate(result.placement or ()).tolist()) == {2, 3}
    assert "scorer-greedy" in result.scores


def test_the_local_search_moves_a_task_to_a_better_scoring_node_that_packs_as_well() -> None:
    p = scored(problem([2, 2, 2], ["a"] * 3, [(2, 2)]), [0.0, 0.0, 4.0])
    improved = improve(p, (np.array([0, 1]),))
    assert improved is not None and sorted(improved[0].tolist()) == [1, 2]
    assert evaluate(p, improved).node_score == 4.0
