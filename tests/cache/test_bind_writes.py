"""What the scheduler writes around its binds, without a control plane: every bound pod gets its own `Scheduled`
event (and a pod whose bind failed none), an event the apiserver did not take for a passing reason is sent again,
and a gang whose binds all landed gets its PodGroup written once, Running, instead of Inqueue then Running.
tests/e2e/test_bind_writes_on_cluster.py checks the same on a real apiserver."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from scheduler.api.phases import PodGroupPhase
from scheduler.api.snapshot import CycleResult, GangBind
from scheduler.cache import events as events_module
from scheduler.cache.binder import Binder
from scheduler.cache.events import SEND_TRIES, EventRecorder
from scheduler.cache.kube import KubeError
from scheduler.cache.store import Stores
from scheduler.testing import cluster


class FakeKube:
    """Binds fail for the pods in `refuse`; event POSTs answer from `event_answers` (an exception, or None for
    success; success once the list is empty). Records every request."""

    request_timeout = 5.0

    def __init__(self, refuse: set[str] = frozenset(), event_answers: list[Exception | None] | None = None):  # type: ignore[assignment]
        self.refuse, self.event_answers = refuse, list(event_answers or [])
        self.sent: list[tuple[str, str, Any]] = []
        self.lock = threading.Lock()

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> dict[str, Any]:
        with self.lock:
            self.sent.append((method, path, body))
        if path.endswith("/binding") and path.split("/")[-2] in self.refuse:
            raise KubeError(409, method, path, b'{"message": "conflict"}')
        if path.endswith("/events") and self.event_answers:
            answer = self.event_answers.pop(0)
            if answer is not None:
                raise answer
        return {}


def pods(stores: Stores, names: list[str]) -> None:
    for name in names:
        stores.pods.objects[f"ns/{name}"] = {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
                                             "spec": {"schedulerName": "volcano-py"}}


def recorder(kube: FakeKube, stores: Stores, sleeps: list[float] | None = None) -> EventRecorder:
    return EventRecorder(kube, stores, lambda: 1_800_000_000.0, "i-1", threading.Event(),  # type: ignore[arg-type]
                         sleep=(sleeps if sleeps is not None else []).append)


def queued(events: EventRecorder) -> list[dict[str, Any]]:
    out = []
    while not events.queue.empty():
        item = events.queue.get_nowait()
        assert item is not None
        out.append(item[1])
    return out


def test_every_bound_pod_gets_its_own_scheduled_event_and_a_pod_whose_bind_failed_none():
    names = [f"g{g}-{i}" for g in range(3) for i in range(4)]
    stores, kube = Stores(), FakeKube(refuse={"g1-2"})
    pods(stores, names)
    events = recorder(kube, stores)
    binder = Binder(kube, stores, ThreadPoolExecutor(4), events, lambda: True)  # type: ignore[arg-type]
    result = CycleResult(binds=[GangBind(f"ns/g{g}", tuple((f"ns/g{g}-{i}", f"node-{i}") for i in range(4)))
                                for g in range(3)])
    failed = binder.wait(binder.submit(result, 1_800_000_000.0))
    assert failed == {"ns/g1": 1}
    sent = queued(events)
    assert sorted((e["involvedObject"]["name"], e["involvedObject"]["uid"], e["reason"], e["message"])
                  for e in sent) == sorted(
        (n, f"uid-{n}", "Scheduled", f"Successfully assigned ns/{n} to node-{n[-1]}") for n in names if n != "g1-2")


def test_an_event_not_taken_for_a_passing_reason_is_sent_again_until_it_lands():
    stores = Stores()
    pods(stores, ["p"])
    kube = FakeKube(event_answers=[KubeError(503, "POST", "/events", b"{}"), OSError("connection reset"), None])
    sleeps: list[float] = []
    events = recorder(kube, stores, sleeps)
    events.record("Pod", "ns/p", "Normal", "Scheduled", "Successfully assigned ns/p to n")
    events._send(queued(events)[0])
    posts = [body for _, path, body in kube.sent if path.endswith("/events")]
    assert len(posts) == 3 and all(b["reason"] == "Scheduled" for b in posts)
    assert sleeps == [1.0, 2.0]


def test_an_event_refused_for_good_is_not_sent_again_and_a_dead_apiserver_is_given_up_on():
    stores = Stores()
    pods(stores, ["p", "q"])
    kube = FakeKube(event_answers=[KubeError(422, "POST", "/events", b"{}")])
    events = recorder(kube, stores)
    events.record("Pod", "ns/p", "Normal", "Scheduled", "Successfully assigned ns/p to n")
    events._send(queued(events)[0])
    assert sum(1 for _, path, _ in kube.sent if path.endswith("/events")) == 1
    kube = FakeKube(event_answers=[OSError("refused")] * 10)
    events = recorder(kube, stores)
    events.record("Pod", "ns/q", "Normal", "Scheduled", "Successfully assigned ns/q to n")
    events._send(queued(events)[0])
    assert sum(1 for _, path, _ in kube.sent if path.endswith("/events")) == SEND_TRIES


def test_the_cycle_that_binds_a_gang_says_it_runs_once_its_binds_land():
    """Volcano's phase rule counts bound pods only, so the cycle that binds a gang leaves it Inqueue (its pods
    are not bound yet) and the next one makes it Running; the cycle's status carries the phase its binds give."""
    c = cluster().nodes("n", 2, gpu=4).job("train", replicas=3, gpu=1)
    first = c.cycle(start=False)
    [status] = [s for s in first.podgroups if s.job == "default/train"]
    assert sum(len(g.binds) for g in first.binds) == 3
    assert status.phase == PodGroupPhase.INQUEUE
    assert status.phase_when_bound == PodGroupPhase.RUNNING


