"""Issue 31 at the webhook: the pod cap per Job, the pod templates' dry run, and Volcano's /queues/validate
rules for deleting a queue (pkg/webhooks/admission/queues/validate/validate_queue.go, validateQueueDeleting)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from scheduler.cache.kube import KubeError
from scheduler.webhook.admission import Checks, Queues, admit_job, admit_queue_delete
from scheduler.webhook.podcheck import PodDryRun
from scheduler.webhook.server import handlers

QUEUES: dict[str, dict[str, Any]] = {
    "default": {"metadata": {"name": "default"}, "status": {"state": "Open"}},
    "root": {"metadata": {"name": "root"}},
    "open": {"metadata": {"name": "open"}, "status": {"state": "Open"}},
    "parent": {"metadata": {"name": "parent"}},
    "kid-b": {"metadata": {"name": "kid-b"}, "spec": {"parent": "parent"}},
    "kid-a": {"metadata": {"name": "kid-a"}, "spec": {"parent": "parent"}},
}


def queues() -> Queues:
    return Queues(QUEUES.get, lambda name: [n for n, q in QUEUES.items() if q.get("spec", {}).get("parent") == name])


def vcjob(*replicas: int, gpu: str | None = None) -> dict[str, Any]:
    resources = {"limits": {"nvidia.com/gpu": gpu}} if gpu else {}
    return {"metadata": {"name": "j", "namespace": "team-a", "uid": "u1"},
            "spec": {"queue": "open", "tasks": [
                {"name": f"t{i}", "replicas": n, "template": {"spec": {"containers": [
                    {"name": "c", "image": "busybox", "resources": resources}]}}} for i, n in enumerate(replicas)]}}


class Spy:
    """A pod template check that records the Jobs it was asked about and answers `problems`."""

    def __init__(self, problems: list[str] | None = None) -> None:
        self.asked: list[dict[str, Any]] = []
        self.problems = problems or []

    def __call__(self, job: dict[str, Any]) -> list[str]:
        self.asked.append(job)
        return list(self.problems)


# ---- the pod cap -----------------------------------------------------------------------------------------
def test_a_job_of_2147483647_replicas_is_refused_naming_the_field_before_anything_else() -> None:
    spy = Spy()
    decision = admit_job("CREATE", vcjob(1, 2147483647), None, queues(), Checks(pod_templates=spy))
    assert not decision.allowed
    assert decision.problems == ("spec.tasks[1].replicas: 2147483647 exceeds the limit of 100000 pods per Job",)
    assert spy.asked == []  # no dry run for a Job refused already


def test_the_cap_is_configurable_and_bounds_the_sum() -> None:
    checks = Checks(max_pods=10)
    assert admit_job("CREATE", vcjob(5, 5), None, queues(), checks).allowed
    decision = admit_job("CREATE", vcjob(5, 6), None, queues(), checks)
    assert decision.problems == ("spec.tasks: 11 pods in all (the sum of the replicas of its tasks) exceed the "
                                 "limit of 10 pods per Job",)


def test_scaling_past_the_cap_is_refused_on_update() -> None:
    old = vcjob(4)
    new = vcjob(11)
    assert admit_job("UPDATE", new, old, queues(), Checks(max_pods=10)).problems == (
        "spec.tasks[0].replicas: 11 exceeds the limit of 10 pods per Job",)
    assert admit_job("UPDATE", vcjob(10), old, queues(), Checks(max_pods=10)).allowed


def test_handlers_pass_the_checks_to_jobs_validate() -> None:
    route = handlers(queues(), ["/jobs/validate"], checks=Checks(max_pods=3))["/jobs/validate"]
    answer = route({"request": {"uid": "u", "operation": "CREATE", "object": vcjob(4)}})["response"]
    assert (answer["allowed"], answer["status"]["message"]) == (
        False, "spec.tasks[0].replicas: 4 exceeds the limit of 3 pods per Job")


# ---- the pod templates' dry run ----------------------------------------------------------------------------
def test_the_template_check_runs_only_for_a_job_otherwise_admitted_and_its_problems_refuse() -> None:
    spy = Spy(["spec.tasks[0].template: task 't0': Kubernetes refuses its pods: no"])
    refused = admit_job("CREATE", vcjob(2), None, queues(), Checks(pod_templates=spy))
    assert refused.problems == ("spec.tasks[0].template: task 't0': Kubernetes refuses its pods: no",)
    missing_queue = dict(vcjob(2), spec={**vcjob(2)["spec"], "queue": "missing"})
    assert admit_job("CREATE", missing_queue, None, queues(), Checks(pod_templates=spy)).problems == (
        "spec.queue: queue 'missing' does not exist",)
    assert len(spy.asked) == 1


def status_body(code: int, reason: str, message: str) -> bytes:
    return json.dumps({"kind": "Status", "status": "Failure", "code": code, "reason": reason,
                       "message": message}).encode()


class FakeKube:
    """Answers each POST with the next of `answers` (an exception to raise, or None for 201) and records it."""

    def __init__(self, *answers: BaseException | None) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, str, dict[str, Any], dict[str, Any], float]] = []

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None, timeout: Any = None,
                **_: Any) -> dict[str, Any]:
        self.calls.append((method, path, dict(query or {}), body, timeout))
        answer = self.answers.pop(0) if self.answers else None
        if answer is not None:
            raise answer
        return {}


GPU_INVALID = ('Pod "j-t1-0-x" is invalid: spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: '
               '"500m": must be an integer')


def test_a_dry_run_refusal_names_the_task_with_kubernetes_message() -> None:
    kube = FakeKube(None, KubeError(422, "POST", "pods", status_body(422, "Invalid", GPU_INVALID)))
    problems = PodDryRun(kube)(vcjob(1, 2, gpu="0.5"))  # type: ignore[arg-type]
    assert problems == [f"spec.tasks[1].template: task 't1': Kubernetes refuses its pods: {GPU_INVALID}"]
    # one pod per task, dry run only, in the Job's namespace, under a generated name and owned by nothing
    assert [(m, p, q) for m, p, q, _, _ in kube.calls] == [("POST", "/api/v1/namespaces/team-a/pods",
                                                            {"dryRun": "All"})] * 2
    pods = [body for *_, body, _ in kube.calls]
    assert [p["metadata"]["generateName"] for p in pods] == ["j-t0-0-", "j-t1-0-"]
    assert all("name" not in p["metadata"] and "ownerReferences" not in p["metadata"] for p in pods)
    assert pods[1]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "0.5"


@pytest.mark.parametrize(("error", "refused"), [
    (KubeError(400, "POST", "pods", status_body(400, "BadRequest", "cannot unmarshal")), True),
    (KubeError(403, "POST", "pods", status_body(403, "Forbidden",
                                                'pods "x" is forbidden: violates PodSecurity "restricted"')), True),
    (KubeError(403, "POST", "pods", status_body(403, "Forbidden", 'pods "x" is forbidden: exceeded quota')), False),
    (KubeError(403, "POST", "pods", status_body(403, "Forbidden", "cannot create pods: RBAC")), False),
    (KubeError(500, "POST", "pods", b"etcd down"), False),
    (KubeError(504, "POST", "pods", status_body(504, "Timeout", "timeout")), False),
    (TimeoutError("read timed out"), False),
    (ConnectionRefusedError("refused"), False),
])
def test_only_a_lasting_refusal_refuses(error: BaseException, refused: bool) -> None:
    problems = PodDryRun(FakeKube(error))(vcjob(1))  # type: ignore[arg-type]
    assert bool(problems) is refused


def test_an_apiserver_failure_is_logged_once_not_per_job(caplog: pytest.LogCaptureFixture) -> None:
    dry_run = PodDryRun(FakeKube(*[KubeError(500, "POST", "pods", b"down")] * 3))  # type: ignore[arg-type]
    with caplog.at_level(logging.DEBUG, logger="volcano_py.webhook"):
        assert [dry_run(vcjob(1)) for _ in range(3)] == [[], [], []]
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.DEBUG, logging.DEBUG]


def test_all_the_dry_runs_of_a_review_share_one_deadline() -> None:
    now = [0.0]

    class SlowKube(FakeKube):
        def request(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            now[0] += 1.5
            return super().request(*args, **kwargs)

    kube = SlowKube()
    assert PodDryRun(kube, budget=4.0, clock=lambda: now[0])(vcjob(1, 1, 1, 1, 1)) == []  # type: ignore[arg-type]
    assert [round(t, 1) for *_, t in kube.calls] == [4.0, 2.5, 1.0]  # each bounded by what is left, then none


def test_a_template_that_cannot_be_built_is_not_refused_here() -> None:
    job = vcjob(1)
    job["spec"]["tasks"][0]["template"] = "not a template"
    assert PodDryRun(FakeKube())(job) == []  # type: ignore[arg-type]


# ---- /queues/validate: deleting a queue ----------------------------------------------------------------------
@pytest.mark.parametrize(("name", "problem"), [
    ("default", "metadata.name: the 'default' queue cannot be deleted"),
    ("root", "metadata.name: the 'root' queue cannot be deleted"),
    ("parent", "metadata.name: queue 'parent' cannot be deleted because it has 2 child queues: kid-a, kid-b"),
    ("open", None),
    ("kid-a", None),
])
def test_deleting_a_queue_as_volcano_decides_it(name: str, problem: str | None) -> None:
    decision = admit_queue_delete(name, QUEUES[name], queues())
    assert decision.problems == ((problem,) if problem else ())


def test_allocated_pods_refuse_a_delete_only_with_the_flag() -> None:
    busy = {"metadata": {"name": "open"}, "status": {"allocated": {"cpu": "2", "pods": "3"}}}
    assert admit_queue_delete("open", busy, queues()).allowed
    assert admit_queue_delete("open", busy, queues(), allocated_pods_check=True).problems == (
        "status.allocated.pods: queue 'open' cannot be deleted because it has 3 allocated pods",)
    for unreadable in ("1e999", "-1", "", "３", 2.5, None):
        odd = {"metadata": {"name": "open"}, "status": {"allocated": {"pods": unreadable}}}
        assert admit_queue_delete("open", odd, queues(), allocated_pods_check=True).allowed


def test_queues_validate_judges_deletes_and_allows_creates_and_updates() -> None:
    route = handlers(queues(), ["/queues/validate"])["/queues/validate"]

    def review(operation: str, name: str) -> dict[str, Any]:
        old = QUEUES.get(name) if operation != "CREATE" else None
        request = {"uid": "u", "operation": operation, "name": name, "oldObject": old,
                   "object": None if operation == "DELETE" else QUEUES.get(name)}
        return route({"request": request})["response"]

    refused = review("DELETE", "default")
    assert (refused["allowed"], refused["status"]["code"], refused["status"]["message"]) == (
        False, 400, "metadata.name: the 'default' queue cannot be deleted")
    assert review("DELETE", "open")["allowed"]
    assert review("UPDATE", "default")["allowed"] and review("CREATE", "default")["allowed"]
    nameless = route({"request": {"uid": "u", "operation": "DELETE", "oldObject": None}})["response"]
    assert nameless["allowed"] is False
