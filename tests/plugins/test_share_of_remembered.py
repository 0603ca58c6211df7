"""A job's dominant share is worked out once per (held, deserved) pair: thousands of jobs of a few shapes, against
a cluster total that rarely changes, ask the same question every cycle. The answer is the one worked out anew."""

from __future__ import annotations

from fractions import Fraction

from scheduler.api.resources import Resource
from scheduler.plugins.shares import share_of


def test_the_same_question_is_answered_from_memory_with_the_same_answer() -> None:
    held = Resource.from_quantities({"cpu": "3", "memory": "8Gi", "nvidia.com/gpu": "2"})
    total = Resource.from_quantities({"cpu": "96", "memory": "64Gi", "nvidia.com/gpu": "8"})
    first = share_of(held, total)
    hits = share_of.cache_info().hits
    again = share_of(Resource.from_quantities({"cpu": "3", "memory": "8Gi", "nvidia.com/gpu": "2"}),
                     Resource.from_quantities({"cpu": "96", "memory": "64Gi", "nvidia.com/gpu": "8"}))
    assert first == again == Fraction(1, 4)  # the GPUs dominate: 2 of 8
    assert share_of.cache_info().hits == hits + 1
