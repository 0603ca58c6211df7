"""The consolidate action (beyond Volcano, after KAI-Scheduler's consolidation): a 16-GPU gang that does not fit
because the free GPUs are scattered over half-used nodes gets room by moving opted-in running jobs, whole, in
one plan; the moved jobs' new room is held until their recreated pods are placed there."""

from __future__ import annotations

import pytest
from consolidate_cases import WITHOUT, conf, pod, recreate, running

from scheduler.actions import consolidate
from scheduler.actions.consolidate import (
    DEFAULT_HOLD,
    DEFAULT_PER_CYCLE,
    DEFAULT_PER_JOB,
    MAX_LOST,
    ConsolidateArgs,
)
from scheduler.actions.holds import PLACEHOLDER_JOB, honour_holds
from scheduler.actions.movable import KAI_PREEMPTIBILITY, MOVABLE
from scheduler.api.decision import Code
from scheduler.api.resources import GPU
from scheduler.conf_check import action_warnings
from scheduler.framework.session import Session
from scheduler.plugins.registry import PLUGINS
from scheduler.plugins.victimcost import CHECKPOINT
from scheduler.testing import ClusterBuilder, cluster, pod_object


def scattered(mark: dict[str, str] | None = None) -> ClusterBuilder:
    """4 nodes of 8 GPUs, each half used by a 1-pod 4-GPU job: 16 GPUs free, no node with 8; a gang of 2 x 8."""
    c = cluster().nodes("n", 4, gpu=8)
    for i in range(4):
        running(c, f"small{i}", [f"n{i}"], 4, mark=mark)
    c.job("big", replicas=2, gpu=8)
    return c


def test_the_gang_is_placed_after_moving_two_jobs_whole_and_each_move_says_why() -> None:
    c = scattered()
    first = c.cycle(conf())
    moved = {e.job for e in first.evictions}
    assert len(moved) == 2 and all(e.cause is not None and e.cause.action == "consolidate"
                                   and e.cause.by == "default/big" for e in first.evictions)
    holds = c.memo.holds.holds
    assert set(holds) == moved | {"default/big"}  # the moved jobs' new room, and the room freed for big
    for e in first.evictions:  # each moved pod is held on a node other than the one it left, where room is free
        held = holds[e.job].pods[0]
        assert held.node != e.node and e.cause is not None and held.node in e.cause.rule
    c.cycle(conf())
    assert sorted(c.sim.bound("big").values()) == sorted(e.node for e in first.evictions)


def test_without_the_action_in_the_conf_nothing_moves_and_the_gang_waits() -> None:
    c = scattered()
    for _ in range(3):
        assert not c.cycle(conf(WITHOUT)).evictions
    assert c.sim.bound("big") == {}


def test_the_moved_job_is_placed_on_its_held_node_and_nothing_else_takes_the_room_meanwhile() -> None:
    c = scattered()
    first = c.cycle(conf())
    held = {p.pod: p.node for h in c.memo.holds.holds.values() for p in h.pods}
    c.job("intruder", replicas=1, gpu=4)  # would fit exactly in a held room
    c.cycle(conf())
    c.cycle(conf())
    assert c.sim.bound("intruder") == {}
    for e in first.evictions:
        recreate(c, e.task, 4)
    c.cycle(conf())
    for e in first.evictions:
        name = e.task.split("/")[1]
        assert c.sim.bound(e.job.split("/")[1]) == {name: held[e.task]}
    c.cycle(conf())
    assert {why for _, why in c.memo.holds.ended} == {"placed"} and not c.memo.holds.holds


