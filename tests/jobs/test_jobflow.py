"""JobFlow and JobTemplate (flow.volcano.sh): a flow's Jobs are created in dependency order, as Volcano's
jobflow controller creates them (pkg/controllers/jobflow), and its status is Volcano's.

The controller runs on the fake API; the Volcano Job controller is played by the test, which moves a Job's
phase and tells the flow controller, as the Job's watch event would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from fake_flow_api import FlowFakeApi
from hypothesis import HealthCheck, given, settings, strategies as st

from scheduler import metrics
from scheduler.api.timestamps import rfc3339
from scheduler.controllers.job import JobController
from scheduler.controllers.jobflow import JobFlowController
from scheduler.jobs.flow import (
    CREATED_BY_JOB_FLOW,
    CREATED_BY_JOB_TEMPLATE,
    Problem,
    ProblemKind,
    plan,
)
from scheduler.jobs.flow_status import FlowPhase

NS = "ns"
T0 = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float = 10.0) -> None:
        self.now += seconds


def template(name: str, scheduler: str = "volcano-py") -> dict[str, Any]:
    container = {"name": "nginx", "image": "nginx:1.14.2", "resources": {"requests": {"cpu": "1"}}}
    return {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobTemplate",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "minAvailable": 1,
            "schedulerName": scheduler,
            "queue": "default",
            "tasks": [
                {
                    "replicas": 1,
                    "name": "default-nginx",
                    "template": {"spec": {"containers": [container], "restartPolicy": "OnFailure"}},
                }
            ],
        },
    }


def flow_entry(name: str, *targets: str, **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, **extra}
    if targets:
        entry["dependsOn"] = {"targets": list(targets)}
    return entry


@dataclass
class Harness:
    api: FlowFakeApi
    clock: Clock
    controller: JobFlowController
    flow: str = "test"

    @classmethod
    def start(cls, *templates: str, scheduler_names: tuple[str, ...] = ("volcano-py",)) -> Harness:
        clock = Clock()
        api = FlowFakeApi(clock)
        for name in templates:
            api.put("JobTemplate", template(name))
        return cls(api, clock, cls.new_controller(api, clock, scheduler_names))

    @staticmethod
    def new_controller(api: FlowFakeApi, clock: Clock, names: tuple[str, ...] = ("volcano-py",)) -> JobFlowController:
        return JobFlowController(api, JobController(api, names).claims, clock=clock)  # type: ignore[arg-type]

    def submit(self, *flows: dict[str, Any], retain: str | None = None, name: str = "test") -> None:
        spec: dict[str, Any] = {"flows": list(flows)}
        if retain is not None:
            spec["jobRetainPolicy"] = retain
        self.flow = name
        self.api.put(
            "JobFlow",
            {
                "apiVersion": "flow.volcano.sh/v1alpha1",
                "kind": "JobFlow",
                "metadata": {"name": name, "namespace": NS},
                "spec": spec,
            },
        )
        self.settle()

    def settle(self) -> None:
        """Reconcile as the watch would after each write of the flow's own (status, Jobs) until nothing changes."""
        for _ in range(10):
            writes = len(self.api.writes)
            self.controller.reconcile(NS, self.flow)
            if len(self.api.writes) == writes:
                return
        raise AssertionError("the flow controller did not settle")

    def job(self, step: str) -> dict[str, Any] | None:
        return self.api.job(NS, f"{self.flow}-{step}")

    def created(self) -> set[str]:
        return {n.removeprefix(f"{self.flow}-") for n in self.api.of_kind("Job")}

    def move(self, step: str, phase: str, **status: Any) -> None:
        """The Job controller moves the Job of `step` to `phase`; its MODIFIED event reaches the flow."""
        self.clock.tick()
        job = self.api.objects[("Job", NS, f"{self.flow}-{step}")]
        job["status"] = {
            **(job.get("status") or {}),
            **status,
            "state": {"phase": phase, "lastTransitionTime": rfc3339(self.clock())},
        }
        self.controller.on_job("MODIFIED", job)
        self.settle()

    def complete(self, step: str) -> None:
        self.move(step, "Pending")
        self.move(step, "Running")
        self.move(step, "Completed")

    def status(self) -> dict[str, Any]:
        return dict(self.api.objects[("JobFlow", NS, self.flow)].get("status") or {})

    def phase(self) -> str | None:
        return (self.status().get("state") or {}).get("phase")

    def warnings(self) -> list[tuple[str, str]]:
        """(reason, field) of each Warning Event on the flow."""
        return [
            (e.reason, e.message.split(": ", 1)[0])
            for e in self.api.told
            if e.kind == "JobFlow" and e.type == "Warning"
        ]