def test_a_gang_the_cycle_does_not_bind_carries_no_phase_when_bound():
    c = cluster().nodes("n", 1, gpu=2).job("big", replicas=3, gpu=1)
    [status] = [s for s in c.cycle(start=False).podgroups if s.job == "default/big"]
    assert status.phase_when_bound is None and status.phase != PodGroupPhase.RUNNING


def test_a_retried_event_keeps_its_name_so_one_that_landed_unanswered_is_not_written_twice() -> None:
    """The first POST lands but its answer is lost (the apiserver restarted): the retry names the same event, so the
    apiserver refuses it as AlreadyExists (409) rather than making a second Scheduled event for the pod."""
    stores = Stores()
    pods(stores, ["p"])
    kube = FakeKube(event_answers=[OSError("connection reset after the write"),
                                   KubeError(409, "POST", "/events", b'{"reason": "AlreadyExists"}')])
    events = recorder(kube, stores)
    events.record("Pod", "ns/p", "Normal", "Scheduled", "Successfully assigned ns/p to n")
    events.record("Pod", "ns/p", "Normal", "Pulled", "another event of the same pod")
    first, second = queued(events)
    events._send(first)
    posts = [body for _, path, body in kube.sent if path.endswith("/events")]
    assert len(posts) == 2  # the 409 ends the retries: the event exists
    names = {b["metadata"]["name"] for b in posts}
    assert len(names) == 1 and "generateName" not in posts[0]["metadata"]
    assert names.pop().startswith("p.") and second["metadata"]["name"] != first["metadata"]["name"]


def test_a_pod_the_apiserver_said_is_gone_is_not_bound_again_but_its_replacement_is() -> None:
    """A bind answered 404 names a pod deleted meanwhile; a list fetched before the deletion may still show it (the
    first cycle on a partial view decodes its full list after its binds), and the next cycle must not send the
    same bind again. A new pod of the same name (another uid) is bound."""
    stores = Stores()
    pods(stores, ["g-0"])

    class Gone(FakeKube):
        def request(self, method: str, path: str, *, body: Any = None, **kw: Any) -> dict[str, Any]:
            if path.endswith("/binding") and (body or {}).get("metadata", {}).get("uid") == "uid-old":
                with self.lock:
                    self.sent.append((method, path, body))
                raise KubeError(404, method, path, b'{"reason": "NotFound"}')
            return super().request(method, path, body=body, **kw)

    kube = Gone()
    binder = Binder(kube, stores, ThreadPoolExecutor(2), recorder(kube, stores), lambda: True)  # type: ignore[arg-type]
    result = CycleResult(binds=[GangBind("ns/g", (("ns/g-0", "n1"),))])
    for _ in range(2):
        assert binder.wait(binder.submit(result, 1_800_000_000.0, lambda _: "uid-old")) == {"ns/g": 1}
    binds = [b for _, path, b in kube.sent if path.endswith("/binding")]
    assert [b["metadata"]["uid"] for b in binds] == ["uid-old"]  # sent once: the second cycle knew it was gone
    assert binder.wait(binder.submit(result, 1_800_000_000.0, lambda _: "uid-new")) == {}
    assert [b["metadata"]["uid"] for _, path, b in kube.sent if path.endswith("/binding")] == ["uid-old", "uid-new"]