@pytest.mark.parametrize("mark", [
    {},  # no mark: nothing opted in
    {MOVABLE: "false"},
    {MOVABLE: "yes please"},  # not a mark the action reads: not moved
    {KAI_PREEMPTIBILITY: "Non-Preemptible"},
    {MOVABLE: "true", "volcano.sh/preemptable": "false"},
], ids=["unmarked", "opted-out", "unreadable", "kai-non-preemptible", "volcano-non-preemptable"])
def test_a_job_that_does_not_say_it_may_move_is_never_moved(mark: dict[str, str]) -> None:
    c = scattered(mark)
    for _ in range(2):
        assert not c.cycle(conf()).evictions
    assert c.sim.bound("big") == {}


def test_kai_preemptible_label_marks_a_job_movable() -> None:
    c = scattered({KAI_PREEMPTIBILITY: "Preemptible"})
    assert c.cycle(conf()).evictions


def test_a_plan_that_cannot_replace_every_moved_job_evicts_nothing() -> None:
    # 3 nodes of 8: two 4-GPU jobs on n0 and n1, a 6-GPU job on n2. The gang (2 x 8) needs two of them empty; the
    # 16 free GPUs are not enough for the gang and the moved jobs' 8 GPUs: no move re-places everything.
    c = cluster().nodes("n", 3, gpu=8)
    running(c, "a", ["n0"], 4)
    running(c, "b", ["n1"], 4)
    running(c, "d", ["n2"], 6)
    c.job("big", replicas=2, gpu=8)
    for _ in range(2):
        assert not c.cycle(conf()).evictions
    assert not c.memo.holds.holds


def test_a_multi_pod_job_moves_whole_or_not_at_all() -> None:
    # a 2-pod job spans n0 and n1 (4 GPUs each); n2 and n3 have 4 GPUs used by single jobs. Moving the 2-pod job
    # frees n0 and n1 for the gang; its two pods go to n2 and n3 together.
    c = cluster().nodes("n", 4, gpu=8)
    running(c, "pair", ["n0", "n1"], 4)
    running(c, "s2", ["n2"], 4, mark={})
    running(c, "s3", ["n3"], 4, mark={})
    c.job("big", replicas=2, gpu=8)
    result = c.cycle(conf())
    assert sorted(e.task for e in result.evictions) == ["default/pair-0", "default/pair-1"]
    assert sorted(p.node for p in c.memo.holds.holds["default/pair"].pods) == ["n2", "n3"]


def test_minimum_runtime_keeps_a_young_job_where_it_is() -> None:
    c = scattered()
    assert not c.cycle(conf(minruntime={"minRuntime": "1h"})).evictions
    assert c.sim.bound("big") == {}
    c2 = scattered()
    assert c2.cycle(conf(minruntime={"minRuntime": "0s"})).evictions


def test_evictions_per_job_bound_holds_at_the_bound() -> None:
    # the plan needs exactly two evictions: allowed at 2, refused at 1
    assert len(scattered().cycle(conf(consolidate={"maxEvictionsPerJob": 2})).evictions) == 2
    assert not scattered().cycle(conf(consolidate={"maxEvictionsPerJob": 1})).evictions


def test_evictions_per_cycle_bound_holds_at_the_bound() -> None:
    # two such clusters side by side (8 nodes), two gangs: each needs 2 evictions
    c = cluster().nodes("n", 8, gpu=8)
    for i in range(8):
        running(c, f"small{i}", [f"n{i}"], 4)
    c.job("big", replicas=2, gpu=8).job("big2", replicas=2, gpu=8)
    assert len(c.cycle(conf(consolidate={"maxEvictionsPerCycle": 3})).evictions) == 2
    c2 = cluster().nodes("n", 8, gpu=8)
    for i in range(8):
        running(c2, f"small{i}", [f"n{i}"], 4)
    c2.job("big", replicas=2, gpu=8).job("big2", replicas=2, gpu=8)
    assert len(c2.cycle(conf(consolidate={"maxEvictionsPerCycle": 4})).evictions) == 4


