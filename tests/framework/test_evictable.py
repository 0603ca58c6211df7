"""The EVICTABLE point's tier rule, Volcano's Session.UnifiedEvictable (pkg/scheduler/framework/session_plugins.go)."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.resources import Resource
from scheduler.framework.combine import unified_victims
from scheduler.framework.evictable import EvictionContext, EvictionKind

TASKS = [TaskInfo(f"t{i}", f"t{i}", "default", "default/j", Resource.of(1000)) for i in range(4)]
CTX = EvictionContext(EvictionKind.GANG_PREEMPT, JobInfo("default/p", "p", "default", "default"))


def allow(*indices: int):
    def fn(ctx: EvictionContext, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return [t for t in candidates if int(t.key[1:]) in indices]
    return fn


def abstain(ctx: EvictionContext, candidates: Sequence[TaskInfo]) -> None:
    return None


def uids(tasks: list[TaskInfo]) -> list[str]:
    return [t.key for t in tasks]


def test_a_tier_answers_with_what_every_plugin_in_it_allows() -> None:
    assert uids(unified_victims([[allow(0, 1, 2), allow(1, 2, 3)]], CTX, TASKS)) == ["t1", "t2"]


def test_an_abstaining_plugin_is_skipped() -> None:
    assert uids(unified_victims([[abstain, allow(2)]], CTX, TASKS)) == ["t2"]


def test_a_plugin_that_allows_none_ends_its_tier_and_the_next_tier_answers() -> None:
    assert uids(unified_victims([[allow(), allow(0)], [allow(3)]], CTX, TASKS)) == ["t3"]


def test_the_first_tier_with_an_answer_wins() -> None:
    assert uids(unified_victims([[allow(0)], [allow(1)]], CTX, TASKS)) == ["t0"]


def test_after_an_empty_intersection_the_next_plugin_answers_whole() -> None:
    """Volcano keeps a nil slice after an empty intersection, so the next plugin's answer is taken as it is."""
    assert uids(unified_victims([[allow(0), allow(1), allow(2, 3)]], CTX, TASKS)) == ["t2", "t3"]


def test_no_tier_with_an_answer_means_no_victims() -> None:
    assert unified_victims([[abstain], [allow()]], CTX, TASKS) == []