def test_the_pods_remembered_as_gone_expire_after_the_ttl_and_never_exceed_the_limit(monkeypatch) -> None:
    """A burst of 404s (a namespace deleted under the binds) is remembered for GONE_TTL seconds, oldest dropped
    first, and never more than GONE_LIMIT of them, however many come within the TTL."""
    from scheduler.cache import binder as binder_module

    monkeypatch.setattr(binder_module, "GONE_LIMIT", 3)
    stores = Stores()
    kube = FakeKube()
    binder = Binder(kube, stores, ThreadPoolExecutor(1), recorder(kube, stores), lambda: True)  # type: ignore[arg-type]
    for i in range(5):  # five 404s within a second: only the last three are kept
        binder._forget_gone(f"ns/p-{i}", f"uid-{i}", 100.0 + i / 10)
    assert list(binder._gone) == [("ns/p-2", "uid-2"), ("ns/p-3", "uid-3"), ("ns/p-4", "uid-4")]
    binder._forget_gone("ns/p-2", "uid-2", 120.0)  # the same pod again: kept, now the newest
    assert list(binder._gone) == [("ns/p-3", "uid-3"), ("ns/p-4", "uid-4"), ("ns/p-2", "uid-2")]
    binder._forget_gone("ns/late", "uid-late", 100.4 + binder_module.GONE_TTL + 0.01)  # p-3's and p-4's TTL is over
    assert list(binder._gone) == [("ns/p-2", "uid-2"), ("ns/late", "uid-late")]


def test_a_stop_ends_the_wait_between_tries_and_no_further_try_is_sent() -> None:
    """Shutdown joins the event threads: one waiting to send an event again (1, 2, 4 s) ends its wait at the stop."""
    stores = Stores()
    pods(stores, ["p"])
    kube = FakeKube(event_answers=[OSError("refused")] * SEND_TRIES)
    stop = threading.Event()
    events = EventRecorder(kube, stores, lambda: 1_800_000_000.0, "i-1", stop)  # type: ignore[arg-type]
    events.record("Pod", "ns/p", "Normal", "Scheduled", "Successfully assigned ns/p to n")
    body = queued(events)[0]
    stopper = threading.Timer(0.1, stop.set)  # the stop comes while the first retry is awaited (1 s)
    stopper.start()
    began = time.monotonic()
    events._send(body)
    stopper.join()
    assert time.monotonic() - began < 0.9
    assert sum(1 for _, path, _ in kube.sent if path.endswith("/events")) == 1


class EventLog(FakeKube):
    """Records each event's reason as its POST arrives; `arrived` is notified."""

    def __init__(self) -> None:
        super().__init__()
        self.reasons: list[str] = []
        self.arrived = threading.Condition()

    def request(self, method: str, path: str, *, body: Any = None, **kw: Any) -> dict[str, Any]:
        out = super().request(method, path, body=body, **kw)
        if path.endswith("/events"):
            with self.arrived:
                self.reasons.append(body["reason"])
                self.arrived.notify_all()
        return out

    def wait_for(self, reasons: list[str], timeout: float = 10.0) -> bool:
        with self.arrived:
            return self.arrived.wait_for(lambda: self.reasons == reasons, timeout)


def sending_recorder(kube: EventLog, stores: Stores, stop: threading.Event) -> EventRecorder:
    """One sending thread, started: events go out in the order queued."""
    events = EventRecorder(kube, stores, lambda: 1_800_000_000.0, "i-1", stop, workers=1)  # type: ignore[arg-type]
    events.start()
    return events


def end(events: EventRecorder, stop: threading.Event) -> bool:
    """Stop the recorder as the cache's shutdown does; whether every sending thread ended."""
    stop.set()
    events.close()
    for thread in events.threads:
        thread.join(5.0)
    return not any(thread.is_alive() for thread in events.threads)


def test_an_event_waits_while_any_binds_are_out_so_a_burst_of_binds_goes_first(monkeypatch) -> None:
    """Binds go first: with two batches out (the pipelined apply), the first returning does not release an
    event (it waits out the defer); the second returning does, at once."""
    monkeypatch.setattr(events_module, "DEFER", 0.2)
    events = recorder(FakeKube(), Stores())
    events.binds_out()
    events.binds_out()
    events.binds_back()
    began = time.monotonic()
    events._after_binds(began)
    assert time.monotonic() - began >= 0.2  # held for the whole defer: a batch is still out
    events.binds_back()
    assert events.binds_pending() == 0
    began = time.monotonic()
    events._after_binds(began)
    assert time.monotonic() - began < 0.2  # none out: not held


