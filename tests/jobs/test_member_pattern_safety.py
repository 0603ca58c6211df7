"""A HyperNode member's regexMatch pattern is compiled only where Python's backtracking `re` matches it in
bounded time (scheduler/api/member_pattern.py); Go's RE2, which Volcano uses, is linear, and `re` keeps the GIL
while it runs, so one catastrophic pattern would freeze the controllers."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from scheduler.api.member_pattern import PatternError, compile_member_pattern
from scheduler.controllers.hypernode_count import counted


@pytest.mark.parametrize("pattern", [r"^(a+)+$", r"^(a|aa)*$", r"^(a*)*b", r"^(?:a{1,9})+$"])
def test_an_exponential_pattern_is_refused(pattern: str) -> None:
    with pytest.raises(PatternError, match="repeats a"):
        compile_member_pattern(pattern)


@pytest.mark.parametrize("pattern", [r"(?=a)a", r"(a)\1", r"a*+", r"(?>a+)", r"(?<!b)a"])
def test_what_gos_regexp_lacks_is_refused_as_volcano_refuses_it(pattern: str) -> None:
    with pytest.raises(PatternError, match="Go's regexp"):
        compile_member_pattern(pattern)


def test_adjacent_repeats_beyond_the_bound_are_refused() -> None:
    assert compile_member_pattern(r"a*a*a*b")
    with pytest.raises(PatternError, match="repeats"):
        compile_member_pattern(r"a*a*a*a*b")


@pytest.mark.parametrize("pattern", [r"^gpu-node-[0-9]+$", r"rack(1|2|3)-.*", r"^(cpu|gpu)-[a-z]+-[0-9]{1,4}$",
                                     r"node[0-9]", r"(?:ab)+"])
def test_the_patterns_hypernodes_use_compile_and_match_as_re_does(pattern: str) -> None:
    compiled = compile_member_pattern(pattern)
    for name in ("gpu-node-12", "rack2-x", "cpu-abc-99", "node7", "abab", "other"):
        assert bool(compiled.search(name)) == bool(re.search(pattern, name))


def test_a_refused_pattern_selects_nothing_in_the_node_count_and_costs_no_time() -> None:
    members: list[dict[str, Any]] = [{"type": "Node", "selector": {"regexMatch": {"pattern": r"(a+)+$"}}},
                                     {"type": "Node", "selector": {"exactMatch": {"name": "x"}}}]
    h = counted({"metadata": {"name": "h"}, "spec": {"members": members}})
    assert h is not None
    started = time.perf_counter()
    assert h.count({"a" * 253 + "!": {}}) == 1  # x only; without the guard this never returns
    assert time.perf_counter() - started < 1.0
