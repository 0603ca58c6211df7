"""`rebase` (adapter/podgroup_status.py): a status a cycle worked out from a PodGroup status read before the last
cycle's write of it landed (--pipeline-apply), put onto what the PodGroup holds now, as the cycle would have
worked it out had it read that."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.adapter.podgroup_status import rebase
from scheduler.api.job import Condition
from scheduler.api.phases import PodGroupPhase as P
from scheduler.api.snapshot import PodGroupStatus

SCHEDULED = Condition("Scheduled", "True", "ready", "tasks in gang are ready to be scheduled")
UNSCHEDULABLE = Condition("Unschedulable", "True", "NotEnoughResources", "2/2 tasks in gang unschedulable")


def stored(phase: str, *conditions: Condition) -> dict:
    return {"phase": phase, "conditions": [{"type": c.type, "status": c.status, "reason": c.reason,
                                            "message": c.message, "lastTransitionTime": "2026-01-01T00:00:00Z"}
                                           for c in conditions]}


def status(phase: P, conditions: tuple[Condition, ...], base: tuple[P | None, tuple[Condition, ...]]) -> PodGroupStatus:
    return PodGroupStatus("ns/g", phase, conditions, 0, 0, 0, base=base)


def test_a_condition_the_last_cycle_wrote_is_kept_when_this_cycle_set_none() -> None:
    s = status(P.RUNNING, (), (P.PENDING, ()))
    out = rebase(s, stored("Running", SCHEDULED))
    assert (out.phase, out.conditions) == (P.RUNNING, (SCHEDULED,))


def test_a_condition_this_cycle_set_replaces_its_opposite_the_last_cycle_wrote() -> None:
    s = status(P.RUNNING, (SCHEDULED,), (P.INQUEUE, ()))
    out = rebase(s, stored("Inqueue", UNSCHEDULABLE))
    assert (out.phase, out.conditions) == (P.RUNNING, (SCHEDULED,))


@pytest.mark.parametrize(("phase", "base", "now", "expected"), [
    (P.PENDING, P.PENDING, "Inqueue", P.INQUEUE),  # enqueued by the last cycle: stays Inqueue
    (P.INQUEUE, P.PENDING, "Pending", P.INQUEUE),  # enqueued by this cycle
    (P.INQUEUE, P.INQUEUE, "Running", P.PENDING),  # below minMember again after the last cycle's Running
    (P.RUNNING, P.INQUEUE, "Inqueue", P.RUNNING),  # worked out from its pods: as it is
    (P.UNKNOWN, P.RUNNING, "Running", P.UNKNOWN),
])
def test_a_phase_carried_over_is_taken_from_the_stored_one(phase: P, base: P, now: str, expected: P) -> None:
    assert rebase(status(phase, (), (base, ())), stored(now)).phase is expected


def test_without_a_base_or_a_readable_status_it_is_kept() -> None:
    s = status(P.PENDING, (UNSCHEDULABLE,), (P.PENDING, ()))
    assert rebase(replace(s, base=None), stored("Inqueue", SCHEDULED)) is not None
    assert rebase(replace(s, base=None), stored("Inqueue", SCHEDULED)).conditions == (UNSCHEDULABLE,)
    assert rebase(s, "not a status") is s
    assert rebase(s, {"phase": "Inqueue", "conditions": [{"type": 7}]}) is s