def test_events_queued_during_binds_are_sent_once_they_return(monkeypatch) -> None:
    monkeypatch.setattr(events_module, "DEFER", 60.0)  # (only binds returning release an event here)
    stores, stop = Stores(), threading.Event()
    pods(stores, ["p", "q"])
    kube = EventLog()
    events = sending_recorder(kube, stores, stop)
    try:
        events.binds_out()
        events.record("Pod", "ns/p", "Normal", "First", "queued while binds are out")
        events.record("Pod", "ns/q", "Normal", "Second", "queued while binds are out")
        events.binds_back()
        assert kube.wait_for(["First", "Second"])
    finally:
        end(events, stop)


def test_under_a_stream_of_binds_that_never_pauses_events_wait_no_longer_than_the_defer(monkeypatch) -> None:
    """A steady stream of cycles that bind always has binds out: events must not wait for the stream to pause (at
    120% of kube-scheduler's rate two thirds of the `Scheduled` events were still queued when the churn run
    ended). The defer counts from when each was queued, so twenty events queued together go together once it is
    over, not one defer after another. Queued with no binds out, an event goes at once."""
    monkeypatch.setattr(events_module, "DEFER", 0.2)
    names = [f"p{i}" for i in range(20)]
    stores, stop = Stores(), threading.Event()
    pods(stores, ["quiet", *names])
    kube = EventLog()
    events = sending_recorder(kube, stores, stop)
    try:
        events.record("Pod", "ns/quiet", "Normal", "Quiet", "no binds out")
        assert kube.wait_for(["Quiet"])
        events.binds_out()  # never returns
        queued = time.monotonic()
        for name in names:
            events.record("Pod", f"ns/{name}", "Normal", "Held", f"binds always out ({name})")
        assert kube.wait_for(["Quiet"] + ["Held"] * 20)
        waited = time.monotonic() - queued
        assert 0.2 <= waited < 2.0  # the defer, once (twenty in a row would be 4 s)
        assert events.binds_pending() == 1
    finally:
        end(events, stop)


def test_a_stop_ends_an_events_wait_for_binds_and_it_is_not_sent(monkeypatch) -> None:
    monkeypatch.setattr(events_module, "DEFER", 60.0)
    stores, stop = Stores(), threading.Event()
    pods(stores, ["p"])
    kube = EventLog()
    events = sending_recorder(kube, stores, stop)
    events.binds_out()
    events.record("Pod", "ns/p", "Normal", "Held", "its binds never return")
    assert end(events, stop)
    assert kube.reasons == []


def test_the_surge_threads_send_while_the_backlog_is_above_its_bound_and_leave_the_rest_to_the_two(
        monkeypatch) -> None:
    """Events outrunning the two sending threads (a stream of binds on a loaded apiserver) must not pile up
    without end: above SURGE_BACKLOG waiting, more threads send; at or below it they leave the queue alone. The
    surge thread's longest sleep is an hour here: what wakes it is the backlog `record` signals, not a poll."""
    monkeypatch.setattr(events_module, "SURGE_BACKLOG", 3)
    monkeypatch.setattr(events_module, "SURGE_IDLE", 3600.0)
    stores, stop = Stores(), threading.Event()
    names = [f"p{i}" for i in range(7)]
    pods(stores, names)
    kube = EventLog()
    events = EventRecorder(kube, stores, lambda: 1_800_000_000.0, "i-1", stop,  # type: ignore[arg-type]
                           workers=0, surge=1)  # the surge thread alone: what it sends is what it decided to
    for name in names[:6]:
        events.record("Pod", f"ns/{name}", "Normal", "Scheduled", f"Successfully assigned ns/{name} to n")
    events.start()
    try:
        assert kube.wait_for(["Scheduled"] * 3)
        assert events.queue.qsize() == 3  # down to the bound, not below
        events.record("Pod", "ns/p6", "Normal", "Scheduled", "Successfully assigned ns/p6 to n")
        assert kube.wait_for(["Scheduled"] * 4)  # above it again: one more
        assert events.queue.qsize() == 3
    finally:
        assert end(events, stop)


