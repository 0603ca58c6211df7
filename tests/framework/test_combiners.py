"""Every combiner of `scheduler/framework/combine.py`, each held to a table of tier rules.

The answers in the tables are the rules the combiners' docstrings (and Volcano's session_plugins.go, for the ones
that follow it) state, written out by hand: tiers of stub functions that each return a fixed answer."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pytest

from scheduler.api import reasons as R
from scheduler.api.decision import ABSTAIN, SUCCESS, Status, unschedulable
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.node import NodeInfo
from scheduler.api.resources import Resource
from scheduler.framework import combine as C, points as P
from scheduler.framework.arrays import NodeArrays
from scheduler.framework.evictable import Domain, EvictionContext, EvictionKind

JOB = JobInfo("default/j", "j", "default", "default")
TASKS = [TaskInfo(f"t{i}", f"t{i}", "default", "default/j", Resource.of(1000)) for i in range(4)]
NODES = [NodeInfo(f"n{i}", Resource.of(4000, 8 << 30)) for i in range(3)]
NO = unschedulable(R.NodeFilter(R.NODE_AFFINITY))
NO2 = unschedulable(R.NodeFilter(R.NODE_PORTS))


def const(value: object) -> Callable[..., object]:
    return lambda *_args: value


def tiers_of(answers: Sequence[Sequence[object]]) -> list[list[Callable[..., object]]]:
    return [[const(a) for a in tier] for tier in answers]


@dataclass(frozen=True)
class Case:
    name: str
    answers: tuple[tuple[object, ...], ...]
    expected: object


ORDERINGS = [
    Case("no function: no opinion", (), 0),
    Case("the first plugin with an opinion decides", ((0, -1), (1,)), -1),
    Case("no opinion anywhere is 0", ((0,), (0,)), 0),
    Case("a later tier decides when earlier ones have no opinion", ((0,), (0, 1)), 1),
]
ALL_PASS = [
    Case("none registered passes", (), True),
    Case("every one passes", ((True, True), (True,)), True),
    Case("one failing in a later tier fails", ((True,), (False,)), False),
]
ANY_TRUE = [
    Case("none registered: false", (), False),
    Case("one true in any tier", ((False,), (False, True)), True),
    Case("all false", ((False, False),), False),
]
FIRST_REJECTION = [
    Case("none registered: success", (), SUCCESS),
    Case("abstentions are no answer", ((ABSTAIN, ABSTAIN),), SUCCESS),
    Case("the first rejection wins, across tiers", ((ABSTAIN, SUCCESS), (NO, NO2)), NO),
]
STARVING = [
    Case("no tier with a function: not starving", ((),), False),
    Case("the first tier with a function decides, all of it must agree", ((), (True, False), (True,)), False),
    Case("all agree in the first tier with functions", ((True, True), (False,)), True),
]
VOTES = [
    Case("no opinion permits", ((),), SUCCESS),
    Case("a reject in the same tier as a permit rejects", ((SUCCESS, NO),), NO),
    Case("a reject in a later tier rejects when no tier permitted before", ((ABSTAIN,), (NO,)), NO),
    Case("abstentions permit", ((ABSTAIN, ABSTAIN),), SUCCESS),
    Case("a tier that permits decides before a later tier is asked", ((SUCCESS,), (NO,)), SUCCESS),
]


@pytest.mark.parametrize("case", ORDERINGS, ids=lambda c: c.name)
def test_first_nonzero(case: Case) -> None:
    assert C.first_nonzero(tiers_of(case.answers), JOB, JOB) == case.expected


@pytest.mark.parametrize("case", ALL_PASS, ids=lambda c: c.name)
def test_all_pass(case: Case) -> None:
    assert C.all_pass(tiers_of(case.answers), JOB) is case.expected


@pytest.mark.parametrize("case", ANY_TRUE, ids=lambda c: c.name)
def test_any_true(case: Case) -> None:
    assert C.any_true(tiers_of(case.answers), JOB) is case.expected


@pytest.mark.parametrize("case", FIRST_REJECTION, ids=lambda c: c.name)
def test_first_rejection(case: Case) -> None:
    assert C.first_rejection(tiers_of(case.answers), JOB) is case.expected


@pytest.mark.parametrize("case", STARVING, ids=lambda c: c.name)
def test_first_tier_all(case: Case) -> None:
    assert C.first_tier_all(tiers_of(case.answers), JOB) is case.expected  # type: ignore[arg-type]


@pytest.mark.parametrize("case", VOTES, ids=lambda c: c.name)
def test_votes(case: Case) -> None:
    assert C.votes(tiers_of(case.answers), JOB) is case.expected  # type: ignore[arg-type]


def test_sum_scores_adds_every_function_and_none_is_zeros() -> None:
    arrays = NodeArrays(NODES)
    indices = np.arange(3, dtype=np.int64)
    scores = [const(np.array([1.0, 2.0, 3.0])), const(np.array([10.0, 0.0, -np.inf]))]
    total = C.sum_score_arrays([[scores[0]], [scores[1]]], TASKS[0], arrays, indices)  # type: ignore[list-item]
    assert total.tolist() == [11.0, 2.0, -np.inf]
    assert C.sum_score_arrays([], TASKS[0], arrays, indices).tolist() == [0.0, 0.0, 0.0]
    lists = [[const([1.0, 2.0, 3.0])], [const([0.5, 0.5, 0.5])]]
    assert C.sum_node_lists(lists, TASKS[0], NODES) == [1.5, 2.5, 3.5]  # type: ignore[arg-type]


@pytest.mark.parametrize(("answers", "expected"), [
    ((([SUCCESS, NO, SUCCESS],),), [SUCCESS, NO, SUCCESS]),  # one function: its answer as it is
    ((([SUCCESS, NO, ABSTAIN],), ([NO2, NO2, SUCCESS],)), [NO2, NO, SUCCESS]),  # the first rejection per node
    ((([ABSTAIN, SUCCESS, SUCCESS], [SUCCESS, NO2, SUCCESS]),), [SUCCESS, NO2, SUCCESS]),  # ABSTAIN lets through
], ids=["one function", "first rejection per node across tiers", "abstain lets the node through"])
def test_rejections_per_node(answers: tuple[tuple[list[Status], ...], ...], expected: list[Status]) -> None:
    result = C.rejections_per_node(tiers_of(answers), TASKS[0], NODES)  # type: ignore[arg-type]
    assert [s.code for s in result] == [s.code for s in expected]
    assert [s.reasons for s in result] == [s.reasons for s in expected]


def test_first_placement_takes_the_first_placer_that_does_not_abstain() -> None:
    stuck = P.GangAnswer(unschedulable(R.TopologyNoFit(1)))
    assert C.first_placement([], JOB, TASKS) is P.PLACE_BY_POD
    assert C.first_placement([[const(P.PLACE_BY_POD)]], JOB, TASKS) is P.PLACE_BY_POD  # type: ignore[list-item]
    placers = [[const(P.PLACE_BY_POD)], [const(stuck), const(P.PLACE_BY_POD)]]
    assert C.first_placement(placers, JOB, TASKS) is stuck  # type: ignore[arg-type]


def keep(*indices: int) -> Callable[..., list[TaskInfo]]:
    """A victim function that keeps the candidates at these positions of TASKS, whatever order it is asked in."""
    def fn(*args: object) -> list[TaskInfo]:
        candidates = next(a for a in args if isinstance(a, list))
        return [t for t in candidates if int(t.key[1:]) in indices]
    return fn


def uids(tasks: Sequence[TaskInfo]) -> list[str]:
    return [t.key for t in tasks]


@pytest.mark.parametrize(("tiers", "expected"), [
    ([[keep(0, 1, 2), keep(1, 2, 3)]], ["t1", "t2"]),  # a tier's answer: what every plugin in it agrees on
    ([[keep(), keep(0)], [keep(3)]], ["t3"]),  # a plugin offering none ends its tier without an answer
    ([[keep(0), keep(1)], [keep(2)]], ["t2"]),  # so does an empty agreement
    ([[keep(0)], [keep(1)]], ["t0"]),  # the first tier with victims wins
    ([[keep()], [keep()]], []),  # no tier with victims: none
], ids=["agreement", "none offered ends the tier", "empty agreement ends the tier", "first tier wins", "none"])
def test_tier_victims(tiers: list[list[Callable[..., list[TaskInfo]]]], expected: list[str]) -> None:
    assert uids(C.tier_victims(tiers, TASKS[0], list(TASKS))) == expected


def test_every_filter_composes_every_guard_in_every_tier() -> None:
    guards = [[keep(0, 1, 2)], [keep(1, 2, 3), keep(2, 3)]]
    assert uids(C.every_filter(guards, list(TASKS), TASKS[0])) == ["t2"]
    assert uids(C.every_filter([], list(TASKS), TASKS[0])) == uids(TASKS)  # no guard keeps everything


def test_chain_filters_feeds_each_filter_what_the_one_before_let_go_and_keeps_the_last_order() -> None:
    ctx = EvictionContext(EvictionKind.PREEMPT, JOB)
    seen: list[list[str]] = []

    def reverse(_ctx: EvictionContext, candidates: list[TaskInfo]) -> list[TaskInfo]:
        seen.append(uids(candidates))
        return list(reversed(candidates))

    filters = [[keep(0, 1, 2)], [reverse, keep(1, 2, 3)]]
    assert uids(C.chain_filters(filters, ctx, list(TASKS))) == ["t2", "t1"]  # t0 dropped by the first, order reversed
    assert seen == [["t0", "t1", "t2"]]  # the second saw what the first let go, not the action's candidates
    assert uids(C.chain_filters([], ctx, list(TASKS))) == uids(TASKS)  # no filter: every candidate, as given
    assert C.chain_filters([[keep()], [reverse]], ctx, list(TASKS)) == []  # a filter that lets none go ends it
    assert P.VICTIM_FILTER.combine is C.chain_filters and P.VICTIM_FILTER.switch is None


def test_first_domains_takes_the_first_function_and_none_means_none() -> None:
    rack = [Domain("rack-a", 1, frozenset({"n0"}))]
    assert C.first_domains([], JOB) is None
    assert C.first_domains([[], [const(rack), const([])]], JOB) is rack  # type: ignore[list-item]


def test_sum_hypernode_scores_adds_every_plugin_and_scores_only_the_candidates() -> None:
    candidates = {"rack-a": np.array([0]), "rack-b": np.array([1, 2])}
    first = const({"rack-a": 10.0, "rack-b": 5.0})
    second = const({"rack-b": 7.5, "elsewhere": 99.0})  # a name that is no candidate is ignored
    assert C.sum_hypernode_scores([], JOB, TASKS, candidates) == {"rack-a": 0.0, "rack-b": 0.0}
    answer = C.sum_hypernode_scores([[first], [second]], JOB, TASKS, candidates)  # type: ignore[list-item]
    assert answer == {"rack-a": 10.0, "rack-b": 12.5}
    assert P.HYPERNODE_ORDER.combine is C.sum_hypernode_scores
    assert P.HYPERNODE_ORDER.switch == "enabledHyperNodeOrder"