# ---------------------------------------------------------------------------------------------- order


def test_b_is_created_after_a_completes_and_never_before() -> None:
    h = Harness.start("a", "b")
    h.submit(flow_entry("a"), flow_entry("b", "a"))
    assert h.created() == {"a"}
    for phase in ("Pending", "Running", "Completing"):
        h.move("a", phase)
        assert h.created() == {"a"}, f"b created while a is {phase}"
    h.move("a", "Completed")
    assert h.created() == {"a", "b"}
    a_done = h.job("a")["status"]["state"]["lastTransitionTime"]  # type: ignore[index]
    assert h.job("b")["metadata"]["creationTimestamp"] >= a_done  # type: ignore[index]


def test_a_flows_job_is_the_template_labelled_and_owned_as_volcano_makes_it() -> None:
    h = Harness.start("a")
    h.submit(flow_entry("a"))
    job = h.job("a")
    assert job is not None
    flow = h.api.jobflow(NS, "test")
    assert flow is not None
    marks = {CREATED_BY_JOB_TEMPLATE: "ns.a", CREATED_BY_JOB_FLOW: "ns.test"}
    assert job["metadata"]["name"] == "test-a"
    assert job["metadata"]["labels"] == marks and job["metadata"]["annotations"] == marks
    assert job["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "flow.volcano.sh/v1alpha1",
            "kind": "JobFlow",
            "name": "test",
            "uid": flow["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert job["spec"] == template("a")["spec"]
    assert [(e.reason, e.type) for e in h.api.told if e.kind == "JobFlow"] == [("Created", "Normal")]


def test_a_failed_a_leaves_b_uncreated_and_the_flow_failed() -> None:
    failed = metrics.controllers().jobflow_failed
    before = metrics.controllers().registry.get_sample_value(failed.name, {"jobflow_namespace": NS}) or 0.0
    h = Harness.start("a", "b")
    h.submit(flow_entry("a"), flow_entry("b", "a"))
    h.move("a", "Running")
    assert h.phase() == FlowPhase.RUNNING
    h.move("a", "Failed")
    assert h.phase() == FlowPhase.FAILED
    assert h.status()["failedJobs"] == ["test-a"]
    assert h.created() == {"a"}
    # A Failed flow is left as it is (Volcano's failed state does nothing): a later change creates nothing.
    h.move("a", "Completed")
    assert h.created() == {"a"} and h.phase() == FlowPhase.FAILED
    assert h.status()["failedJobs"] == ["test-a"]
    after = metrics.controllers().registry.get_sample_value(failed.name, {"jobflow_namespace": NS})
    assert after == before + 1


@pytest.mark.parametrize("end", ["Failed", "Terminated"])
def test_a_flow_whose_first_job_ends_badly_before_running_fails(end: str) -> None:
    h = Harness.start("a", "b")
    h.submit(flow_entry("a"), flow_entry("b", "a"))
    h.move("a", end)
    assert h.phase() == FlowPhase.FAILED and h.created() == {"a"}


def test_a_diamond_creates_d_only_after_both_b_and_c_completed() -> None:
    h = Harness.start("a", "b", "c", "d")
    h.submit(flow_entry("a"), flow_entry("b", "a"), flow_entry("c", "a"), flow_entry("d", "b", "c"))
    assert h.created() == {"a"}
    h.complete("a")
    assert h.created() == {"a", "b", "c"}
    h.complete("b")
    assert h.created() == {"a", "b", "c"}
    h.move("c", "Running")
    assert h.created() == {"a", "b", "c"}
    h.move("c", "Completed")
    assert h.created() == {"a", "b", "c", "d"}
    assert h.phase() == FlowPhase.RUNNING
    h.complete("d")
    assert h.phase() == FlowPhase.SUCCEED


def test_a_flow_without_dependencies_starts_every_job_at_once() -> None:
    h = Harness.start("a", "b")
    h.submit(flow_entry("a"), flow_entry("b", dependsOn={"targets": []}))
    assert h.created() == {"a", "b"}


# ---------------------------------------------------------------------------------------------- retain policy


@pytest.mark.parametrize(
    "retain, kept",
    [("delete", set()), ("retain", {"a", "b"}), (None, {"a", "b"})],
    ids=[
        "delete removes the jobs once the flow succeeded",
        "retain keeps them",
        "no policy keeps them (Volcano's default, retain)",
    ],
)
def test_job_retain_policy(retain: str | None, kept: set[str]) -> None:
    succeeded = metrics.controllers().jobflow_succeeded
    before = metrics.controllers().registry.get_sample_value(succeeded.name, {"jobflow_namespace": NS}) or 0.0
    h = Harness.start("a", "b")
    h.submit(flow_entry("a"), flow_entry("b", "a"), retain=retain)
    h.complete("a")
    assert h.created() == {"a", "b"}, "no job is deleted before the flow succeeded"
    h.complete("b")
    assert h.phase() == FlowPhase.SUCCEED
    assert h.created() == kept
    assert h.status()["completedJobs"] == ["test-a", "test-b"]  # Volcano leaves the status as it was
    after = metrics.controllers().registry.get_sample_value(succeeded.name, {"jobflow_namespace": NS})
    assert after == before + 1


def test_a_succeeded_flow_does_not_make_a_deleted_job_again() -> None:
    h = Harness.start("a")
    h.submit(flow_entry("a"))
    h.complete("a")
    assert h.phase() == FlowPhase.SUCCEED
    del h.api.objects[("Job", NS, "test-a")]
    h.settle()
    assert h.created() == set()


# ---------------------------------------------------------------------------------------------- bad input


@dataclass(frozen=True)
class Bad:
    name: str
    templates: tuple[str, ...]
    flows: tuple[dict[str, Any], ...]
    warnings: list[tuple[str, str]]  # (reason, field)
    created: set[str]  # what the rest of the flow still runs


BAD = [
    Bad(
        "a flow naming a missing JobTemplate is told and the other jobs run",
        ("a",),
        (flow_entry("a"), flow_entry("z")),
        [(ProblemKind.MISSING_TEMPLATE, "spec.flows[1].name")],
        {"a"},
    ),
    Bad(
        "a dependsOn target that is no flow of the JobFlow is told and the job never starts",
        ("a", "b"),
        (flow_entry("a"), flow_entry("b", "x")),
        [(ProblemKind.UNKNOWN_TARGET, "spec.flows[1].dependsOn.targets[0]")],
        {"a"},
    ),
    Bad(
        "a dependency cycle is told and the jobs outside it run",
        ("a", "b", "c"),
        (flow_entry("a"), flow_entry("b", "c"), flow_entry("c", "b")),
        [(ProblemKind.CYCLE, "spec.flows")],
        {"a"},
    ),
    Bad(
        "a job depending on itself is a cycle",
        ("a",),
        (flow_entry("a", "a"),),
        [(ProblemKind.CYCLE, "spec.flows")],
        set(),
    ),
    Bad(
        "a flow named twice is told",
        ("a",),
        (flow_entry("a"), flow_entry("a")),
        [(ProblemKind.DUPLICATE_FLOW, "spec.flows[1].name")],
        {"a"},
    ),
    Bad(
        "probes are told not to be acted on, and the targets still gate the job",
        ("a", "b"),
        (
            flow_entry("a"),
            {
                "name": "b",
                "dependsOn": {
                    "targets": ["a"],
                    "probe": {
                        "taskStatusList": [{"taskName": "default-nginx", "phase": "Running"}],
                        "httpGetList": [{"taskName": "default-nginx", "path": "/", "port": 80}],
                        "tcpSocketList": [{"taskName": "default-nginx", "port": 80}],
                    },
                },
            },
        ),
        [
            (ProblemKind.IGNORED_FIELD, "spec.flows[1].dependsOn.probe.httpGetList"),
            (ProblemKind.IGNORED_FIELD, "spec.flows[1].dependsOn.probe.tcpSocketList"),
            (ProblemKind.IGNORED_FIELD, "spec.flows[1].dependsOn.probe.taskStatusList"),
        ],
        {"a"},
    ),
    Bad(
        "a patch is told not to be applied",
        ("a",),
        (flow_entry("a", patch={"jobSpec": {"minAvailable": 2}}),),
        [(ProblemKind.IGNORED_FIELD, "spec.flows[0].patch")],
        {"a"},
    ),
]


@pytest.mark.parametrize("case", BAD, ids=[c.name for c in BAD])
def test_bad_input_is_one_warning_naming_the_field_and_nothing_is_lost(case: Bad) -> None:
    h = Harness.start(*case.templates)
    h.submit(*case.flows)
    for _ in range(3):  # told once, however often the flow is synced
        h.controller.on_jobflow(None, h.api.jobflow(NS, "test"))  # type: ignore[arg-type]
    assert h.warnings() == [(str(k), f) for k, f in case.warnings]
    assert h.created() == case.created
    if case.name.startswith("probes"):
        assert h.job("a")["spec"] == template("a")["spec"]  # type: ignore[index]
        h.move("a", "Running")
        assert h.created() == {"a"}, "a probe does not start b before a completed"
        h.move("a", "Completed")
        assert h.created() == {"a", "b"}
    if case.name.startswith("a patch"):
        assert h.job("a")["spec"] == template("a")["spec"]  # type: ignore[index]


def test_every_message_is_one_line_starting_with_its_field() -> None:
    flow = {
        "metadata": {"name": "test", "namespace": NS, "uid": "u"},
        "spec": {
            "flows": [flow_entry("a", "x"), flow_entry("b", "c"), flow_entry("c", "b"), flow_entry("a", patch={"x": 1})]
        },
    }
    problems = [
        *plan(flow, {"a": None, "b": template("b"), "c": template("c")}, [], T0).problems,
        Problem(ProblemKind.NAME_TAKEN, "spec.flows[0].name", ("test-a",)),
        Problem(ProblemKind.REFUSED, "spec.flows[0]", ("test-a", "metadata.labels: Invalid value")),
    ]
    assert {p.kind for p in problems} == set(ProblemKind)
    for problem in problems:
        message = problem.message()
        assert "\n" not in message and message.startswith(f"{problem.field}: ")


def test_a_missing_template_created_later_lets_the_flow_go_on() -> None:
    h = Harness.start("a")
    h.submit(flow_entry("a"), flow_entry("b", "a"))
    h.complete("a")
    assert h.created() == {"a"}
    assert h.warnings() == [(ProblemKind.MISSING_TEMPLATE, "spec.flows[1].name")]
    h.api.put("JobTemplate", template("b"))
    h.controller.on_jobtemplate("ADDED", h.api.jobtemplate(NS, "b"))  # type: ignore[arg-type]
    assert h.created() == {"a", "b"}


def test_a_job_the_apiserver_refuses_is_told_and_retried() -> None:
    from scheduler.cache.kube import KubeError

    class Refusing(FlowFakeApi):
        refuse = True

        def create(self, obj: Any) -> Any:
            if self.refuse and obj["kind"] == "Job":
                body = b'{"message": "Job.batch.volcano.sh \\"test-a\\" is invalid: metadata.labels: Invalid value"}'
                raise KubeError(422, "POST", "/apis/batch.volcano.sh/v1alpha1/namespaces/ns/jobs", body)
            return super().create(obj)

    clock = Clock()
    api = Refusing(clock)
    api.put("JobTemplate", template("a"))
    h = Harness(api, clock, Harness.new_controller(api, clock))
    h.submit(flow_entry("a"))
    h.controller.on_jobflow(None, api.jobflow(NS, "test"))  # type: ignore[arg-type]
    assert h.warnings() == [(ProblemKind.REFUSED, "spec.flows[0]")]
    assert h.created() == set()
    api.refuse = False
    h.settle()
    assert h.created() == {"a"}


def test_a_job_of_that_name_the_flow_does_not_own_is_left_alone() -> None:
    h = Harness.start("a", "b")
    h.api.put(
        "Job",
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "test-a", "namespace": NS},
            "spec": {},
            "status": {"state": {"phase": "Completed"}},
        },
    )
    h.submit(flow_entry("a"), flow_entry("b", "a"))
    assert h.warnings() == [(ProblemKind.NAME_TAKEN, "spec.flows[0].name")]
    assert h.created() == {"a"} and h.api.objects[("Job", NS, "test-a")]["spec"] == {}


