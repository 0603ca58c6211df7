"""The scheduler runs each cycle with the cyclic garbage collector paused and collects between cycles."""

from __future__ import annotations

import gc
import weakref

from scheduler.cycle import collect_between_cycles, collector_paused


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


def test_reference_cycles_made_in_a_cycle_are_freed_between_cycles() -> None:
    with collector_paused():
        a, b = _Node(), _Node()
        a.other, b.other = b, a  # like a session and its plugins
        gone = weakref.ref(a)
        del a, b
        assert gone() is not None  # reference counting alone cannot free a cycle
    collect_between_cycles()
    assert gone() is None
