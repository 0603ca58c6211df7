"""`volcano-py pod list`, as `vcctl pod list`: which pods (a job's, a queue's, every Volcano Job's), the request
that selects them, and the Ready / Status / Restart / Age cells kubectl's printer gives them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from vctable import cells

from scheduler.cli.ctl.pods import pod_cells

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def pod(
    name: str,
    namespace: str = "ml",
    job: str | None = "train",
    queue: str | None = "team-a",
    annotations: dict[str, str] | None = None,
    containers: int = 1,
    **status: Any,
) -> dict[str, Any]:
    labels = {k: v for k, v in (("volcano.sh/job-name", job), ("volcano.sh/queue-name", queue)) if v}
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": labels,
        "annotations": annotations or {},
        "creationTimestamp": "2025-12-31T23:00:00Z",
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": f"c{i}"} for i in range(containers)]},
        "status": {"phase": "Pending", **status},
    }


PODS = [
    pod("train-1"),
    pod("train-0"),
    pod("other-0", job="other", queue="team-b"),
    pod("web-0", job=None, queue=None, annotations={"scheduling.volcano.sh/queue-name": "team-a"}),
    pod("lonely-0", job=None, queue=None),
    pod("train-0", namespace="prod"),
]


@pytest.mark.parametrize(
    ("flags", "expected", "selector"),
    [
        (["-n", "ml"], [("ml", "other-0"), ("ml", "train-0"), ("ml", "train-1")], "volcano.sh/job-name"),
        (["-n", "ml", "-j", "train"], [("ml", "train-0"), ("ml", "train-1")], "volcano.sh/job-name in (train)"),
        (["-n", "ml", "-q", "team-a"], [("ml", "train-0"), ("ml", "train-1"), ("ml", "web-0")], None),
        (
            ["--all-namespaces", "-j", "train"],
            [("ml", "train-0"), ("ml", "train-1"), ("prod", "train-0")],
            "volcano.sh/job-name in (train)",
        ),
    ],
    ids=["every Volcano Job's pods", "one job's", "one queue's, plain pods by annotation", "in all namespaces"],
)
def test_list_selects_the_pods_vcctl_selects(
    flags: list[str], expected: list[tuple[str, str]], selector: str | None, vcctl: Any
) -> None:
    run, stub = vcctl("pod", "list", *flags, objects=PODS)
    rows = cells(run.out)
    assert [(r.get("Namespace", "ml"), r["Name"]) for r in rows] == expected  # sorted by namespace, then name
    assert stub.requests[0]["query"].get("labelSelector") == selector
    assert ("Namespace" in rows[0]) == ("--all-namespaces" in flags)


def test_a_job_of_another_queue_is_an_error(vcctl: Any) -> None:
    run, _ = vcctl("pod", "list", "-n", "ml", "-j", "train", "-q", "team-b", objects=PODS)
    assert run.code == 2 and len(run.err.splitlines()) == 1 and run.out == ""


def test_no_pods_say_no_resources_found(vcctl: Any) -> None:
    run, _ = vcctl("pod", "list", "-n", "empty", objects=PODS)
    assert run.out == "No resources found\n"


def test_columns_are_the_widest_cell_plus_8_or_the_header_plus_2(vcctl: Any) -> None:
    run, _ = vcctl("pod", "list", "-n", "ml", "-j", "train", objects=PODS)
    header = run.out.splitlines()[0]
    # Name: train-0 + 8; Ready: 0/1 + 8; Status: Pending + 8; Restart: its header + 2 (wider than 0 + 8? equal)
    assert [header.index(h) for h in ("Ready", "Status", "Restart", "Age")] == [15, 15 + 11, 26 + 15, 41 + 9]


def ready(restarts: int = 0, finished: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"ready": True, "restartCount": restarts, "state": {"running": {}}}
    if finished:
        status["lastState"] = {"terminated": {"finishedAt": finished}}
    return status


@dataclass(frozen=True)
class Case:
    name: str
    pod: dict[str, Any]
    ready: str
    status: str
    restarts: str = "0"


CASES = [
    Case("a pod not yet scheduled is Pending", pod("p"), "0/1", "Pending"),
    Case("a ready running pod", pod("p", phase="Running", containerStatuses=[ready()]), "1/1", "Running"),
    Case(
        "restarts say how long ago the last one ended",
        pod("p", phase="Running", containerStatuses=[ready(3, "2025-12-31T23:55:00Z")]),
        "1/1",
        "Running",
        "3 (5m ago)",
    ),
    Case(
        "a waiting container's reason wins",
        pod(
            "p",
            containers=2,
            phase="Running",
            containerStatuses=[ready(), {"restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}],
        ),
        "1/2",
        "CrashLoopBackOff",
        "4",
    ),
    Case(
        "a container that exited with no reason shows its code",
        pod("p", phase="Failed", containerStatuses=[{"state": {"terminated": {"exitCode": 3}}}]),
        "0/1",
        "ExitCode:3",
    ),
    Case(
        "or its signal",
        pod("p", phase="Failed", containerStatuses=[{"state": {"terminated": {"exitCode": 137, "signal": 9}}}]),
        "0/1",
        "Signal:9",
    ),
    Case(
        "a completed container still running elsewhere reads Running only if the pod is Ready",
        pod(
            "p",
            containers=2,
            phase="Running",
            conditions=[{"type": "Ready", "status": "False"}],
            containerStatuses=[{"state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}, ready()],
        ),
        "1/2",
        "NotReady",
    ),
    Case(
        "a scheduling gate shows",
        pod("p", conditions=[{"type": "PodScheduled", "reason": "SchedulingGated"}]),
        "0/1",
        "SchedulingGated",
    ),
    Case(
        "a deleted pod that still runs is Terminating",
        {**pod("p", phase="Running"), "metadata": {"name": "p", "deletionTimestamp": "2026-01-01T00:00:00Z"}},
        "0/1",
        "Terminating",
    ),
    Case(
        "an init container waiting for its image",
        {
            **pod("p", initContainerStatuses=[{"name": "setup", "state": {"waiting": {"reason": "ErrImagePull"}}}]),
            "spec": {"containers": [{"name": "c"}], "initContainers": [{"name": "setup"}]},
        },
        "0/1",
        "Init:ErrImagePull",
    ),
    Case(
        "init containers still to run count as Init:i/n",
        {
            **pod(
                "p",
                initContainerStatuses=[
                    {"name": "a", "state": {"terminated": {"exitCode": 0}}},
                    {"name": "b", "state": {"running": {}}},
                ],
            ),
            "spec": {"containers": [{"name": "c"}], "initContainers": [{"name": "a"}, {"name": "b"}]},
        },
        "0/1",
        "Init:1/2",
    ),
    Case(
        "a restartable init container (sidecar) counts as a container",
        {
            **pod(
                "p",
                phase="Running",
                initContainerStatuses=[{"name": "side", "started": True, "ready": True, "state": {"running": {}}}],
                containerStatuses=[ready()],
            ),
            "spec": {"containers": [{"name": "c"}], "initContainers": [{"name": "side", "restartPolicy": "Always"}]},
        },
        "2/2",
        "Running",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_cells_as_kubectl_prints_them(case: Case, utc: None) -> None:
    _, _, got_ready, got_status, got_restarts, age = pod_cells(case.pod, NOW)
    assert (got_ready, got_status, got_restarts) == (case.ready, case.status, case.restarts)
    assert age == ("60m" if case.pod["metadata"].get("creationTimestamp") else "<unknown>")