# ---------------------------------------------------------------------------------------------- restarts, claims


def test_a_restarted_controller_creates_no_second_job() -> None:
    h = Harness.start("a", "b", "c")
    h.submit(flow_entry("a"), flow_entry("b", "a"), flow_entry("c", "a"))
    h.complete("a")
    for _ in range(2):
        h.controller = Harness.new_controller(h.api, h.clock)
        for kind in (None, "MODIFIED"):
            h.controller.on_jobflow(kind, h.api.jobflow(NS, "test"))  # type: ignore[arg-type]
            for job in list(h.api.of_kind("Job").values()):
                h.controller.on_job(kind, job)
    creates = [name for verb, kind, _, name in h.api.writes if (verb, kind) == ("create", "Job")]
    assert sorted(creates) == ["test-a", "test-b", "test-c"]


def test_a_flow_whose_templates_are_for_another_scheduler_is_left_alone() -> None:
    h = Harness.start()
    h.api.put("JobTemplate", template("a", scheduler="volcano"))
    h.submit(flow_entry("a"))
    assert h.created() == set()
    assert ("status", "JobFlow", NS, "test") not in h.api.writes


def test_a_template_lists_the_jobs_made_from_it() -> None:
    h = Harness.start("a", "b")
    h.submit(flow_entry("a"), flow_entry("b", "a"))
    h.submit(flow_entry("a"), name="other")
    for job in h.api.of_kind("Job").values():
        h.controller.on_job("ADDED", job)
    assert h.api.objects[("JobTemplate", NS, "a")]["status"] == {"jobDependsOnList": ["other-a", "test-a"]}
    assert "status" not in h.api.objects[("JobTemplate", NS, "b")]  # none made from it yet: left alone


