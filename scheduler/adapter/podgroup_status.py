"""Layer `adapter`: a PodGroup's status as the API stores it, from the cycle's `PodGroupStatus` — one builder for
the scheduler's status writer (`cache/status_writer.py`) and the simulator (`sim/cluster.py`), so both write the
same object: phase, counts, conditions (a condition that did not change keeps its lastTransitionTime, as
Volcano's scheduler keeps it, pkg/scheduler/api/job_info.go) and minMemberOverride when the gang was shrunk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from scheduler.api.field_parsers import BadValueError
from scheduler.api.field_readers import check_conditions
from scheduler.api.job import Condition
from scheduler.api.objects import MutableObj
from scheduler.api.phases import PodGroupPhase
from scheduler.api.snapshot import PodGroupStatus
from scheduler.api.timestamps import rfc3339
from scheduler.framework.results import merge_condition


def status_body(status: PodGroupStatus, current: object, now: float) -> MutableObj:
    """The status to write, given the PodGroup's `current` status (anything: a hand-edited PodGroup may hold a
    string there; it is then written over) and the time of the cycle."""
    conditions = current.get("conditions") if isinstance(current, Mapping) else None
    body: MutableObj = {
        "phase": status.phase.value,
        "running": status.running,
        "succeeded": status.succeeded,
        "failed": status.failed,
        "conditions": conditions_body(status.conditions, conditions if isinstance(conditions, list) else [], now),
    }
    if status.min_member_override is not None:
        body["minMemberOverride"] = status.min_member_override
    return body


def conditions_body(new: Sequence[Condition], old: Sequence[object], now: float) -> list[MutableObj]:
    """Conditions as the API stores them; a condition that did not change keeps its lastTransitionTime."""
    by_type = {c.get("type"): c for c in old if isinstance(c, dict)}
    out = []
    for c in new:
        previous = by_type.get(c.type) or {}
        same = (previous.get("status"), previous.get("reason"), previous.get("message")) == (c.status, c.reason,
                                                                                            c.message)
        kept = previous.get("lastTransitionTime")
        when = kept if same and isinstance(kept, str) and kept else rfc3339(now)
        out.append({"type": c.type, "status": c.status, "reason": c.reason, "message": c.message,
                    "lastTransitionTime": when})
    return out


def rebase(status: PodGroupStatus, stored: object) -> PodGroupStatus:
    """A status a cycle worked out from a PodGroup status read before the last cycle's write of it landed
    (`--pipeline-apply`), put onto the status the PodGroup holds now (`stored`): the conditions this cycle set,
    merged into the stored ones; a phase the cycle did not work out from the gang's pods (Pending or Inqueue, as it
    found it) taken as the cycle would have, had it read the stored one. A status with no `base`, or a stored
    status that cannot be read, is kept as it is."""
    if status.base is None or not isinstance(stored, Mapping):
        return status
    base_phase, base_conditions = status.base
    raw = stored.get("conditions")
    try:
        rows = check_conditions(raw) if isinstance(raw, list) else ()
    except BadValueError:
        return status
    conditions = tuple(Condition(*row) for row in rows)
    for condition in status.conditions:
        if condition not in base_conditions:  # set by this cycle
            conditions = merge_condition(conditions, condition)
    phase = status.phase
    if phase in (PodGroupPhase.PENDING, PodGroupPhase.INQUEUE):  # framework/results.py podgroup_phase's last rule
        admitted = phase == PodGroupPhase.INQUEUE and base_phase != PodGroupPhase.INQUEUE  # by this cycle's enqueue
        stored_inqueue = PodGroupPhase.parse(stored.get("phase")) == PodGroupPhase.INQUEUE
        phase = PodGroupPhase.INQUEUE if admitted or stored_inqueue else PodGroupPhase.PENDING
    return replace(status, phase=phase, conditions=conditions)