@pytest.mark.parametrize("raw", [{}, {"maxEvictionsPerCycle": "x", "maxEvictionsPerJob": 0, "holdSeconds": 99999}])
def test_unreadable_or_out_of_range_arguments_take_the_documented_defaults(raw: dict[str, object]) -> None:
    assert ConsolidateArgs.read(raw) == ConsolidateArgs(DEFAULT_PER_CYCLE, DEFAULT_PER_JOB, float(DEFAULT_HOLD))
    assert (DEFAULT_PER_CYCLE, DEFAULT_PER_JOB, DEFAULT_HOLD) == (16, 8, 300)


def test_a_hold_expires_and_the_room_is_given_back() -> None:
    c = scattered()
    c.cycle(conf(consolidate={"holdSeconds": 2}))
    c.job("intruder", replicas=1, gpu=4)
    for _ in range(4):
        c.cycle(conf(consolidate={"holdSeconds": 2}))
    ended = dict(c.memo.holds.ended)
    assert ended.pop("default/big") == "placed" and set(ended.values()) == {"expired"} and len(ended) == 2
    assert len(c.sim.bound("intruder")) == 1


def test_conf_check_names_a_bad_bound_and_the_default_the_action_uses_instead() -> None:
    bad = action_warnings(conf(consolidate={"maxEvictionsPerJob": 0, "maxEvictionsPerCycle": 5, "holdSeconds": 60,
                                            "maxEvictions": 3}))
    assert sorted((w.key, w.using) for w in bad) == [
        ("maxEvictions", "consolidate uses maxEvictionsPerJob=8 (the default)"),  # the closest key, suggested
        ("maxEvictionsPerJob", "consolidate uses 8 (the default)")]


def test_a_pod_recreated_under_a_new_name_takes_the_held_room_of_the_one_that_is_gone() -> None:
    c = scattered()
    first = c.cycle(conf())
    held = {p.pod: p.node for h in c.memo.holds.holds.values() for p in h.pods}
    c.cycle(conf())
    for e in first.evictions:  # a ReplicaSet's way: a new name
        job = e.job.split("/")[1]
        c.sim.add_pod(pod(job, 7, 4, None))
    c.cycle(conf())
    for e in first.evictions:
        job = e.job.split("/")[1]
        assert c.sim.bound(job) == {f"{job}-7": held[e.task]}
    c.cycle(conf())
    assert {why for _, why in c.memo.holds.ended} == {"placed"}


