"""A HyperNode member's regexMatch pattern is compiled with RE2 (scheduler/api/member_pattern.py), the engine of
Go's regexp, which Volcano uses: linear time, so a pattern that would make Python's backtracking `re` run without
end (and keep the GIL, freezing the controllers or the scheduler) matches at once, and what Go refuses gives
nothing, as in Volcano."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from scheduler.api.field_parsers import BadValueError
from scheduler.api.field_readers import check_members
from scheduler.api.member_pattern import PatternError, compile_member_pattern
from scheduler.controllers.hypernode_count import counted
from scheduler.solver.topology import from_hypernodes

LONG = "a" * 253 + "!"  # a node name at its 253-character bound, which `(a+)+$` backtracks over without end


@pytest.mark.parametrize("pattern", [r"^(a+)+$", r"^(a|aa)*$", r"^(a*)*b", r"^(?:a{1,9})+$", r"a*a*a*a*a*b"])
def test_a_pattern_that_backtracks_in_re_matches_in_bounded_time(pattern: str) -> None:
    compiled = compile_member_pattern(pattern)
    started = time.perf_counter()
    assert compiled.search(LONG) is None
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize("pattern", [r"(?=a)a", r"(a)\1", r"a*+", r"(?>a+)", r"(?<!b)a", "\ud800", "x" * 1025])
def test_what_gos_regexp_refuses_is_refused_as_volcano_refuses_it(pattern: str) -> None:
    with pytest.raises(PatternError):
        compile_member_pattern(pattern)


@pytest.mark.parametrize("pattern", [r"^gpu-node-[0-9]+$", r"rack(1|2|3)-.*", r"^(cpu|gpu)-[a-z]+-[0-9]{1,4}$",
                                     r"node[0-9]", r"(?:ab)+"])
def test_the_patterns_hypernodes_use_compile_and_match_as_re_does(pattern: str) -> None:
    compiled = compile_member_pattern(pattern)
    for name in ("gpu-node-12", "rack2-x", "cpu-abc-99", "node7", "abab", "other"):
        assert bool(compiled.search(name)) == bool(re.search(pattern, name))


def test_a_refused_pattern_selects_nothing_in_the_node_count() -> None:
    members: list[dict[str, Any]] = [{"type": "Node", "selector": {"regexMatch": {"pattern": r"(?=a)a"}}},
                                     {"type": "Node", "selector": {"exactMatch": {"name": "x"}}}]
    h = counted({"metadata": {"name": "h"}, "spec": {"members": members}})
    assert h is not None
    assert h.count({"aa": {}}) == 1  # x only


def test_a_backtracking_pattern_counts_its_nodes_at_once() -> None:
    members: list[dict[str, Any]] = [{"type": "Node", "selector": {"regexMatch": {"pattern": r"^(a+)+$"}}}]
    h = counted({"metadata": {"name": "h"}, "spec": {"members": members}})
    assert h is not None
    started = time.perf_counter()
    assert h.count({LONG: {}, "aaaa": {}}) == 1
    assert time.perf_counter() - started < 1.0


def test_the_scheduler_reads_and_matches_such_a_pattern_in_bounded_time() -> None:
    """The scheduler's edge (field_readers.check_members) and its topology (solver.topology) use RE2 too."""
    members = check_members([{"type": "Node", "selector": {"regexMatch": {"pattern": r"^(a+)+$"}}}])
    hypernodes = [{"metadata": {"name": "rack"}, "spec": {"tier": 1, "members": members}}]
    started = time.perf_counter()
    topology = from_hypernodes([LONG, "aaaa"], hypernodes)
    assert time.perf_counter() - started < 1.0
    tier1 = topology.domain_names[1]
    assert tier1[int(topology.domain[1, 1])] == "rack"  # "aaaa" is in the rack
    assert tier1[int(topology.domain[1, 0])] != "rack"  # the long name is not
    with pytest.raises(BadValueError):
        check_members([{"type": "Node", "selector": {"regexMatch": {"pattern": r"(a)\1"}}}])
