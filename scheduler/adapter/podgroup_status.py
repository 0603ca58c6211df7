"""Layer `adapter`: a PodGroup's status as the API stores it, from the cycle's `PodGroupStatus` — one builder for
the scheduler's status writer (`cache/status_writer.py`) and the simulator (`sim/cluster.py`), so both write the
same object: phase, counts, conditions (a condition that did not change keeps its lastTransitionTime, as
Volcano's scheduler keeps it, pkg/scheduler/api/job_info.go) and minMemberOverride when the gang was shrunk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.api.job import Condition
from scheduler.api.objects import MutableObj
from scheduler.api.snapshot import PodGroupStatus
from scheduler.api.timestamps import rfc3339


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
