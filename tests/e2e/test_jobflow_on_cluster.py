"""JobFlow and JobTemplate (flow.volcano.sh) on a real cluster: Volcano's example/jobflow manifests, applied
as its README applies them (only `schedulerName` changed, to ours), run their Jobs in dependency order.

`volcano-py controllers` runs as a process, the scheduler in-process; kwok runs bound pods and finishes a pod
when it is annotated (`controlplane.COMPLETE_ANNOTATION`), so the test decides when each Job succeeds.
"""

from __future__ import annotations

import os
import uuid
from datetime import datetime
from pathlib import Path

import pytest
from controlplane import COMPLETE_ANNOTATION, REPO_ROOT, wait_for
from inprocess import kwok_nodes, running_controllers, running_scheduler
from kubernetes import client

TIMEOUT = 60
BATCH, FLOW = "batch.volcano.sh", "flow.volcano.sh"


def volcano_snapshot() -> Path:
    """Volcano's source snapshot (VOLCANO_SRC, else ../shared/peers/volcano beside the checkout)."""
    if os.environ.get("VOLCANO_SRC"):
        return Path(os.environ["VOLCANO_SRC"])
    beside = REPO_ROOT.parent / "shared" / "peers" / "volcano"
    return beside if beside.exists() else Path("/work/shared/peers/volcano")


EXAMPLE = volcano_snapshot() / "example" / "jobflow"


# ---------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def scheduler(control_plane):
    with running_scheduler(control_plane) as running:
        yield running


@pytest.fixture(scope="module")
def node(control_plane, core_v1):
    with kwok_nodes(core_v1, [f"flow-{uuid.uuid4().hex[:6]}"], gpus=0, cpu="64") as (name,):
        yield name


@pytest.fixture(scope="module")
def controllers(control_plane, custom, scheduler, node, tmp_path_factory):
    with running_controllers(
        control_plane,
        custom,
        tmp_path_factory.mktemp("controllers"),
        "--claim-unnamed",
        "--leader-elect-lease-name",
        "volcano-py-controllers-jobflow-e2e",
    ) as ctl:
        yield ctl


# ---------------------------------------------------------------------------------------------- helpers


def get(custom, group: str, namespace: str, plural: str, name: str) -> dict | None:
    version = "v1alpha1"
    try:
        return custom.get_namespaced_custom_object(group, version, namespace, plural, name)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def flow_jobs(custom, namespace: str, flow: str) -> dict[str, dict]:
    """The Jobs the flow made, by the label Volcano's controller puts on them."""
    items = custom.list_namespaced_custom_object(
        BATCH, "v1alpha1", namespace, "jobs", label_selector=f"volcano.sh/createdByJobFlow={namespace}.{flow}"
    )
    return {j["metadata"]["name"]: j for j in items["items"]}


def job_phase(job: dict | None) -> str | None:
    return ((job or {}).get("status") or {}).get("state", {}).get("phase")


def flow_status(custom, namespace: str, flow: str) -> dict:
    return (get(custom, FLOW, namespace, "jobflows", flow) or {}).get("status") or {}


def second(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).replace(microsecond=0)


def succeed(core_v1, custom, namespace: str, job: str, flow: str | None = None) -> datetime | None:
    """Make the Job's one pod succeed once it runs; the time the Job entered Completed.

    A flow's last Job can be deleted (jobRetainPolicy delete) within a poll of entering Completed: given the
    flow, a Job gone and counted in its `completedJobs` has completed too (None: its time is gone with it)."""
    pod = wait_for(
        lambda: next(
            (
                p
                for p in core_v1.list_namespaced_pod(namespace, label_selector=f"volcano.sh/job-name={job}").items
                if p.status.phase == "Running"
            ),
            None,
        ),
        TIMEOUT,
        what=f"the pod of {job} running",
    )
    core_v1.patch_namespaced_pod(
        pod.metadata.name, namespace, {"metadata": {"annotations": {COMPLETE_ANNOTATION: "Succeeded"}}}
    )

    def completed() -> dict | None:
        found = get(custom, BATCH, namespace, "jobs", job)
        if found is None and flow is not None and job in flow_status(custom, namespace, flow).get("completedJobs", []):
            return {}
        return found if job_phase(found) == "Completed" else None

    done = wait_for(lambda: (d := completed()) is not None and [d], TIMEOUT, what=f"job {job} Completed")[0]
    return second(done["status"]["state"]["lastTransitionTime"]) if done else None


