"""A survivor takes a dead replica's shard when its Lease lapses as observed (client-go's rule, on the survivor's
clock), not up to a retry period later: the election round runs just after the next lapse it has observed
(cache/active.py `next_round_in`), never before it; and a take starts a cycle (`on_taken`)."""

from __future__ import annotations

import random

import pytest
from test_active_shards_cache import CONFIG, Clock, Server, holders, replica

from scheduler.cache.active import LAPSE_MARGIN


@pytest.mark.parametrize("seed", range(12))
def test_a_dead_replicas_shard_is_taken_just_after_its_lease_lapses_and_never_before(seed: int) -> None:
    rnd = random.Random(seed)
    server, clock = Server(), Clock()
    a, b = replica(server, clock, "a"), replica(server, clock, "b")
    for _ in range(4):  # settle: one shard each
        for r in (a, b):
            r.round()
            r.after_apply()
        clock.now += CONFIG.retry_period
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
    server, clock = Server(), Clock()
    a, b = replica(server, clock, "a"), replica(server, clock, "b")
    for _ in range(4):
        for r in (a, b):
            r.round()
            r.after_apply()
        clock.now += CONFIG.retry_period
    assert a.next_round_in() == CONFIG.retry_period  # b renews every round: its Leases never near their lapse
    clock.now += CONFIG.lease_duration + 1.0  # b silent; a has not looked: already lapsed as last observed
    assert a.next_round_in() == CONFIG.retry_period  # a lapse in the past never makes a busy loop
