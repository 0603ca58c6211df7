"""A survivor takes a dead replica's shard when its Lease lapses as observed (client-go's rule, on the survivor's
clock), not up to a retry period later: the election round runs just after the next lapse it has observed
(cache/active.py `next_round_in`), never before it; and a take starts a cycle (`on_taken`)."""

from __future__ import annotations

import copy
import random

import pytest
from test_active_shards_cache import CONFIG, LEASES, Clock, Server, holders, replica

from scheduler.cache.active import LAPSE_MARGIN, ActiveShards


def settled_pair() -> tuple[Server, Clock, ActiveShards, ActiveShards]:
    """Two replicas a and b, after four rounds each: one shard each, renewed."""
    server, clock = Server(), Clock()
    a, b = replica(server, clock, "a"), replica(server, clock, "b")
    for _ in range(4):
        for r in (a, b):
            r.round()
            r.after_apply()
        clock.now += CONFIG.retry_period
    return server, clock, a, b


@pytest.mark.parametrize("seed", range(12))
def test_a_dead_replicas_shard_is_taken_just_after_its_lease_lapses_and_never_before(seed: int) -> None:
    rnd = random.Random(seed)
    server, clock, a, b = settled_pair()
    assert sorted(holders(server)) == ["a", "b"]
    taken: list[float] = []
    a.on_taken = lambda: taken.append(clock.now)
    # b renews once more at a random moment of a's round phase, then dies; a observes that renew at its next round
    clock.now += rnd.uniform(0.0, CONFIG.retry_period)
    b.round()
    died = clock.now
    clock.now += rnd.uniform(0.0, CONFIG.retry_period)
    a.round()
    observed = clock.now  # b's last renew, as a saw it change: b's Leases lapse CONFIG.lease_duration later
    lapse = observed + CONFIG.lease_duration
    while len(a.held()) < 2:
        clock.now += a.next_round_in()
        assert clock.now < died + 3 * CONFIG.lease_duration, "never taken"
        a.round()
        if len(a.held()) < 2:
            assert not taken
    assert holders(server) == ["a", "a"]
    assert lapse <= clock.now <= lapse + LAPSE_MARGIN + 1e-9  # with a round every retry period: up to lapse + 0.5
    assert taken == [clock.now]  # the loop was told at once


def test_with_nothing_about_to_lapse_the_round_waits_the_retry_period() -> None:
    server, clock, a, b = settled_pair()
    assert a.next_round_in() == CONFIG.retry_period  # b renews every round: its Leases never near their lapse
    clock.now += CONFIG.lease_duration + 1.0  # b silent; a has not looked: already lapsed as last observed
    assert a.next_round_in() == CONFIG.retry_period  # a lapse in the past never makes a busy loop


def _leases_of(server: Server, holder: str) -> list[dict[str, object]]:
    return [copy.deepcopy(o) for p, o in server.objects.items()
            if p.startswith(LEASES + "/") and o["spec"].get("holderIdentity") == holder]