class SleepsSeen(threading.Event):
    """The surge signal, counting the threads asleep on it (and for how long each asked to sleep)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = threading.Condition()
        self.asleep: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        with self.seen:
            self.asleep.append(timeout)
            self.seen.notify_all()
        try:
            return super().wait(timeout)
        finally:
            with self.seen:
                self.asleep.remove(timeout)

    def until_asleep(self, count: int) -> list[float | None]:
        with self.seen:
            assert self.seen.wait_for(lambda: len(self.asleep) == count, timeout=10.0)
            return list(self.asleep)


def test_idle_surge_threads_sleep_until_a_backlog_and_a_close_ends_them_at_once(monkeypatch) -> None:
    """Six surge threads idle for most of the scheduler's life: each sleeps on the signal `record` gives when
    the backlog passes its bound (once they looked every 0.25 s, 24 wake-ups a second in all); a close wakes and
    ends them, though their longest sleep is an hour here."""
    monkeypatch.setattr(events_module, "SURGE_BACKLOG", 2)
    monkeypatch.setattr(events_module, "SURGE_IDLE", 3600.0)
    stores, stop = Stores(), threading.Event()
    pods(stores, ["a", "b", "c"])
    kube = EventLog()
    events = EventRecorder(kube, stores, lambda: 1_800_000_000.0, "i-1", stop,  # type: ignore[arg-type]
                           workers=0, surge=6)
    events._surge = signal = SleepsSeen()
    events.start()
    try:
        assert signal.until_asleep(6) == [3600.0] * 6  # all six asleep on the signal, none polling
        for name in "ab":
            events.record("Pod", f"ns/{name}", "Normal", "Scheduled", f"Successfully assigned ns/{name} to n")
        assert events.queue.qsize() == 2 and kube.reasons == []  # at the bound: left to the two sending threads
        events.record("Pod", "ns/c", "Normal", "Scheduled", "Successfully assigned ns/c to n")  # above it
        assert kube.wait_for(["Scheduled"])  # woken: one sent, down to the bound
        assert signal.until_asleep(6) == [3600.0] * 6 and events.queue.qsize() == 2
    finally:
        started = time.monotonic()
        assert end(events, stop)
    assert time.monotonic() - started < 5.0


class Faulty(EventLog):
    """Fails the first event it is sent with an error no transport raises (a body the client cannot encode)."""

    def request(self, method: str, path: str, *, body: Any = None, **kw: Any) -> dict[str, Any]:
        if path.endswith("/events") and body["reason"] == "Bad":
            raise TypeError("Object of type set is not JSON serializable")
        return super().request(method, path, body=body, **kw)


def test_an_event_that_fails_for_an_unexpected_reason_costs_that_event_alone() -> None:
    """One sending thread: were it to die on the bad event, no other event would ever be sent."""
    stores, stop = Stores(), threading.Event()
    pods(stores, ["bad", "good"])
    kube = Faulty()
    events = sending_recorder(kube, stores, stop)
    try:
        events.record("Pod", "ns/bad", "Normal", "Bad", "cannot be sent")
        events.record("Pod", "ns/good", "Normal", "Good", "sent all the same")
        assert kube.wait_for(["Good"])
        assert all(thread.is_alive() for thread in events.threads)
    finally:
        assert end(events, stop)


def test_events_beyond_the_queue_limit_are_dropped_with_one_line_and_recorded_again_once_there_is_room(
        caplog: pytest.LogCaptureFixture) -> None:
    """An apiserver that takes no events for long: the queue stops at its limit instead of growing with every
    cycle; what was dropped is said once, and an event recorded again later (a pod still unschedulable) is queued
    once the queue has room."""
    stores = Stores()
    pods(stores, [f"p{i}" for i in range(8)])
    events = recorder(FakeKube(), stores)
    events.queue_limit = 5
    with caplog.at_level(logging.WARNING, logger="volcano_py.cache"):
        for i in range(8):
            events.record("Pod", f"ns/p{i}", "Warning", "Unschedulable", "no node fits")
    assert events.queue.qsize() == 5
    assert events.dropped == 3
    said = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("events dropped: 1 since the last line (1 in all)")
    assert [b["involvedObject"]["name"] for b in queued(events)] == [f"p{i}" for i in range(5)]
    events.record("Pod", "ns/p7", "Warning", "Unschedulable", "no node fits")  # the next cycle says it again
    events.record("Pod", "ns/p0", "Warning", "Unschedulable", "no node fits")  # sent already: once
    assert [b["involvedObject"]["name"] for b in queued(events)] == ["p7"]
