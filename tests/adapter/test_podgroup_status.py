"""One PodGroup status builder for the scheduler's writer and the simulator (`scheduler/adapter/podgroup_status.py`)."""

from __future__ import annotations

from scheduler.adapter.podgroup_status import status_body
from scheduler.api.job import Condition
from scheduler.api.phases import PodGroupPhase
from scheduler.api.snapshot import PodGroupStatus
from scheduler.api.timestamps import rfc3339
from scheduler.testing import cluster

WAITING = Condition("Unschedulable", "True", "0/1 nodes are available", "NotEnoughResources")


def status(*conditions: Condition) -> PodGroupStatus:
    return PodGroupStatus("default/j", PodGroupPhase.INQUEUE, conditions, 0, 0, 0)


def test_an_unchanged_condition_keeps_its_transition_time_and_a_changed_one_takes_the_cycles() -> None:
    first = status_body(status(WAITING), {}, 1000.0)
    assert first["conditions"][0]["lastTransitionTime"] == rfc3339(1000.0)
    again = status_body(status(WAITING), first, 2000.0)
    assert again["conditions"][0]["lastTransitionTime"] == rfc3339(1000.0)
    moved = Condition("Unschedulable", "True", "1/2 nodes are available", "NotEnoughResources")
    changed = status_body(status(moved), again, 3000.0)
    assert changed["conditions"][0]["lastTransitionTime"] == rfc3339(3000.0)


def test_a_status_that_is_not_an_object_is_written_over() -> None:
    for stored in ("Running", None, [1, 2], 7):
        body = status_body(status(WAITING), stored, 5.0)
        assert body["conditions"][0]["lastTransitionTime"] == rfc3339(5.0) and body["phase"] == "Inqueue"


def test_a_hostile_stored_time_is_replaced_not_kept() -> None:
    stored = {"conditions": [{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                              "message": "0/1 nodes are available", "lastTransitionTime": {"a": 1}}], "phase": 3}
    assert status_body(status(WAITING), stored, 5.0)["conditions"][0]["lastTransitionTime"] == rfc3339(5.0)


def test_the_simulator_writes_the_status_the_scheduler_writes() -> None:
    c = cluster().node("n", cpu="1").job("big", replicas=1, cpu="4")
    first = c.cycle()
    created = c.sim.podgroup("big")["status"]
    written = status_body(next(s for s in first.podgroups if s.job == "default/big"), {}, c.sim.now - 1.0)
    assert created == {**created, **written}  # the same fields, the same values
    stamp = created["conditions"][0]["lastTransitionTime"]
    assert isinstance(stamp, str)
    c.cycles(2)
    assert c.sim.podgroup("big")["status"]["conditions"][0]["lastTransitionTime"] == stamp  # unchanged: kept
