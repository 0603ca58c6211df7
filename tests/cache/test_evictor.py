"""The evictor's API calls and events (issues 22 and 31).

As Volcano's (pkg/scheduler/cache/cache.go): a Warning `Evict` on the pod and a Normal `Evict` on its PodGroup,
both naming the objects' uids. As Volcano and kube-scheduler: a `DisruptionTarget=True` condition (reason
`PreemptionByScheduler`) written through the pod's /status first, carrying the cached uid and resourceVersion, then
the delete with `preconditions.uid`, so a pod recreated under the victim's name is never the one hit.

The fake apiserver keeps the properties these requests rely on, as the real one answers them (checked against it
in tests/e2e/test_evict_uid.py): a status patch whose metadata.resourceVersion is not the pod's gets 409, one whose
metadata.uid is not the pod's (and no resourceVersion) 422; a delete whose preconditions.uid is not the pod's 409;
a pod that does not exist 404.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from scheduler.api.evictions import POD_CAUSE, POD_NOTICE, read_cause
from scheduler.api.snapshot import CycleResult, EvictCause, Eviction
from scheduler.cache.events import EventRecorder
from scheduler.cache.evictor import CONFLICT_RETRIES, Evictor
from scheduler.cache.kube import STRATEGIC_PATCH, KubeError
from scheduler.cache.store import Stores

STATUS = "/api/v1/namespaces/ns/pods/victim/status"
POD = "/api/v1/namespaces/ns/pods/victim"


def pod(uid: str, rv: str, group: str | None = "low") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "victim", "namespace": "ns", "uid": uid, "resourceVersion": rv}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"schedulerName": "volcano-py", "nodeName": "n1"}, "status": {"phase": "Running"}}


class FakePods:
    """One pod name served as the apiserver serves it; `before(method, path)` runs before each request (a pod
    recreated or changed between two of the evictor's calls). A delete drops the pod from the store too, as a
    fast watch would."""

    def __init__(self, stores: Stores, served: dict[str, Any] | None) -> None:
        self.stores = stores
        self.served = served
        self.sent: list[tuple[str, str, Any]] = []
        self.before: Callable[[str, str], None] = lambda method, path: None
        self.fail_patch: KubeError | None = None
        self.fail_delete: KubeError | None = None

    def bump(self) -> None:
        assert self.served is not None
        self.served["metadata"]["resourceVersion"] = str(int(self.served["metadata"]["resourceVersion"]) + 1)

    def request(self, method: str, path: str, *, body: Any = None, content_type: str | None = None,
                **_: object) -> dict[str, Any]:
        self.before(method, path)
        self.sent.append((method, path, copy.deepcopy(body)))
        if self.served is None:
            raise KubeError(404, method, path, b'{"message": "not found"}')
        meta = self.served["metadata"]
        if method == "GET":
            return copy.deepcopy(self.served)
        if method == "PATCH":
            assert content_type == STRATEGIC_PATCH
            if self.fail_patch is not None:
                raise self.fail_patch
            sent_meta = body.get("metadata") or {}
            if "resourceVersion" in sent_meta and sent_meta["resourceVersion"] != meta["resourceVersion"]:
                raise KubeError(409, method, path, b'{"message": "the object has been modified"}')
            if "uid" in sent_meta and sent_meta["uid"] != meta["uid"]:
                raise KubeError(422, method, path, b'{"message": "metadata.uid: field is immutable"}')
            if path.endswith("/status"):
                conditions = [c for c in self.served["status"].get("conditions", [])
                              if c["type"] not in {c2["type"] for c2 in body["status"]["conditions"]}]
                self.served["status"]["conditions"] = conditions + body["status"]["conditions"]
            else:  # the eviction notice: annotations merged into the pod's
                meta.setdefault("annotations", {}).update(sent_meta.get("annotations") or {})
            self.bump()
            return copy.deepcopy(self.served)
        if method == "DELETE" and self.fail_delete is not None:
            failure, self.fail_delete = self.fail_delete, None
            raise failure
        if method == "DELETE":
            wanted = ((body or {}).get("preconditions") or {}).get("uid")
            if wanted is not None and wanted != meta["uid"]:
                raise KubeError(409, method, path, b'{"message": "Precondition failed: UID in precondition"}')
            self.served = None
            with self.stores.lock:
                self.stores.pods.objects.pop("ns/victim", None)
            return {}
        raise AssertionError(f"unexpected {method} {path}")

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        try:
            return self.request("GET", path)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def close_streams(self) -> None:
        pass

    def close(self) -> None:
        pass

    def calls(self) -> list[tuple[str, str]]:
        return [(method, path) for method, path, _ in self.sent]


def setup(cached: dict[str, Any], served: dict[str, Any] | None, decided: dict[str, Any] | None = None,
          ) -> tuple[FakePods, Evictor, EventRecorder]:
    stores = Stores()
    stores.pods.objects["ns/victim"] = copy.deepcopy(cached)
    stores.podgroups.objects["ns/low"] = {"metadata": {"name": "low", "namespace": "ns", "uid": "pg-uid"}}
    kube = FakePods(stores, copy.deepcopy(served) if served is not None else None)
    events = EventRecorder(kube, stores, lambda: 0.0, "test", threading.Event())  # type: ignore[arg-type]
    evictor = Evictor(kube, stores, ThreadPoolExecutor(1), events, lambda: True, 30,  # type: ignore[arg-type]
                      decided=(lambda key: decided) if decided is not None else None, clock=lambda: 1_000_000.0)
    return kube, evictor, events


def sent_events(events: EventRecorder) -> list[tuple[str, Any, str, str, str]]:
    out = [events.queue.get_nowait()[1] for _ in range(events.queue.qsize())]  # type: ignore[index]
    return [(e["involvedObject"]["kind"], e["involvedObject"].get("uid"), e["type"], e["reason"], e["message"])
            for e in out]


def test_the_condition_is_written_first_then_the_pod_is_deleted_with_its_uid_as_precondition() -> None:
    kube, evictor, events = setup(pod("u1", "5"), pod("u1", "5"))

    evictor.evict("ns/victim", "preempted by ns/high")

    assert kube.calls() == [("PATCH", STATUS), ("DELETE", POD)]
    patch, delete = kube.sent[0][2], kube.sent[1][2]
    assert patch == {"metadata": {"uid": "u1", "resourceVersion": "5"}, "status": {"conditions": [{
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
        "message": "volcano-py: preempted by ns/high", "lastTransitionTime": "1970-01-12T13:46:40Z"}]}}
    assert delete == {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 30,
                      "preconditions": {"uid": "u1"}}
    assert sent_events(events) == [
        ("Pod", "u1", "Warning", "Evict", "Pod is evicted: preempted by ns/high"),
        ("PodGroup", "pg-uid", "Normal", "Evict", "preempted by ns/high")]


def test_a_pod_recreated_before_the_condition_gets_neither_the_condition_nor_the_delete(
        caplog: pytest.LogCaptureFixture) -> None:
    """The cache still holds uid u1; the apiserver serves u2 under the name: the patch's resourceVersion conflicts,
    the pod read again has another uid, and nothing more is sent."""
    kube, evictor, events = setup(pod("u1", "5"), pod("u2", "9"))

    with caplog.at_level(logging.DEBUG, "volcano_py.cache"):
        evictor.evict("ns/victim", "preempted by ns/high")

    assert kube.calls() == [("PATCH", STATUS), ("GET", POD)]
    assert kube.served is not None and kube.served["metadata"]["uid"] == "u2"
    assert kube.served["status"].get("conditions") is None
    assert sent_events(events) == []
    assert [r.levelno for r in caplog.records] == [logging.INFO]


def test_without_a_cached_resource_version_the_uid_alone_refuses_the_patch() -> None:
    cached = pod("u1", "5")
    del cached["metadata"]["resourceVersion"]
    kube, evictor, _ = setup(cached, pod("u2", "9"))

    evictor.evict("ns/victim", "preempted by ns/high")

    assert kube.calls() == [("PATCH", STATUS), ("GET", POD)]
    assert kube.sent[0][2]["metadata"] == {"uid": "u1"}
    assert kube.served is not None and kube.served["metadata"]["uid"] == "u2"


def test_a_409_from_a_status_change_of_the_same_pod_is_retried_with_the_fresh_resource_version() -> None:
    kube, evictor, events = setup(pod("u1", "5"), pod("u1", "7"))  # the kubelet moved its status on since

    evictor.evict("ns/victim", "reclaimed by ns/q")

    assert kube.calls() == [("PATCH", STATUS), ("GET", POD), ("PATCH", STATUS), ("DELETE", POD)]
    assert [body["metadata"] for method, _, body in kube.sent if method == "PATCH"] == [
        {"uid": "u1", "resourceVersion": "5"}, {"uid": "u1", "resourceVersion": "7"}]
    assert kube.served is None
    assert [e[3] for e in sent_events(events)] == ["Evict", "Evict"]


def test_a_pod_that_keeps_changing_is_left_running_after_the_last_retry(caplog: pytest.LogCaptureFixture) -> None:
    kube, evictor, events = setup(pod("u1", "5"), pod("u1", "6"))
    kube.before = lambda method, path: kube.bump() if method == "PATCH" else None

    with caplog.at_level(logging.WARNING, "volcano_py.cache"):
        evictor.evict("ns/victim", "preempted by ns/high")

    assert [m for m, _ in kube.calls()] == ["PATCH", "GET"] * (CONFLICT_RETRIES + 1)
    assert kube.served is not None
    assert sent_events(events) == []
    assert len(caplog.records) == 1 and "not evicted" in caplog.records[0].getMessage()


def test_a_pod_recreated_between_the_condition_and_the_delete_survives(caplog: pytest.LogCaptureFixture) -> None:
    kube, evictor, _ = setup(pod("u1", "5"), pod("u1", "5"))

    def recreate(method: str, path: str) -> None:
        if method == "DELETE":
            kube.served = pod("u2", "11")

    kube.before = recreate
    with caplog.at_level(logging.DEBUG, "volcano_py.cache"):
        evictor.evict("ns/victim", "preempted by ns/high")

    assert kube.calls() == [("PATCH", STATUS), ("DELETE", POD)]
    assert kube.served is not None and kube.served["metadata"]["uid"] == "u2"
    assert [r.levelno for r in caplog.records] == [logging.INFO]


def test_a_victim_gone_before_the_delete_is_a_debug_line_not_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    kube, evictor, _ = setup(pod("u1", "5"), pod("u1", "5"))

    def vanish(method: str, path: str) -> None:
        if method == "DELETE":
            kube.served = None

    kube.before = vanish
    with caplog.at_level(logging.DEBUG, "volcano_py.cache"):
        evictor.evict("ns/victim", "preempted by ns/high")

    assert kube.calls() == [("PATCH", STATUS), ("DELETE", POD)]
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]


def test_a_victim_gone_before_the_condition_is_not_deleted() -> None:
    kube, evictor, events = setup(pod("u1", "5"), None)

    evictor.evict("ns/victim", "preempted by ns/high")

    assert kube.calls() == [("PATCH", STATUS)]
    assert sent_events(events) == []


def test_a_condition_that_cannot_be_written_leaves_the_pod_running(caplog: pytest.LogCaptureFixture) -> None:
    kube, evictor, events = setup(pod("u1", "5"), pod("u1", "5"))
    kube.fail_patch = KubeError(403, "PATCH", STATUS, b'{"message": "forbidden"}')

    with caplog.at_level(logging.WARNING, "volcano_py.cache"):
        evictor.evict("ns/victim", "preempted by ns/high")

    assert kube.calls() == [("PATCH", STATUS)]
    assert kube.served is not None
    assert sent_events(events) == []
    assert len(caplog.records) == 1


def test_the_pod_the_cycle_decided_for_is_evicted_not_the_one_the_watch_shows_since() -> None:
    """The store (the watch) already holds the pod recreated under the name: nothing is sent at all."""
    kube, evictor, events = setup(pod("u2", "9"), pod("u2", "9"), decided=pod("u1", "5"))

    evictor.evict("ns/victim", "preempted by ns/high")

    assert kube.sent == []
    assert sent_events(events) == []


def test_a_terminating_victim_is_left_alone() -> None:
    cached = pod("u1", "5")
    cached["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    kube, evictor, _ = setup(cached, cached)

    evictor.evict("ns/victim", "preempted by ns/high")

    assert kube.sent == []


@pytest.mark.parametrize("uid", [None, "", 7, "x" * 129, ["u1"]])
def test_a_cached_pod_without_a_readable_uid_is_not_evicted(uid: object, caplog: pytest.LogCaptureFixture) -> None:
    cached = pod("u1", "5")
    cached["metadata"]["uid"] = uid
    kube, evictor, _ = setup(cached, pod("u1", "5"))

    with caplog.at_level(logging.WARNING, "volcano_py.cache"):
        evictor.evict("ns/victim", "preempted by ns/high")

    assert kube.sent == []
    assert [r.getMessage() for r in caplog.records] == [
        "evict ns/victim: not evicted: the cached pod has no readable metadata.uid"]


def test_the_cache_evicts_the_uid_its_snapshot_saw_not_the_pod_recreated_since() -> None:
    """ClusterCache hands the evictor the snapshot's copy of the victim (uid and resourceVersion)."""
    from scheduler.cache.cluster_cache import ClusterCache

    cache = ClusterCache(None)
    victim = pod("u1", "5")
    victim["spec"]["containers"] = [{"name": "c"}]
    kube = FakePods(cache.stores, pod("u1", "5"))
    cache.kube = kube  # type: ignore[assignment]
    cache.pods.objects["ns/victim"] = victim
    cache.snapshot()
    with cache.lock:  # the watch shows a newer status of the same pod: the snapshot's copy is still what is sent
        cache.pods.objects["ns/victim"] = pod("u1", "6")
    try:
        cache.apply(CycleResult(evictions=[Eviction("ns/low", "ns/victim", "n1", "preempted by ns/high")]))
    finally:
        cache.stop(timeout=1.0)
    assert [(m, body["metadata"]) for m, _, body in kube.sent if m == "PATCH"][0] == (
        "PATCH", {"uid": "u1", "resourceVersion": "5"})
    # No gracePeriodSeconds: the pod's own terminationGracePeriodSeconds applies, as Volcano's DeleteOptions{}.
    assert kube.sent[-1] == ("DELETE", POD, {"apiVersion": "v1", "kind": "DeleteOptions",
                                             "preconditions": {"uid": "u1"}})


def test_a_422_on_the_same_pod_is_not_retried(caplog: pytest.LogCaptureFixture) -> None:
    """A refused patch that is not a conflict (the pod read again is the same one) is not sent again."""
    kube, evictor, events = setup(pod("u1", "5"), pod("u1", "5"))
    kube.fail_patch = KubeError(422, "PATCH", STATUS, b'{"message": "invalid"}')

    with caplog.at_level(logging.WARNING, "volcano_py.cache"):
        evictor.evict("ns/victim", "preempted by ns/high")

    assert kube.calls() == [("PATCH", STATUS), ("GET", POD)]
    assert kube.served is not None
    assert sent_events(events) == []
    assert len(caplog.records) == 1


# ---- the cause, the grace period and the eviction notice (issue 32) -------------------------------------------

CAUSE = EvictCause("gangpreempt", "ns/high", "whole bundle", breaks_gang=True)


def test_the_cause_is_in_the_condition_message_and_annotated_on_the_events() -> None:
    kube, evictor, events = setup(pod("u1", "5"), pod("u1", "5"))
    kube.stores.podgroups.objects["ns/high"] = {"metadata": {"name": "high", "namespace": "ns", "uid": "hi-uid"}}

    evictor.evict("ns/victim", "preempted by ns/high", CAUSE)

    condition = kube.sent[0][2]["status"]["conditions"][0]
    assert condition["message"] == ("volcano-py: preempted by ns/high (gangpreempt for ns/high, whole bundle, "
                                    "gang broken)")
    sent = [events.queue.get_nowait()[1] for _ in range(events.queue.qsize())]  # type: ignore[index]
    assert [(e["involvedObject"]["kind"], e["reason"]) for e in sent] == [
        ("Pod", "Evict"), ("PodGroup", "Evict"), ("PodGroup", "EvictedForJob")]
    assert sent[2]["involvedObject"]["uid"] == "hi-uid"
    for event in sent:
        assert read_cause(event["metadata"]["annotations"][POD_CAUSE]) == (CAUSE, "ns/victim", "ns/low")


def test_without_an_override_the_delete_leaves_the_grace_period_to_the_pod() -> None:
    kube, evictor, _ = setup(pod("u1", "5"), pod("u1", "5"))
    evictor.grace_seconds = None

    evictor.evict("ns/victim", "preempted by ns/high")

    assert kube.sent[-1] == ("DELETE", POD, {"apiVersion": "v1", "kind": "DeleteOptions",
                                             "preconditions": {"uid": "u1"}})


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def noticed(notice: float = 20.0) -> tuple[FakePods, Evictor, Clock]:
    kube, evictor, _ = setup(pod("u1", "5"), pod("u1", "5"))
    clock = Clock(1_000_000.0)
    evictor.clock = clock
    evictor.evict("ns/victim", "preempted by ns/high", CAUSE, notice)
    return kube, evictor, clock


def wait(futures: list[Any]) -> None:
    for future in futures:
        future.result(timeout=10)


def test_a_notice_annotates_the_victim_and_writes_the_condition_but_does_not_delete() -> None:
    kube, evictor, _ = noticed()

    assert kube.calls() == [("PATCH", POD), ("PATCH", STATUS)]
    annotate = kube.sent[0][2]
    assert annotate["metadata"]["uid"] == "u1" and annotate["metadata"]["resourceVersion"] == "5"
    assert annotate["metadata"]["annotations"][POD_NOTICE] == "1970-01-12T13:47:00Z"  # 1,000,020 s
    assert read_cause(annotate["metadata"]["annotations"][POD_CAUSE]) == (CAUSE, "ns/victim", "ns/low")
    assert kube.served is not None and kube.served["status"]["conditions"][0]["type"] == "DisruptionTarget"


def test_the_noticed_victim_is_deleted_once_its_deadline_passed_not_before() -> None:
    kube, evictor, clock = noticed()
    with kube.stores.lock:
        kube.stores.pods.objects["ns/victim"] = copy.deepcopy(kube.served)

    clock.now += 19
    wait(evictor.due())
    assert [m for m, _ in kube.calls()].count("DELETE") == 0
    clock.now += 1
    wait(evictor.due())
    assert kube.sent[-1] == ("DELETE", POD, {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 30,
                                             "preconditions": {"uid": "u1"}})
    assert [m for m, _ in kube.calls()].count("PATCH") == 2, "the condition given with the notice is not rewritten"


def test_a_restarted_scheduler_reads_the_deadline_from_the_pod() -> None:
    """The annotation is the state: a new evictor (a restart, or another leader) deletes what the old one noticed,
    when it is due, and nothing earlier."""
    kube, _, clock = noticed()
    assert kube.served is not None
    stores = Stores()
    stores.pods.objects["ns/victim"] = copy.deepcopy(kube.served)
    kube.stores = stores
    events = EventRecorder(kube, stores, lambda: 0.0, "test", threading.Event())  # type: ignore[arg-type]
    fresh = Evictor(kube, stores, ThreadPoolExecutor(1), events, lambda: True, None,  # type: ignore[arg-type]
                    clock=clock)
    sent = len(kube.sent)
    clock.now += 10
    wait(fresh.due())
    assert len(kube.sent) == sent
    clock.now += 10
    wait(fresh.due())
    assert kube.sent[-1] == ("DELETE", POD, {"apiVersion": "v1", "kind": "DeleteOptions",
                                             "preconditions": {"uid": "u1"}})


def test_a_noticed_pod_recreated_under_its_name_is_not_deleted() -> None:
    kube, evictor, clock = noticed()
    with kube.stores.lock:
        kube.stores.pods.objects["ns/victim"] = pod("u2", "9")
    kube.served = pod("u2", "9")
    clock.now += 60
    wait(evictor.due())
    assert "DELETE" not in [m for m, _ in kube.calls()]


def test_a_standby_deletes_nothing_and_reads_the_pods_again_once_it_leads() -> None:
    kube, evictor, clock = noticed()
    with kube.stores.lock:
        kube.stores.pods.objects["ns/victim"] = copy.deepcopy(kube.served)
    leading = False
    evictor.may_write = lambda: leading
    clock.now += 60
    assert evictor.due() == []
    leading = True
    wait(evictor.due())
    assert kube.calls()[-1] == ("DELETE", POD)


def test_an_unreadable_deadline_is_due_now_with_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    victim = pod("u1", "5")
    victim["metadata"]["annotations"][POD_NOTICE] = "next tuesday"
    kube, evictor, _ = setup(victim, victim)
    with caplog.at_level(logging.WARNING, "volcano_py.cache"):
        wait(evictor.due())
    assert kube.calls()[-1] == ("DELETE", POD)
    assert [r.getMessage() for r in caplog.records if "notice" in r.getMessage()] != []
    assert len(caplog.records) == 1


def test_a_notice_that_cannot_be_written_leaves_the_pod_alone(caplog: pytest.LogCaptureFixture) -> None:
    kube, evictor, _ = setup(pod("u1", "5"), pod("u1", "5"))
    kube.fail_patch = KubeError(403, "PATCH", POD, b'{"message": "forbidden"}')
    with caplog.at_level(logging.WARNING, "volcano_py.cache"):
        evictor.evict("ns/victim", "preempted by ns/high", CAUSE, 20.0)
    assert kube.calls() == [("PATCH", POD)]
    wait(evictor.due())
    assert "DELETE" not in [m for m, _ in kube.calls()]
    assert len(caplog.records) == 1


def test_a_due_delete_that_failed_is_sent_again_at_the_next_apply() -> None:
    kube, evictor, clock = noticed()
    with kube.stores.lock:
        kube.stores.pods.objects["ns/victim"] = copy.deepcopy(kube.served)
    kube.fail_delete = KubeError(503, "DELETE", POD, b'{"message": "unavailable"}')
    clock.now += 20
    wait(evictor.due())
    assert kube.served is not None, "the first delete failed"
    wait(evictor.due())
    assert kube.served is None and [m for m, _ in kube.calls()].count("DELETE") == 2
