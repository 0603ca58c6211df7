"""The scheduler runs each cycle with the cyclic garbage collector paused, frees the cycle's reference cycles on the
way out and freezes what is left, and passes over everything frozen once every FULL_PASS_EVERY seconds."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from scheduler.cycle import FULL_PASS_EVERY, collect_between_cycles, collector_paused


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()  # what these tests froze goes back to the collector of the test process


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_collector_is_off_inside_a_cycle_and_back_on_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_collector_stays_off_after_a_cycle_if_it_was_off_before() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_collector_comes_back_when_the_cycle_raises() -> None:
    try:
        with collector_paused():
            raise RuntimeError("a bug in one cycle")
    except RuntimeError:
        pass
    assert gc.isenabled()


def test_reference_cycles_made_in_a_cycle_are_freed_as_it_ends() -> None:
    with collector_paused():
        a, b = _Node(), _Node()
        a.other, b.other = b, a  # like a session and its plugins
        gone = weakref.ref(a)
        del a, b
        assert gone() is not None  # reference counting alone cannot free a cycle
    assert gone() is None


def test_what_outlives_a_cycle_is_frozen_and_a_periodic_full_pass_frees_cycles_among_it() -> None:
    gc.unfreeze()
    with collector_paused():
        kept = _Node()
        kept.other = _Node()
        kept.other.other = kept  # a reference cycle still in use as the cycle ends (the next snapshot's, say)
    assert gc.get_freeze_count() > 0
    gone = weakref.ref(kept)
    del kept
    gc.collect()  # frozen: the collector does not see it
    assert gone() is not None
    start = 1e9
    assert collect_between_cycles(now=lambda: start) >= 2  # the first call at this clock: the period has passed
    assert gone() is None
    again = weakref.ref(_cycle_frozen())
    assert collect_between_cycles(now=lambda: start + FULL_PASS_EVERY - 1) == 0  # not yet
    assert again() is not None
    assert collect_between_cycles(now=lambda: start + FULL_PASS_EVERY) >= 2
    assert again() is None


def _cycle_frozen() -> _Node:
    """A reference cycle, frozen by a cycle's end, then dropped: returned only for a weak reference to it."""
    with collector_paused():
        node = _Node()
        node.other = _Node()
        node.other.other = node
    return node
