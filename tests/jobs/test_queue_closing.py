"""Closing a queue that still has jobs (issue 22): `Closing` while any PodGroup in it is live, `Closed` once
the last one completes or goes; the scheduler admits nothing from it meanwhile, so its jobs create no pods."""

from __future__ import annotations

from typing import Any

from scheduler.controllers.queue import QueueController
from scheduler.testing import cluster


class QueueApi:
    """The two calls QueueController makes, on one stored Queue."""

    def __init__(self) -> None:
        self.stored: dict[str, Any] = {"metadata": {"name": "q"}, "spec": {}, "status": {"state": "Open"}}

    def queue(self, name: str) -> dict[str, Any] | None:
        return self.stored if name == "q" else None

    def patch_queue_status(self, name: str, status: dict[str, Any]) -> dict[str, Any]:
        self.stored["status"] = {**self.stored["status"], **status}
        return self.stored


def podgroup(name: str, phase: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"queue": "q"}, "status": {"phase": phase}}


def test_a_closed_queue_with_a_running_job_is_closing_until_the_job_completes() -> None:
    api = QueueApi()
    ctl = QueueController(api)  # type: ignore[arg-type]
    ctl.on_podgroup("ADDED", podgroup("a", "Running"))
    ctl.on_podgroup("ADDED", podgroup("b", "Inqueue"))
    ctl.sync("q", request="Close")
    assert api.stored["status"]["state"] == "Closing"
    ctl.on_podgroup("MODIFIED", podgroup("a", "Completed"))
    assert api.stored["status"]["state"] == "Closing"  # b is still live
    ctl.on_podgroup("DELETED", podgroup("b", "Inqueue"))
    assert (api.stored["status"]["state"], api.stored["status"]["running"]) == ("Closed", 0)
    ctl.sync("q", request="Open")
    assert api.stored["status"]["state"] == "Open"


def test_a_closing_queue_admits_no_new_job_and_keeps_its_running_one() -> None:
    c = cluster().node("n", cpu="8").queue("q", state="Closing")
    c.job("running", queue="q", replicas=2, cpu="1", phase="Running")
    for uid in list(c.sim.pods):
        c.sim.pods[uid].manifest["spec"]["nodeName"] = "n"
        c.sim.pods[uid].manifest["status"]["phase"] = "Running"
    c.job("new", queue="q", replicas=1, cpu="1")
    c.cycles(3)
    assert (len(c.sim.bound("running")), c.sim.bound("new")) == (2, {})
    assert c.sim.podgroup("new")["status"]["phase"] == "Pending"


class Queues:
    """Several stored Queues: the calls QueueController makes, with merge-patch semantics."""

    def __init__(self, *queues: tuple[str, str]) -> None:  # (name, parent)
        self.stored = {name: {"metadata": {"name": name, "annotations": {}}, "spec": {"parent": parent},
                              "status": {"state": "Open"}} for name, parent in queues}

    def queue(self, name: str) -> dict[str, Any] | None:
        return self.stored.get(name)

    def patch_queue_status(self, name: str, status: dict[str, Any]) -> dict[str, Any]:
        self.stored[name]["status"].update(status)
        return self.stored[name]

    def annotate_queue(self, name: str, annotations: dict[str, str]) -> dict[str, Any]:
        self.stored[name]["metadata"]["annotations"].update(annotations)
        return self.stored[name]

    def state(self, name: str) -> str:
        return str(self.stored[name]["status"]["state"])


def test_hierarchical_queues_close_and_open_as_volcanos_jobseq_spec_has_them() -> None:
    """Volcano's jobseq "Queue Command Close And Open With Hierarchical Queues": closing queue1 closes queue11;
    opening queue11 while queue1 is closed leaves it Closed; opening queue1 opens it and what its closing closed."""
    api = Queues(("root", ""), ("queue1", "root"), ("queue2", "root"), ("queue11", "queue1"))
    ctl = QueueController(api)  # type: ignore[arg-type]
    for name in api.stored:
        ctl.on_queue("ADDED", api.stored[name])
    ctl.sync("queue1", "Close")
    assert [api.state(q) for q in ("queue1", "queue11", "queue2")] == ["Closed", "Closed", "Open"]
    assert api.stored["queue11"]["metadata"]["annotations"]["volcano.sh/closed-by-parent"] == "true"
    ctl.sync("queue11", "Open")
    assert api.state("queue11") == "Closed"
    ctl.sync("queue1", "Open")
    assert [api.state(q) for q in ("queue1", "queue11")] == ["Open", "Open"]
    assert api.stored["queue11"]["metadata"]["annotations"]["volcano.sh/closed-by-parent"] == "false"
