"""A ready gang without a `Scheduled` condition gets it, and its PodGroup `Scheduled` event, in the next cycle.

The first cycle on a partial view (scheduler/cache/first_view.py) writes only binds and the pods' `Scheduled`
events; a replica can die between its binds and its status write. The next cycle bound nothing for such a gang, and
gang's close marked a ready gang Scheduled only in the cycle that bound it: the condition and the PodGroup event
were never written (the throughput bench's gangs bound by a first view never had them). Volcano marks every ready
gang Scheduled at each session close (pkg/scheduler/plugins/gang/gang.go OnSessionClose)."""

from __future__ import annotations

import pytest

from scheduler.sim.objects import pod_object
from scheduler.testing import cluster

GPU = "nvidia.com/gpu"


def scheduled(conditions: list[dict]) -> list[dict]:
    return [c for c in conditions if c.get("type") == "Scheduled" and c.get("status") == "True"]


def podgroup_events(c, key: str) -> list[tuple[str, str]]:
    return [(e.type, e.reason) for _, e in c.sim.events if e.kind == "PodGroup" and e.key == key]


@pytest.mark.parametrize("size", [1, 3])
def test_a_bound_gang_that_never_got_its_condition_gets_it_and_its_event_once(size: int) -> None:
    c = cluster().nodes("n", size, gpu=2).queue("team")
    c.job("gang", queue="team", replicas=size, gpu=2)
    c.cycle()
    assert len(c.sim.bound("gang")) == size
    # as a first-view cycle or a replica that died before its status write leaves it: bound, nothing written
    c.sim.podgroups["default/gang"].manifest["status"] = {"phase": "Running", "running": size}
    c.sim.events.clear()

    c.cycle()
    status = c.sim.podgroup("gang")["status"]
    assert len(scheduled(status.get("conditions") or [])) == 1, status
    assert podgroup_events(c, "default/gang") == [("Normal", "Scheduled")]

    c.sim.events.clear()
    c.cycles(3)
    assert podgroup_events(c, "default/gang") == [], "a gang already Scheduled is not marked again"


def test_a_gang_scheduled_by_volcano_with_its_own_message_is_left_as_it_is() -> None:
    c = cluster().nodes("n", 2, gpu=2).queue("team")
    c.job("gang", queue="team", replicas=2, gpu=2)
    c.cycle()
    volcano = {"type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be scheduled",
               "message": "", "transitionID": "from-volcano", "lastTransitionTime": "2026-12-01T00:00:00Z"}
    c.sim.podgroups["default/gang"].manifest["status"] = {"phase": "Running", "running": 2, "conditions": [volcano]}
    c.sim.events.clear()
    c.cycles(2)
    assert c.sim.podgroup("gang")["status"]["conditions"] == [volcano]
    assert podgroup_events(c, "default/gang") == []


def test_a_running_pod_without_a_podgroup_is_not_marked_in_every_cycle() -> None:
    """An implicit gang of one has no PodGroup to hold a condition: it is not given one, nor a PodGroup event,
    cycle after cycle (one per running plain pod)."""
    c = cluster().nodes("n", 1, gpu=2).queue("team")
    c.sim.add_pod(pod_object("solo", gpu=1))
    c.cycle()
    (solo,) = (p for p in c.sim.pods.values() if p.task.name == "solo")
    assert solo.manifest["spec"].get("nodeName") == "n0", "bound"
    c.sim.events.clear()
    for result in c.cycles(3):
        assert [s.conditions for s in result.podgroups if s.job == "default/solo"] in ([], [()])
    assert podgroup_events(c, "default/solo") == []