def created_at(job: dict) -> datetime:
    return second(job["metadata"]["creationTimestamp"])


def apply(control_plane, tmp_path: Path, source: Path, namespace: str) -> None:
    text = source.read_text().replace("schedulerName: volcano\n", "schedulerName: volcano-py\n")
    target = tmp_path / source.name
    target.write_text(text)
    control_plane.kubectl("apply", "-n", namespace, "-f", str(target))


def flow_warnings(core_v1, namespace: str, flow: str) -> list:
    events = core_v1.list_namespaced_event(namespace, field_selector=f"involvedObject.name={flow},type=Warning")
    return [e for e in events.items if e.involved_object.kind == "JobFlow"]


def warned_fields(core_v1, namespace: str, flow: str) -> set[tuple[str, str]]:
    """(reason, field) of each Warning on the flow: an Event's message starts with the field it is about."""
    return {(e.reason, e.message.split(": ", 1)[0]) for e in flow_warnings(core_v1, namespace, flow)}


# ---------------------------------------------------------------------------------------------- Volcano's example


def test_volcanos_example_flow_runs_each_job_after_its_targets_succeed(
    control_plane, controllers, custom, core_v1, tmp_path
):
    """example/jobflow: a; b after a; c and d after b; e after c and d; jobRetainPolicy delete. The JobFlow
    names namespace `default`, so it runs there, as Volcano's README runs it."""
    assert EXAMPLE.is_dir(), f"this test applies Volcano's example/jobflow manifests: none at {EXAMPLE}"
    namespace, flow = "default", "test"
    templates = ["a", "b", "c", "d", "e"]
    try:
        apply(control_plane, tmp_path, EXAMPLE / "JobTemplate.yaml", namespace)
        apply(control_plane, tmp_path, EXAMPLE / "JobFlow.yaml", namespace)

        def exists(*steps: str) -> None:
            assert set(flow_jobs(custom, namespace, flow)) == {f"test-{s}" for s in steps}

        wait_for(
            lambda: job_phase(get(custom, BATCH, namespace, "jobs", "test-a")) == "Running",
            TIMEOUT,
            what="job test-a Running",
        )
        wait_for(
            lambda: (flow_status(custom, namespace, flow).get("state") or {}).get("phase") == "Running",
            TIMEOUT,
            what="the flow Running",
        )
        exists("a")
        made = get(custom, BATCH, namespace, "jobs", "test-a")
        assert made["metadata"]["labels"] == {
            "volcano.sh/createdByJobTemplate": "default.a",
            "volcano.sh/createdByJobFlow": "default.test",
        }
        owner = made["metadata"]["ownerReferences"]
        assert [(o["kind"], o["name"], o.get("controller")) for o in owner] == [("JobFlow", "test", True)]
        wait_for(
            lambda: (
                (get(custom, FLOW, namespace, "jobtemplates", "a") or {}).get("status", {}).get("jobDependsOnList")
                == ["test-a"]
            ),
            TIMEOUT,
            what="template a lists job test-a",
        )

        a_done = succeed(core_v1, custom, namespace, "test-a")
        b = wait_for(lambda: flow_jobs(custom, namespace, flow).get("test-b"), TIMEOUT, what="job test-b created")
        assert created_at(b) >= a_done, "test-b was created before test-a completed"
        exists("a", "b")

        b_done = succeed(core_v1, custom, namespace, "test-b")
        wait_for(
            lambda: {"test-c", "test-d"} <= set(flow_jobs(custom, namespace, flow)),
            TIMEOUT,
            what="jobs test-c and test-d created",
        )
        jobs = flow_jobs(custom, namespace, flow)
        assert created_at(jobs["test-c"]) >= b_done and created_at(jobs["test-d"]) >= b_done
        exists("a", "b", "c", "d")

        c_done = succeed(core_v1, custom, namespace, "test-c")
        wait_for(
            lambda: "test-c" in flow_status(custom, namespace, flow).get("completedJobs", []),
            TIMEOUT,
            what="the flow counts test-c completed",
        )
        exists("a", "b", "c", "d")  # e waits for d too
        d_done = succeed(core_v1, custom, namespace, "test-d")
        e = wait_for(lambda: flow_jobs(custom, namespace, flow).get("test-e"), TIMEOUT, what="job test-e created")
        assert created_at(e) >= max(c_done, d_done)

        succeed(core_v1, custom, namespace, "test-e", flow)
        status = wait_for(
            lambda: (s := flow_status(custom, namespace, flow)).get("state", {}).get("phase") == "Succeed" and s,
            TIMEOUT,
            what="the flow Succeed",
        )
        assert status["completedJobs"] == [f"test-{s}" for s in templates]
        entries = {e["name"]: e for e in status["jobStatusList"]}
        assert [h["state"] for h in entries["test-a"]["runningHistories"]][-1] == "Completed"
        wait_for(
            lambda: not flow_jobs(custom, namespace, flow), TIMEOUT, what="the jobs deleted (jobRetainPolicy delete)"
        )
        out = control_plane.kubectl("get", "jf", flow, "-n", namespace, "--no-headers").stdout.split()
        assert out[:2] == [flow, "Succeed"], out
        assert flow_warnings(core_v1, namespace, flow) == []
    finally:
        control_plane.kubectl("delete", "jobflow", flow, "-n", namespace, "--ignore-not-found")
        for t in templates:
            control_plane.kubectl("delete", "jobtemplate", t, "-n", namespace, "--ignore-not-found")
        for job in flow_jobs(custom, namespace, flow):
            control_plane.kubectl("delete", "vcjob", job, "-n", namespace, "--ignore-not-found")


