"""Consolidation in the simulator (issue 35): a moved job goes through what a cluster does to it. Its pods are
evicted and keep their node through their grace period (Kubernetes' default 30 s), its Job controller recreates
them `restart_delay` seconds after they are gone, and a later cycle places them on the nodes its plan held, which
nothing else takes meanwhile (a job arriving then waits).

4 nodes of 8 GPUs; `small0`-`small3` (one 4-GPU pod each, `volcano-py.io/movable: "true"`, 3,600 s) arrive one
per second and spread one per node (nodeorder, no binpack); `big` (2 x 8 GPUs, minAvailable 2, 600 s) arrives at
10 s, `intruder` (one 4-GPU pod, exactly a held room, 100 s) at 15 s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from scheduler.actions.movable import MOVABLE
from scheduler.sim.cluster import InMemoryCluster
from scheduler.sim.items import WorkItem
from scheduler.sim.replay import JobDriver, JobRun, Replay, replay
from scheduler.sim.report import eviction_rows
from scheduler.sim.workload import load_cluster, load_workload
from scheduler.testing import conf_from_tiers

GRACE, RESTART = 30.0, 20.0


def job(name: str, arrival: float, duration: float, replicas: int, gpus: int, movable: bool = False) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {"containers": [{"name": "main", "image": "train", "resources": {
        "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": gpus}}}]}}
    if movable:
        template["metadata"] = {"annotations": {MOVABLE: "true"}}
    return {"arrival": arrival, "duration": duration, "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name}, "spec": {"minAvailable": replicas, "schedulerName": "volcano-py",
                                                 "queue": "default", "tasks": [{"name": "worker", "replicas": replicas,
                                                                                "template": template}]}}


def run(tmp_path: Path, actions: str) -> Replay:
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump({
        "nodes": [{"name": f"n{i}", "cpu": 32, "memory": "256Gi", "gpu": 8} for i in range(4)],
        "queues": [{"name": "default", "weight": 1}]}))
    jobs = [job(f"small{i}", float(i), 3600, 1, 4, movable=True) for i in range(4)]
    jobs += [job("big", 10, 600, 2, 8), job("intruder", 15, 100, 1, 4)]
    (tmp_path / "workload.yaml").write_text(yaml.safe_dump({"jobs": jobs}))
    conf = conf_from_tiers(["priority", "gang", "conformance"], ["drf", "predicates", "proportion", "nodeorder"],
                           actions=actions, configurations={"allocate": {"starvationThresholdSeconds": -1}})
    return replay(load_cluster(tmp_path / "cluster.yaml"), load_workload(tmp_path / "workload.yaml"), conf,
                  period=1.0, restart_delay=RESTART)


def test_a_moved_job_is_deleted_with_its_grace_recreated_after_the_delay_and_placed_on_its_held_node(
        tmp_path: Path) -> None:
    done = run(tmp_path, "enqueue, allocate, consolidate, backfill")
    first: dict[str, str] = {}
    for b in sorted(done.cluster.bind_log, key=lambda b: b.time):
        if b.job.startswith("default/small"):
            first.setdefault(b.job, b.node)
    assert sorted(first.values()) == ["n0", "n1", "n2", "n3"], "the small jobs are spread: the GPUs scattered"
    moves = [e for e in done.cluster.eviction_log if e.cause is not None and e.cause.action == "consolidate"]
    assert len(moves) == 2 and all(e.cause is not None and e.cause.by == "default/big" and e.grace == GRACE
                                   for e in moves)
    runs = {r.key: r for r in done.runs}
    big_start = runs["default/big"].started
    assert big_start is not None and big_start >= moves[0].time + GRACE, "big starts once the victims are gone"
    for e in moves:
        assert e.cause is not None
        held = e.cause.rule.split(" to ")[1].split(" ")[0]
        again = [b for b in done.cluster.bind_log if b.job == e.job and b.time > e.time]
        assert again and again[0].node == held, "placed again on its held node"
        assert again[0].time >= e.time + GRACE + RESTART, "recreated after its grace period and the restart delay"
        assert runs[e.job].ended is not None and runs[e.job].interrupted == 1, "it runs whole again, to its end"
        intruder = [b for b in done.cluster.bind_log if b.job == "default/intruder"]
        assert not intruder or intruder[0].node != held or intruder[0].time > again[0].time, \
            "nothing took the held room before the moved job came back"
    assert big_start < 100
    rows = [r for r in eviction_rows(done) if r.action == "consolidate"]  # the report's evictions table
    assert sorted(r.job for r in rows) == sorted(e.job for e in moves)
    assert all(r.by == "default/big" and r.rule.startswith("moved whole from ") and r.grace == GRACE for r in rows)


def test_without_the_action_the_gang_waits_for_the_small_jobs_to_end(tmp_path: Path) -> None:
    done = run(tmp_path, "enqueue, allocate, backfill")
    assert not done.cluster.eviction_log
    big = next(r for r in done.runs if r.key == "default/big")
    assert big.started is not None and big.started >= 3600


def test_a_deleted_jobs_pending_restarts_are_forgotten_so_the_replay_does_not_wake_for_them() -> None:
    driver = JobDriver(InMemoryCluster(), restart_delay=RESTART)
    manifest = {"kind": "PodGroup", "metadata": {"name": "a", "namespace": "default"}, "spec": {"minMember": 1}}
    gone, kept = JobRun(WorkItem(manifest, 0.0, 60.0), "default/a", 1), "default/b"
    driver.not_before.update({("default/a", "a-0"): 50.0, (kept, "b-0"): 70.0})
    assert driver.next_restart(10.0) == 50.0
    driver.delete(gone, 10.0)
    assert driver.next_restart(10.0) == 70.0 and list(driver.not_before) == [(kept, "b-0")]
