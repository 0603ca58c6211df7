"""The replay deletes finished Jobs past `ttlSecondsAfterFinished` (as Volcano's garbage collector does) without
changing a placement, and records the work a gang loses when it breaks."""

from __future__ import annotations

from typing import Any

from scheduler.cycle import builtin_default_conf
from scheduler.sim.replay import replay
from scheduler.sim.workload import ClusterSpec, load_cluster, workload_from_docs
from scheduler.testing import conf_from_tiers


def _cluster(tmp_path: Any, gpus: int = 8) -> ClusterSpec:
    path = tmp_path / "cluster.yaml"
    path.write_text(f"nodes:\n- {{name: gpu, cpu: 64, memory: 512Gi, gpu: {gpus}}}\n"
                    "queues:\n- {name: a, weight: 1}\n- {name: b, weight: 1}\n")
    return load_cluster(path)


def _job(name: str, arrival: float, duration: float, replicas: int, queue: str = "a",
         ttl: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "volcano-py", "queue": queue, "minAvailable": replicas, "tasks": [
        {"name": "w", "replicas": replicas, "template": {"spec": {"containers": [
            {"name": "w", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}]}
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return {"arrival": arrival, "duration": duration, "kind": "Job", "metadata": {"name": name}, "spec": spec}


def _jobs(ttl: int | None) -> list[dict[str, Any]]:
    # short finishes at 100 s; long keeps the replay ticking until 1000 s
    return [_job("short", 0, 100, 2, ttl=ttl), _job("long", 0, 1000, 2), _job("later", 400, 100, 4)]


def test_a_finished_job_past_its_ttl_is_deleted_with_its_pods_and_podgroup(tmp_path: Any) -> None:
    outcome = replay(_cluster(tmp_path), workload_from_docs("t", _jobs(60)), builtin_default_conf(), period=10)
    short, long = (next(r for r in outcome.runs if r.item.name == n) for n in ("short", "long"))
    assert short.ended is not None and short.collected is not None
    # at the first tick at or after the deadline (the clock jumps over idle time: no tick of its own)
    assert short.collected == min(t.time for t in outcome.ticks if t.time >= short.ended + 60)
    assert outcome.cluster.pods_of(short.key) == [] and short.key not in outcome.cluster.podgroups
    assert long.ttl is None and long.collected is None  # no ttl: kept, as Volcano keeps it
    assert len(outcome.cluster.pods_of(long.key)) == 2 and long.key in outcome.cluster.podgroups
    assert short.phase == "Completed"  # the run keeps its phase for the report


def test_deleting_finished_jobs_changes_no_placement(tmp_path: Any) -> None:
    def placements(ttl: int | None) -> list[tuple[float, str, str]]:
        outcome = replay(_cluster(tmp_path), workload_from_docs("t", _jobs(ttl)), builtin_default_conf(), period=10)
        return [(b.time, b.task, b.node) for b in outcome.cluster.bind_log]

    assert placements(0) == placements(None)


def test_a_ttl_past_int32_is_no_ttl_and_ends_no_replay(tmp_path: Any) -> None:
    """Volcano's ttlSecondsAfterFinished is an int32: a larger integer (one too large even for a float) passes
    the CRD's type and minimum checks, but deletes nothing and must not end the replay."""
    for ttl in (2**31, 10**400):
        outcome = replay(_cluster(tmp_path), workload_from_docs("t", _jobs(ttl)), builtin_default_conf(),
                         period=10)
        short = next(r for r in outcome.runs if r.item.name == "short")
        assert short.ended is not None and short.ttl is None and short.collected is None
        assert short.key in outcome.cluster.podgroups


NOT_PREEMPTABLE = {"enablePreemptable": False}
# Volcano's Helm tiers with gangreclaim (gang and drf not preemptable, as its conf for gang-aware reclaim), without
# overcommit: its enqueue gate (8 GPUs x 1.2) would keep `small` Pending while `big` holds the node
RECLAIM = conf_from_tiers(
    ["priority", {"name": "gang", **NOT_PREEMPTABLE}, "conformance"],
    [{"name": "drf", **NOT_PREEMPTABLE}, "predicates", "proportion", "nodeorder", "binpack"],
    actions="enqueue, allocate, gangreclaim, backfill",
)


def test_a_broken_gang_records_the_work_it_lost(tmp_path: Any) -> None:
    """Queue a holds the 8 GPUs with one rigid gang; queue b's job at 600 s takes half back by gangreclaim: the
    gang breaks and what it ran since it became whole is lost."""
    jobs = [_job("big", 0, 5000, 8, "a"), _job("small", 600, 100, 4, "b")]
    outcome = replay(_cluster(tmp_path), workload_from_docs("t", jobs), RECLAIM, period=10)
    big = next(r for r in outcome.runs if r.item.name == "big")
    assert big.started is not None and big.interrupted >= 1
    when, seconds = big.lost[0]
    assert when >= 600 and seconds == when - big.started  # it ran whole from its start until the break
    assert len(big.lost) == big.interrupted
