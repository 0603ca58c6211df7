"""What a long-lived scheduler and controller remember about objects is forgotten once the objects are gone
(issue 22: the events already sent and the per-Job locks grew for ever)."""

from __future__ import annotations

import threading

from fake_api import FakeApi

from scheduler.cache.events import EventRecorder
from scheduler.cache.store import Stores
from scheduler.controllers.job import JobController


def test_events_about_vanished_objects_are_forgotten_past_the_limit() -> None:
    stores = Stores()
    recorder = EventRecorder(None, stores, lambda: 0.0, "test", threading.Event())  # type: ignore[arg-type]
    recorder.sent_limit = 10
    stores.pods.objects["ns/alive"] = {"metadata": {"name": "alive", "namespace": "ns", "uid": "u"}}
    recorder.record("Pod", "ns/alive", "Warning", "FailedScheduling", "once")
    for i in range(25):  # pods that came and went
        recorder.record("Pod", f"ns/gone-{i}", "Warning", "FailedScheduling", "x")
    assert len(recorder._sent) <= 10
    assert ("Pod", "ns/alive", "Warning", "FailedScheduling", "once") in recorder._sent  # still sent once
    before = recorder.queue.qsize()
    recorder.record("Pod", "ns/alive", "Warning", "FailedScheduling", "once")
    assert recorder.queue.qsize() == before


def test_live_objects_past_the_limit_do_not_make_every_event_prune() -> None:
    """Past the limit with every object still there, pruning keeps them all and waits for the set to double."""
    stores = Stores()
    recorder = EventRecorder(None, stores, lambda: 0.0, "test", threading.Event())  # type: ignore[arg-type]
    recorder.sent_limit = 4
    for i in range(4):
        stores.pods.objects[f"ns/p{i}"] = {"metadata": {"name": f"p{i}", "namespace": "ns"}}
        recorder.record("Pod", f"ns/p{i}", "Warning", "FailedScheduling", "x")
    stores.pods.objects["ns/p4"] = {"metadata": {"name": "p4", "namespace": "ns"}}
    recorder.record("Pod", "ns/p4", "Warning", "FailedScheduling", "x")  # prunes: all 4 still live
    for i in range(5, 8):  # below twice the 4 kept: no pruning, nothing forgotten
        recorder.record("Pod", f"ns/gone-{i}", "Warning", "FailedScheduling", "x")
    assert len(recorder._sent) == 8


def test_a_deleted_jobs_lock_goes_with_it() -> None:
    api = FakeApi()
    ctl = JobController(api, clock=lambda: 1_800_000_000.0)  # type: ignore[arg-type]
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
           "metadata": {"name": "j", "namespace": "ns", "uid": "u1"},
           "spec": {"schedulerName": "volcano-py", "tasks": [{"name": "w", "replicas": 1, "template": {"spec": {
               "containers": [{"name": "c", "image": "busybox"}]}}}]}}
    api.put("Job", job)
    ctl.reconcile("ns", "j")
    assert "ns/j" in ctl._locks
    ctl.on_job("DELETED", job)
    assert "ns/j" not in ctl._locks


def test_the_api_pools_start_every_thread_at_once_so_the_thread_count_is_flat() -> None:
    """A pool warming up to its bound looked like a thread leak to the soak (19 threads, then 23 at 28 min)."""
    from concurrent.futures import ThreadPoolExecutor

    from scheduler.cache.cluster_cache import prestart

    pool = ThreadPoolExecutor(max_workers=5)
    try:
        prestart(pool)
        assert len(pool._threads) == 5
        done = [pool.submit(lambda: threading.current_thread().name) for _ in range(20)]
        assert len({f.result(10) for f in done}) <= 5 and len(pool._threads) == 5
    finally:
        pool.shutdown(wait=True)
