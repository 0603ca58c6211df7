"""What a shard's holder publishes on its Lease stays within what its readers and the apiserver take, and a fault
costs only what it touches: at most `LOANS_MAX` loans (the longest waiting), no summary over `SUMMARY_MAX` (the
loans dropped first, then the whole summary: a Lease annotation too large would fail the renewal itself), a fault
while working it out costs the summaries and not the cycle, and a namespace whose pods cannot be listed keeps only
its own passed-over jobs waiting."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from scheduler.api.active_shards import LOANS_MAX, SUMMARY_MAX, Need, ShardSummary, parse_summary
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.phases import TaskStatus
from scheduler.api.resources import Resource
from scheduler.api.snapshot import ClusterSnapshot
from scheduler.cache.active_plan import Loans
from scheduler.cache.active_summary import Summaries
from scheduler.cache.scope import PodScope


def summaries(plan: Any) -> tuple[Summaries, list[str]]:
    said: list[str] = []
    return Summaries(2, 1.0, plan, lambda: 0.0, lambda: 1_800_000_000.0, lambda mark, text: said.append(mark),
                     lambda mark: None), said


def running(key: str, queue: str, cpu: int) -> JobInfo:
    job = JobInfo(key, key.split("/")[1], "ns", queue)
    job.add_task(TaskInfo(f"{key}-0", "p", "ns", key, Resource.of(cpu=cpu), status=TaskStatus.RUNNING, node_name="n"))
    return job


def test_the_longest_waiting_loans_a_reader_takes_are_published_and_read_back() -> None:
    loans = Loans()
    for i in range(LOANS_MAX + 40):
        loans.gangs[f"ns/g{i}"] = (0, Need(64 + i, 8))
        loans.since[f"ns/g{i}"] = float(i)
    s, _ = summaries(SimpleNamespace(base=[((8, 4),), ((8, 4),)], loans=loans))
    s.work_out(ClusterSnapshot({}, {}, {}), {}, {}, frozenset({0}))
    read = parse_summary(s.published(0, frozenset({0})))
    assert isinstance(read, ShardSummary), read
    assert [key for _, key, _ in read.loans] == [f"ns/g{i}" for i in range(LOANS_MAX)]


@pytest.mark.parametrize(("loans", "queues", "published"), [(3000, 4000, "without loans"), (0, 12000, "nothing")])
def test_a_summary_over_what_a_lease_carries_drops_its_loans_then_itself(loans: int, queues: int,
                                                                         published: str) -> None:
    plan = SimpleNamespace(base=[((8, 4),), ((8, 4),)], loans=Loans())
    for i in range(loans):
        plan.loans.gangs[f"ns/{'g' * 200}{i}"] = (0, Need(64, 8))
    s, said = summaries(plan)
    own = {f"ns/j{i}": running(f"ns/j{i}", f"queue-{'q' * 12}-{i}", 1000) for i in range(queues)}
    s.work_out(ClusterSnapshot({}, own, {}), own, dict.fromkeys(own, 0), frozenset({0}))
    text = s.published(0, frozenset({0}))
    assert said == ["summary-size:0"]
    if published == "nothing":
        assert text is None and 0 not in s.seen  # the renewal goes on without one; readers keep the last they read
    else:
        assert text is not None and len(text) <= SUMMARY_MAX
        read = parse_summary(text)
        assert isinstance(read, ShardSummary) and read.loans == () and len(read.allocated) == queues


def test_a_fault_while_working_out_the_summary_costs_the_summary_not_the_cycle() -> None:
    class Broken:
        loans = Loans()

        @property
        def base(self) -> list[Any]:
            raise RuntimeError("a plan read oddly")

    s, _ = summaries(Broken())
    s.texts = {0: "the last one"}
    s.work_out(ClusterSnapshot({}, {}, {}), {}, {}, frozenset({0}))  # must not raise
    assert s.published(0, frozenset({0})) == "the last one"


def test_a_namespace_that_cannot_be_listed_keeps_only_its_own_jobs_waiting() -> None:
    scope = PodScope({"volcano-py"})
    scope.passed = {"a/j1": 0, "b/j2": 0, "c/j3": 0}
    jobs = dict.fromkeys(("a/j1", "b/j2", "c/j3", "d/mine"), object())
    scope.hold_back(jobs, 0.0)
    assert set(jobs) == {"d/mine"} and scope.wanting == {"a/j1", "b/j2", "c/j3"}

    def list_jobs(namespace: str) -> bool:
        if namespace == "a":
            raise OSError("connection refused")
        return namespace != "b"  # b's list answered, but not whole

    scope.list_jobs = list_jobs
    scope.list_wanting()
    assert set(scope.passed) == {"a/j1", "b/j2"}  # c's jobs are whole again