# ---------------------------------------------------------------------------------------------- failures, bad input


def template(name: str) -> dict:
    container = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
    return {
        "apiVersion": f"{FLOW}/v1alpha1",
        "kind": "JobTemplate",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "volcano-py",
            "minAvailable": 1,
            "tasks": [{"name": "main", "replicas": 1, "template": {"spec": {"containers": [container]}}}],
        },
    }


def jobflow(name: str, flows: list[dict]) -> dict:
    return {"apiVersion": f"{FLOW}/v1alpha1", "kind": "JobFlow", "metadata": {"name": name}, "spec": {"flows": flows}}


def test_a_failed_job_leaves_its_dependents_uncreated_and_the_flow_failed(controllers, custom, core_v1, namespace):
    for t in ("first", "second"):
        custom.create_namespaced_custom_object(FLOW, "v1alpha1", namespace, "jobtemplates", template(t))
    custom.create_namespaced_custom_object(
        FLOW,
        "v1alpha1",
        namespace,
        "jobflows",
        jobflow("chain", [{"name": "first"}, {"name": "second", "dependsOn": {"targets": ["first"]}}]),
    )
    pod = wait_for(
        lambda: next(
            (
                p
                for p in core_v1.list_namespaced_pod(namespace, label_selector="volcano.sh/job-name=chain-first").items
                if p.status.phase == "Running"
            ),
            None,
        ),
        TIMEOUT,
        what="the pod of chain-first running",
    )
    core_v1.patch_namespaced_pod(
        pod.metadata.name, namespace, {"metadata": {"annotations": {COMPLETE_ANNOTATION: "Failed"}}}
    )
    status = wait_for(
        lambda: (s := flow_status(custom, namespace, "chain")).get("state", {}).get("phase") == "Failed" and s,
        TIMEOUT,
        what="the flow Failed",
    )
    assert status["failedJobs"] == ["chain-first"]
    assert set(flow_jobs(custom, namespace, "chain")) == {"chain-first"}


def test_a_flow_naming_a_missing_template_is_told_and_runs_the_rest(controllers, custom, core_v1, namespace):
    custom.create_namespaced_custom_object(FLOW, "v1alpha1", namespace, "jobtemplates", template("here"))
    custom.create_namespaced_custom_object(
        FLOW,
        "v1alpha1",
        namespace,
        "jobflows",
        jobflow(
            "partial", [{"name": "here"}, {"name": "missing"}, {"name": "after", "dependsOn": {"targets": ["nowhere"]}}]
        ),
    )
    told = {
        ("MissingJobTemplate", "spec.flows[1].name"),
        ("MissingJobTemplate", "spec.flows[2].name"),
        ("UnknownTarget", "spec.flows[2].dependsOn.targets[0]"),
    }
    wait_for(lambda: warned_fields(core_v1, namespace, "partial") == told, TIMEOUT, what="a Warning per problem")
    wait_for(lambda: "partial-here" in flow_jobs(custom, namespace, "partial"), TIMEOUT, what="partial-here created")
    custom.create_namespaced_custom_object(FLOW, "v1alpha1", namespace, "jobtemplates", template("missing"))
    wait_for(
        lambda: "partial-missing" in flow_jobs(custom, namespace, "partial"),
        TIMEOUT,
        what="partial-missing created once its template exists",
    )
    assert controllers.proc.poll() is None and "Traceback (most recent call last)" not in controllers.text()
