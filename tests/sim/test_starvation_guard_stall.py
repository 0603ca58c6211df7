"""The starvation guard never leaves a queue unable to run anything (actions/starvation.py, point 4).

Two queues of equal weight on 2 x 8 GPUs: while both ask, each deserves 8 GPUs, and `proportion` never lets a
queue pass that. Queue `a` has a 16-GPU gang that waits past the guard's threshold: a gang its queue can never
admit. The guard used to reserve 8 GPUs for it anyway; the reservation counted in `a`'s allocation, so `a`'s
4-GPU jobs were refused with `a`'s deserved share all day while no pod of `a` ran. A reservation that the queue's
running pods will complete when they finish is still kept (the guard's purpose).
"""

from __future__ import annotations

from pathlib import Path

from gpu_days import NO_OVERCOMMIT, gpu_cluster, gpu_job as job, replay_day

from scheduler.api.reasons import QueueShareExceeded, Reserving
from scheduler.cycle import conf_from_text
from scheduler.testing import cluster

HORIZON = 6000


def test_a_gang_beyond_its_queues_share_does_not_hold_the_queue(tmp_path: Path) -> None:
    # 3 x 8 GPUs; `b` runs 8 GPUs all day and asks for 8 more when `a` comes, so each queue deserves 12 GPUs.
    jobs = [job("b-long", "b", 0, HORIZON, 1, 8), job("b-more", "b", 5, 1000, 1, 8)]
    jobs.append(job("a-big", "a", 5, 600, 4, 4))  # 16 GPUs: more than `a` deserves while `b` asks
    jobs += [job(f"a-small-{i}", "a", 400 + 100 * i, 300, 1, 4) for i in range(2)]
    outcome = replay_day(tmp_path, gpu_cluster(3, ["a", "b"]), jobs, conf_from_text(NO_OVERCOMMIT), horizon=HORIZON)
    runs = {run.key.split("/")[-1]: run for run in outcome.runs}
    assert runs["b-long"].started is not None and runs["b-more"].started is None  # the shares are 12 / 12
    assert runs["a-big"].started is None  # `a` can never admit 16 GPUs while `b` asks
    small = [runs[f"a-small-{i}"] for i in range(2)]
    # Each starts as it comes: 8 GPUs sit idle, and `a` holds nothing that runs.
    assert all(run.started is not None and run.started < 400 + 100 * i + 60 for i, run in enumerate(small)), \
        [r.started for r in small]


def test_a_reservation_its_queues_running_pods_will_complete_is_kept(tmp_path: Path) -> None:
    # As above, `a` deserves 12 GPUs; it runs 8 until t=1000 and its 12-GPU gang waits. Past the threshold the guard
    # reserves 4 and `a` refuses the rest; what `a` runs will free the 8 missing, so the reservation stays, and the
    # long 4-GPU job arriving at 400 does not take the room: the gang starts when `a-run` ends.
    jobs = [job("b-long", "b", 0, HORIZON, 1, 8), job("a-run", "a", 0, 1000, 1, 8),
            job("b-more", "b", 5, 1000, 1, 8), job("a-big", "a", 5, 600, 3, 4),
            job("a-small", "a", 400, 3000, 1, 4)]
    outcome = replay_day(tmp_path, gpu_cluster(3, ["a", "b"]), jobs, conf_from_text(NO_OVERCOMMIT), horizon=HORIZON)
    runs = {run.key.split("/")[-1]: run for run in outcome.runs}
    assert runs["a-run"].ended is not None and runs["a-big"].started is not None
    assert runs["a-big"].started <= runs["a-run"].ended + 30
    assert runs["a-small"].started is None or runs["a-small"].started >= runs["a-big"].started


def test_the_queue_limit_holds_for_the_tasks_no_node_holds_yet() -> None:
    """2 x 8 GPUs all taken by `b`, which asks for them all, so `a` deserves 8. `a`'s 2 x 8-GPU gang waits past
    the threshold: no node holds any of its tasks now, so the guard reserves the nearest nodes for them; `a`
    refuses the second (16 GPUs of 8 deserved) and nothing `a` runs will free it, so no reservation is kept and the
    gang waits with `a`'s limit, not as a reservation."""
    conf = conf_from_text(NO_OVERCOMMIT.replace("tiers:\n", "configurations:\n- name: allocate\n  arguments:\n"
                                                "    starvationThresholdSeconds: 60\ntiers:\n", 1))
    c = cluster().queue("a").queue("b")
    c.nodes("gpu", 2, gpu=8)
    c.job("b-run", queue="b", replicas=2, gpu=8)
    c.cycle(conf)
    assert len(c.sim.bound("b-run")) == 2
    c.job("a-big", queue="a", replicas=2, gpu=8)
    c.cycle(conf)
    c.sim.now += 120
    result = c.cycle(conf)
    (status,) = [s for s in result.podgroups if s.job == "default/a-big"]
    assert status.decision is not None
    assert not any(isinstance(r, Reserving) for r in status.decision.reasons), status.decision.reasons
    assert [r.queue for r in status.decision.reasons if isinstance(r, QueueShareExceeded)] == ["a"]
    assert c.sim.bound("a-big") == {}
