"""Elastic jobs: a pod deleted because its task was scaled down is not an eviction."""

from __future__ import annotations

from scheduler.jobs import PodView, pod_event
from scheduler.jobs.bus import PolicyEvent


def job(replicas: int) -> dict:
    return {"metadata": {"name": "train", "namespace": "ml"},
            "spec": {"tasks": [{"name": "worker", "replicas": replicas, "template": {"spec": {"containers": []}}}]}}


def test_a_pod_beyond_the_new_replica_count_leaving_is_no_eviction() -> None:
    gone = PodView("train-worker-3", "worker", "Running")
    assert pod_event(job(2), gone, None, []).event != PolicyEvent.POD_EVICTED


def test_a_pod_within_the_replica_count_leaving_is_an_eviction() -> None:
    gone = PodView("train-worker-1", "worker", "Running")
    assert pod_event(job(2), gone, None, []).event == PolicyEvent.POD_EVICTED