# ---------------------------------------------------------------------------------------------- random DAGs


@st.composite
def dags(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[int]]:
    """A flow of 1-7 jobs, each depending on some earlier ones (listed in a shuffled order), and the order in
    which the test picks which created, unfinished job to complete next."""
    n = draw(st.integers(1, 7))
    deps = [draw(st.lists(st.integers(0, i - 1), unique=True, max_size=i)) if i else [] for i in range(n)]
    order = draw(st.permutations(range(n)))
    flows = [flow_entry(f"j{i}", *(f"j{d}" for d in deps[i])) for i in order]
    picks = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    return flows, picks


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(dags())
def test_no_job_is_created_before_all_its_targets_completed(case: tuple[list[dict[str, Any]], list[int]]) -> None:
    flows, picks = case
    targets = {f["name"]: (f.get("dependsOn") or {}).get("targets", []) for f in flows}
    h = Harness.start(*targets)
    completed: set[str] = set()
    seen: set[str] = set()

    def check() -> None:
        for new in h.created() - seen:
            missing = [t for t in targets[new] if t not in completed]
            assert not missing, f"{new} created while {missing} had not completed"
            seen.add(new)

    h.submit(*flows)
    check()
    for pick in picks:
        unfinished = sorted(h.created() - completed)
        assert unfinished, "every job is created eventually"
        step = unfinished[pick % len(unfinished)]
        h.move(step, "Running")
        check()
        h.move(step, "Completed")
        completed.add(step)
        check()
    assert h.created() == set(targets) and h.phase() == FlowPhase.SUCCEED