@pytest.mark.parametrize("seed", range(20))
def test_leases_seen_through_the_watch_lapse_from_when_they_came_never_before_the_renew(seed: int) -> None:
    """b renews at random moments and dies; its Leases reach a through the watch after a random delay, some
    events late, repeated or out of order (an old event after a newer read). a takes b's shard no sooner than the
    lease duration after b's last renew (safety), and no later than the duration after that renew's event
    reached it, plus the margin (far sooner than a round every retry period could)."""
    rnd = random.Random(seed)
    server, clock, a, b = settled_pair()
    assert sorted(holders(server)) == ["a", "b"]
    inbox: list[tuple[float, dict[str, object]]] = []  # (when the watch delivers it, the Lease as written)
    old = _leases_of(server, "b")
    last_renew = delivered = clock.now
    for _ in range(rnd.randint(1, 4)):  # b's renews, each seen by the watch 0-0.3 s later
        clock.now += rnd.uniform(0.1, CONFIG.retry_period)
        b.round()
        last_renew = clock.now
        delay = rnd.uniform(0.0, 0.3)
        delivered = clock.now + delay
        inbox += [(delivered, lease) for lease in _leases_of(server, "b")]
    if rnd.random() < 0.5:  # an event from before the latest renew arrives after it
        inbox += [(delivered + rnd.uniform(0.0, 0.5), lease) for lease in old]
    inbox.sort(key=lambda e: e[0])
    latest = inbox[-1][0]  # the last event the watch delivers (an old one read after it is read again by a round)
    taken_at = None
    deadline = last_renew + 3 * CONFIG.lease_duration
    while clock.now < deadline:
        step = a.next_round_in()
        if inbox and inbox[0][0] <= clock.now + step:
            when, lease = inbox.pop(0)
            clock.now = max(clock.now, when)
            a.observe("MODIFIED", lease)
            continue
        clock.now += step
        a.round()
        if len(a.held()) == 2:
            taken_at = clock.now
            break
    assert taken_at is not None, "never taken"
    assert taken_at >= last_renew + CONFIG.lease_duration  # never before b's Leases lapsed
    # the lapse counted from that last event, or (an old one last) from the round after it that read the Lease
    bound = latest + CONFIG.lease_duration + LAPSE_MARGIN + (CONFIG.retry_period if latest > delivered else 0.0)
    assert taken_at <= bound + 1e-9


def test_a_replicas_own_renewals_seen_through_the_watch_never_make_a_busy_loop() -> None:
    """Every Lease write comes back through the watch, the replica's own renewals too: those (and the others'
    renewals) never wake the round early, so the rounds keep to the retry period; a Lease given up does."""
    server, clock = Server(), Clock()
    a, b = replica(server, clock, "a"), replica(server, clock, "b")
    write, sent = server.request, []

    def watched(method: str, path: str, **kw: object) -> object:  # the watch: each Lease write, sent on
        out = write(method, path, **kw)
        if method in ("PUT", "POST") and path.startswith(LEASES):
            sent.append(copy.deepcopy(out))
        return out

    server.request = watched  # type: ignore[method-assign]
    rounds, start = 0, clock.now
    while clock.now - start < 10.0:
        for r in (a, b):
            r.round()
            r.after_apply()
        for lease in sent:  # the watch's thread, once the writes returned
            for r in (a, b):
                r.observe("MODIFIED", lease)
        sent.clear()
        rounds += 1
        woken = a._wakeup.is_set() or b._wakeup.is_set()
        a._wakeup.clear()
        b._wakeup.clear()
        clock.now += 0.0 if woken else min(a.next_round_in(), b.next_round_in())
        assert rounds < 100, "a busy loop: every round's renewals woke the next one"
    assert rounds <= 10.0 / CONFIG.retry_period + 2
    assert sorted(holders(server)) == ["a", "b"]
    given_up = copy.deepcopy(server.objects[f"{LEASES}/sched-shard-{sorted(b.held())[0]}"])
    given_up["spec"]["holderIdentity"] = ""  # b released it (a clean stop)
    a.observe("MODIFIED", given_up)
    assert a._wakeup.is_set()


def test_a_hook_that_raises_costs_the_watch_nothing() -> None:
    """A Lease the hook cannot take (a bug, a hostile object) is stored all the same and the watch goes on."""
    from scheduler.cache.cluster_cache import ClusterCache
    from scheduler.cache.store import Watched

    cache = ClusterCache(None, {"volcano-py"}, "default")
    leases = Watched("Lease", "/apis/coordination.k8s.io/v1/namespaces/ns/leases")

    def hook(kind: str, obj: object) -> None:
        raise ValueError("hostile")

    leases.on_event = hook
    lease = {"metadata": {"name": "x", "namespace": "ns", "resourceVersion": "1"}, "spec": {"holderIdentity": []}}
    cache.watcher._on_event(leases, "ADDED", lease)
    assert set(leases.objects) == {"ns/x"}
