"""The apiserver's clock from its Date headers (`scheduler/cache/clock.py`): the estimate is within the round
trip of the true offset whatever the offset, follows a stepped local clock, and ignores what is not a date."""

from __future__ import annotations

import logging
import math
import random
from email.utils import formatdate

import pytest
from hypothesis import example, given, settings, strategies as st

from scheduler.cache.clock import ApiClock, read_date


def answers(clock: ApiClock, offset: float, rtt: float, rng: random.Random, n: int, start: float) -> float:
    """`n` answers one to two seconds apart, from a server whose clock is `offset` ahead of the local one;
    returns the local time after the last."""
    local = start
    for _ in range(n):
        local += 1.0 + rng.random()
        sent = local
        made = sent + rng.random() * rtt  # the server's moment, in local time
        received = sent + rtt
        clock.observe(formatdate(math.floor(made + offset), usegmt=True), sent, received)
    return local


@settings(max_examples=200, deadline=None)
@given(offset=st.floats(-3600.0, 3600.0), rtt=st.floats(0.0, 0.2), seed=st.integers(0, 2**32 - 1))
@example(offset=0.0, rtt=0.0, seed=46827)  # 0.116 s off with 40 answers: within what they allow, not within 0.1
def test_the_estimate_is_within_what_the_answers_allow(offset: float, rtt: float, seed: int) -> None:
    """Each answer says the server's second D was read between send and receipt; the true offset lies in every
    answer's interval, and the estimate is no further from it than half their intersection (how narrow that is
    depends on where the answers fell within their seconds: 40 of them can leave it 0.2 s wide by chance)."""
    clock = ApiClock(lambda: 0.0)
    rng, local = random.Random(seed), 1_700_000_000.0
    lo, hi = -math.inf, math.inf
    for _ in range(40):
        local += 1.0 + rng.random()
        sent, made = local, local + rng.random() * rtt
        second = math.floor(made + offset)
        clock.observe(formatdate(second, usegmt=True), sent, sent + rtt)
        lo, hi = max(lo, second - (sent + rtt)), min(hi, second + 1.0 - sent)
    assert lo - 1e-6 <= offset <= hi + 1e-6
    assert abs(clock.offset - offset) <= (hi - lo) / 2 + 1e-6, (clock.offset, offset, lo, hi)


def test_the_estimate_is_within_the_round_trip_on_a_typical_run() -> None:
    for seed in range(20):  # seeded: with 40 answers the intersection is nearly always this narrow
        clock = ApiClock(lambda: 0.0)
        answers(clock, 123.4, 0.05, random.Random(seed), 40, 1_700_000_000.0)
        assert abs(clock.offset - 123.4) <= 0.05 + 0.1, (seed, clock.offset)


def test_a_stepped_local_clock_is_followed() -> None:
    rng = random.Random(7)
    clock = ApiClock(lambda: 0.0)
    local = answers(clock, 60.0, 0.01, rng, 30, 1_700_000_000.0)
    assert abs(clock.offset - 60.0) < 0.2
    answers(clock, -60.0, 0.01, rng, 3, local)  # the local clock was stepped 120 s forward
    assert abs(clock.offset + 60.0) < 1.1


def test_answers_more_often_than_every_second_are_not_read() -> None:
    clock = ApiClock(lambda: 0.0)
    clock.observe(formatdate(1_700_000_100, usegmt=True), 1_700_000_000.0, 1_700_000_000.1)
    first = clock.offset
    clock.observe(formatdate(1_700_000_500, usegmt=True), 1_700_000_000.2, 1_700_000_000.3)
    assert clock.offset == first


@pytest.mark.parametrize("date", ["", "yesterday", "1e999", "Thu, 99 Foo 2026 00:00:00 GMT", "x" * 1_000_000,
                                  formatdate(0, usegmt=True)])
def test_what_is_not_the_apiservers_date_is_ignored_with_one_line(date: str, caplog: pytest.LogCaptureFixture) -> None:
    clock = ApiClock(lambda: 1_700_000_000.0)
    with caplog.at_level(logging.WARNING, logger="volcano_py.cache"):
        for i in range(3):
            clock.observe(date, 1_700_000_000.0 + 2 * i, 1_700_000_000.0 + 2 * i)
    assert clock.offset == 0.0
    assert clock.now() == 1_700_000_000.0
    assert len(caplog.records) == 1


def test_read_date_reads_go_http_dates() -> None:
    assert read_date("Thu, 03 Dec 2026 06:31:00 GMT") == 1796279460.0
    assert read_date("not a date") is None