def test_a_victim_filter_failing_on_one_movable_job_faults_that_job_and_the_gang_still_gets_its_room(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One exception in one job costs that job alone: here the job whose pods a victim filter chokes on, not the
    pending gang that asked, nor the other movable jobs."""
    real = consolidate.filtered

    def choking(ssn, kind, job, tasks):
        if any(t.job == "default/small0" for t in tasks):
            raise RuntimeError("a filter that cannot read small0's pods")
        return real(ssn, kind, job, tasks)

    monkeypatch.setattr(consolidate, "filtered", choking)
    c = scattered()
    first = c.cycle(conf())
    assert {e.job for e in first.evictions} and "default/small0" not in {e.job for e in first.evictions}
    status = next(s for s in first.podgroups if s.job == "default/small0")
    assert status.decision is not None and status.decision.code is Code.ERROR
    big = next(s for s in first.podgroups if s.job == "default/big")
    assert big.decision is None or big.decision.code is not Code.ERROR
    c.cycle(conf())
    assert len(c.sim.bound("big")) == 2


def test_room_taken_from_a_hold_by_something_else_gets_no_placeholder_and_no_node_goes_below_zero() -> None:
    """Between two cycles another scheduler binds a pod on a node held for a moved job: the hold cannot hold that
    room any more; its placeholder is not put there (a node's idle never below zero), and the recreated pod is
    refused there, so the job is placed as any pending job."""
    c = scattered()
    c.cycle(conf())
    (held_job, hold), *_ = sorted(c.memo.holds.holds.items())
    node = hold.pods[0].node
    made = pod_object("intruder-0", group="intruder", gpu=4)  # exactly the room held there
    made["spec"]["nodeName"], made["status"]["phase"] = node, "Running"
    c.sim.add_pod(made)
    ssn = Session(c.sim.snapshot(), conf(), PLUGINS, memo=c.memo)
    honour_holds(ssn)
    assert all(n.idle.get(GPU) >= 0 for n in ssn.node_list)
    assert not any(t.job == PLACEHOLDER_JOB for t in ssn.nodes[node].tasks.values())
    recreate(c, hold.pods[0].pod, hold.pods[0].request.get(GPU) // 1000)
    c.cycle(conf())
    assert ("default/" + held_job.split("/")[1], "refused") in c.memo.holds.ended


def test_the_room_freed_for_the_gang_is_held_for_it_while_its_victims_leave() -> None:
    """The victims keep their nodes through their grace period (as on a cluster); meanwhile half of each freed node
    is already idle, and a 4-GPU job that arrives then would fit there and leave the gang short for good. The
    gang's room is held for it as the moved jobs' is, so the gang binds on the freed nodes once the victims are
    gone and the newcomer waits."""
    c = scattered()
    c.sim.graceful = True
    first = c.cycle(conf())
    freed = sorted(e.node for e in first.evictions)
    c.job("intruder", replicas=1, gpu=4)
    for _ in range(60):  # the default grace period is 30 s; one cycle is 1 s of the simulator's clock
        c.sim.reap()  # the victims whose grace period ran out are gone
        c.cycle(conf())
        if c.sim.bound("big"):
            break
    assert sorted(c.sim.bound("big").values()) == freed
    assert c.sim.bound("intruder") == {}


def _priced(bound: int | None, checkpoint: str | None = None) -> ClusterBuilder:
    """`scattered`, each small job (4 GPUs) running since 0 and the clock at 1 h: a move loses 4 GPU-hours, or
    4 GPUs x the time since `checkpoint`."""
    mark = {MOVABLE: "true"} | ({CHECKPOINT: checkpoint} if checkpoint else {})
    c = cluster().nodes("n", 4, gpu=8)
    for i in range(4):
        running(c, f"small{i}", [f"n{i}"], 4, mark=mark, since=0.0)
    c.job("big", replicas=2, gpu=8)
    c.sim.now = 3600.0
    return c


def test_a_move_that_would_lose_more_work_than_its_bound_is_not_made() -> None:
    # each move loses 4 GPUs x 1 h = 4 GPU-hours: allowed at 4, refused at 3, and the gang waits
    at_bound = _priced(4).cycle(conf(consolidate={MAX_LOST: 4}))
    assert len(at_bound.evictions) == 2
    below = _priced(3)
    for _ in range(2):
        assert not below.cycle(conf(consolidate={MAX_LOST: 3})).evictions
    assert below.sim.bound("big") == {}
    assert len(_priced(None).cycle(conf()).evictions) == 2  # unset: no bound


def test_the_work_a_move_loses_counts_from_the_last_checkpoint() -> None:
    # checkpointed at 45 min: a move at 1 h loses 4 GPUs x 15 min = 1 GPU-hour
    c = _priced(1, checkpoint="1970-01-01T00:45:00Z")
    assert len(c.cycle(conf(consolidate={MAX_LOST: 1})).evictions) == 2


@pytest.mark.parametrize("raw", [0, -2, "4h", 1_000_001, True])
def test_an_unreadable_move_loss_bound_is_no_bound_and_conf_check_names_it(raw: object) -> None:
    assert ConsolidateArgs.read({MAX_LOST: raw}).max_lost is None
    assert ConsolidateArgs.read({MAX_LOST: 7}).max_lost == 7
    bad = action_warnings(conf(consolidate={MAX_LOST: raw}))
    assert [(w.key, w.using) for w in bad] == [(MAX_LOST, "consolidate uses no bound (the default)")]
