"""Leader-election and partly-bound-gang rules with a fake clock and a fake apiserver (no control plane needed).

Unit tests (they were filed under tests/e2e, where everything is marked e2e, though no control plane runs): the
e2e suite holds the real Lease round trips. The fake Lease store keeps the one property that matters, optimistic
concurrency: a write carrying a stale resourceVersion gets 409 Conflict.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pytest

from scheduler.adapter.partial import give_up, overdue_partial_gangs
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.phases import PodGroupPhase, TaskStatus
from scheduler.api.resources import Resource
from scheduler.api.snapshot import CycleResult
from scheduler.cache.kube import KubeError
from scheduler.cache.leader import LeaderConfig, LeaderElector


class FakeKube:
    request_timeout = 5.0

    def __init__(self) -> None:
        self.lease: dict | None = None
        self.rv = 0
        self.down = False

    def request(self, method, path, *, body=None, timeout=None, **_):
        if self.down:
            raise OSError("connection refused")
        if method == "GET":
            if self.lease is None:
                raise KubeError(404, method, path, b'{"message": "not found"}')
            return copy.deepcopy(self.lease)
        if method == "POST" and self.lease is not None or method == "PUT" and (
            self.lease is None or body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]
        ):
            raise KubeError(409, method, path, b'{"message": "conflict"}')
        self.rv += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.lease)


@dataclass
class Clock:
    t: float = 1000.0

    def __call__(self) -> float:
        return self.t


CONFIG = LeaderConfig(namespace="ns", lease_duration=15, renew_deadline=10, retry_period=2)


def electors():
    kube, clock = FakeKube(), Clock()
    a = LeaderElector(kube, "a", CONFIG, monotonic=clock, wall=clock)  # type: ignore[arg-type]
    b = LeaderElector(kube, "b", CONFIG, monotonic=clock, wall=clock)  # type: ignore[arg-type]
    return kube, clock, a, b


def test_the_first_candidate_takes_the_free_lease_and_the_second_waits():
    kube, clock, a, b = electors()
    assert a.try_acquire_or_renew() and a.is_leader()
    assert not b.try_acquire_or_renew() and not b.is_leader()
    assert kube.lease["spec"]["holderIdentity"] == "a"
    assert kube.lease["spec"]["leaseTransitions"] == 0


def test_a_standby_takes_over_only_a_lease_duration_after_it_last_saw_a_change():
    kube, clock, a, b = electors()
    a.try_acquire_or_renew()
    b.try_acquire_or_renew()  # b observes a's record now
    clock.t += 14.9
    assert not b.try_acquire_or_renew()
    clock.t += 0.2
    assert b.try_acquire_or_renew() and b.is_leader()
    assert kube.lease["spec"]["holderIdentity"] == "b"
    assert kube.lease["spec"]["leaseTransitions"] == 1
    assert not a.is_leader(), "a stopped at its renew deadline, before b could take over"


def test_renewing_keeps_the_lease_and_the_standby_out():
    kube, clock, a, b = electors()
    a.try_acquire_or_renew()
    acquired = kube.lease["spec"]["acquireTime"]
    for _ in range(20):
        clock.t += 2
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew()
    assert kube.lease["spec"]["acquireTime"] == acquired
    assert kube.lease["spec"]["leaseTransitions"] == 0


def test_what_a_holder_publishes_rides_its_renewals_and_a_fault_in_it_costs_no_renewal():
    """Each acquire and renew carries the publisher's current value as the Lease's annotation (the shard summaries
    of cache/active.py), every reader sees the value last written, and a fault while working it out renews the
    Lease without it rather than not at all."""
    kube, clock, a, b = electors()
    values = iter(["one", "two"])
    a.publish = ("x.io/summary", lambda: next(values))
    b.publish = ("x.io/summary", lambda: "never written")
    assert a.try_acquire_or_renew()
    assert kube.lease["metadata"]["annotations"] == {"x.io/summary": "one"} and a.published == "one"
    clock.t += 2
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    assert b.published == "two"  # b read it; b holds nothing, so writes nothing

    def broken() -> str:
        raise RuntimeError("a summary that cannot be worked out")

    a.publish = ("x.io/summary", broken)
    clock.t += 2
    renewed = kube.lease["spec"]["renewTime"]
    assert a.try_acquire_or_renew() and kube.lease["spec"]["renewTime"] != renewed
    assert "annotations" not in kube.lease["metadata"]


def test_a_leader_that_cannot_renew_stops_at_the_renew_deadline():
    kube, clock, a, _ = electors()
    a.try_acquire_or_renew()
    kube.down = True
    clock.t += 9.9
    assert not a.try_acquire_or_renew() and a.is_leader()
    clock.t += 0.2
    assert not a.is_leader()


def test_of_two_candidates_with_the_same_read_only_one_wins():
    kube, clock, a, b = electors()
    c = LeaderElector(kube, "c", CONFIG, monotonic=clock, wall=clock)  # type: ignore[arg-type]
    a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew() and not c.try_acquire_or_renew()  # both observe a's record
    clock.t += 16  # a died: its lease expired for both
    expired = copy.deepcopy(kube.lease)
    real = kube.request

    def both_read_the_expired_lease(method, path, **kw):
        return copy.deepcopy(expired) if method == "GET" else real(method, path, **kw)

    kube.request = both_read_the_expired_lease  # type: ignore[method-assign]
    assert [b.try_acquire_or_renew(), c.try_acquire_or_renew()] == [True, False]
    assert kube.lease["spec"]["holderIdentity"] == "b"


def test_release_lets_a_standby_take_over_at_its_next_retry():
    kube, clock, a, b = electors()
    a.try_acquire_or_renew()
    a.stop(release=True)
    assert kube.lease["spec"]["holderIdentity"] == ""
    clock.t += 1.1
    b.try_acquire_or_renew()
    clock.t += 1.1
    assert b.try_acquire_or_renew()


def test_bad_durations_are_rejected():
    with pytest.raises(ValueError, match="renew deadline"):
        LeaderConfig(lease_duration=5, renew_deadline=10, retry_period=2)


# ---- partly bound gangs ------------------------------------------------------------------------------------
def gang(bound: int, size: int = 4, created: float = 100.0) -> JobInfo:
    job = JobInfo("ns/g", "g", "ns", "default", min_available=size, phase=PodGroupPhase.RUNNING)
    for i in range(size):
        status = TaskStatus.RUNNING if i < bound else TaskStatus.PENDING
        job.add_task(TaskInfo(f"ns/g-{i}", f"g-{i}", "ns", "ns/g", Resource.from_quantities({"cpu": "1"}),
                              status=status, node_name="n" if i < bound else "", creation=created))
    return job


@pytest.mark.parametrize(
    ("bound", "now", "overdue"),
    [(2, 159.0, False), (2, 161.0, True), (0, 1000.0, False), (4, 1000.0, False)],
    ids=["before the timeout", "after the timeout", "nothing bound", "whole"],
)
def test_a_partly_bound_gang_is_overdue_only_after_the_timeout(bound, now, overdue):
    job = gang(bound)
    found = overdue_partial_gangs([job], set(), now, 60.0, lambda _: 90.0)
    assert bool(found) == overdue


def test_giving_up_evicts_owned_pods_and_marks_a_bare_gang_unknown():
    job = gang(2)
    [partial] = overdue_partial_gangs([job], set(), 1000.0, 60.0, lambda _: None)
    result = CycleResult()
    give_up(result, [partial], {job.key: job}, lambda task: task == "ns/g-0", lambda _: True, 60.0)
    assert [e.task for e in result.evictions] == ["ns/g-0"]
    [status] = result.podgroups
    assert status.phase == PodGroupPhase.UNKNOWN
    assert [c.reason for c in status.conditions] == ["PartialGangTimeout"]
    assert {e.reason for e in result.events} == {"PartialGangTimeout"}


# ---- the fence: a bind never outlives the Lease (issue 22: a frozen leader) -----------------------------------


class RecordingKube:
    request_timeout = 30.0

    def __init__(self) -> None:
        self.sent: list[tuple[str, float | None]] = []

    def request(self, method, path, *, body=None, timeout=None, **_):
        self.sent.append((path, timeout))
        return {}


def binder_with(lease_left):
    from concurrent.futures import ThreadPoolExecutor

    from scheduler.cache.binder import Binder
    from scheduler.cache.store import Stores

    class NoEvents:
        def record(self, *_: object) -> None: ...

    kube = RecordingKube()
    binder = Binder(kube, Stores(), ThreadPoolExecutor(1), NoEvents(), lambda: True,  # type: ignore[arg-type]
                    lease_left=lease_left)
    return kube, binder


def test_the_lease_is_certainly_ours_for_a_lease_duration_after_our_last_renew():
    kube, clock, a, b = electors()
    assert a.valid_for() == 0.0  # holds nothing yet
    a.try_acquire_or_renew()
    clock.t += 4
    assert a.valid_for() == pytest.approx(11.0)
    kube.down = True  # a frozen or cut-off leader: no renew
    clock.t += 6.1  # past the renew deadline: not the leader, nothing is ours
    assert not a.is_leader() and a.valid_for() == 0.0


@pytest.mark.parametrize(("left", "sent_timeout"), [(None, 30.0), (20.0, 20.0), (4.5, 4.5), (0.9, None)])
def test_a_bind_is_sent_only_with_the_lease_left_and_never_waits_past_it(left, sent_timeout):
    kube, binder = binder_with(lambda: left)
    ok = binder.bind("ns/p", "n1", now=0.0)
    if sent_timeout is None:
        assert (ok, kube.sent) == (False, [])  # under a second left: not sent, the next leader binds it
    else:
        assert kube.sent == [("/api/v1/namespaces/ns/pods/p/binding", sent_timeout)]


def test_a_leaders_bindings_name_its_lease_and_itself_for_the_apiservers_fence():
    """manifests/07-bind-fence.yaml refuses a bind whose sender the named Lease no longer holds."""
    from scheduler.cache.leader import BOUND_BY_ANNOTATION, LEASE_ANNOTATION

    kube, clock, a, _ = electors()
    bodies: list[dict] = []
    _, binder = binder_with(lambda: 10.0)
    binder.kube.request = lambda method, path, *, body=None, timeout=None, **_: bodies.append(body) or {}
    binder.bind("ns/p", "n1", now=0.0)  # no leader election: a plain Binding
    binder.fence_annotations = a.fence_annotations()
    binder.bind("ns/q", "n1", now=0.0)
    assert "annotations" not in bodies[0]["metadata"]
    assert bodies[1]["metadata"]["annotations"] == {
        LEASE_ANNOTATION: f"{a.config.namespace}/{a.config.name}", BOUND_BY_ANNOTATION: a.identity}
