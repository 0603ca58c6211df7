"""Layer `controllers`: which PodGroups turned Unknown, for the Job controller's `Unknown` policy event.

Volcano's job controller raises a Job's `Unknown` event when its PodGroup's phase changes to Unknown (a running gang
the scheduler cannot make whole again; pkg/controllers/job/job_controller_handler.go, updatePodGroup). The phase
each PodGroup was last seen in is kept here, freed when the PodGroup is deleted; the initial listing raises
nothing (what happened before the controller started is not an event).
"""

from __future__ import annotations

import threading

from scheduler.api.objects import MutableObj


class PhaseTransitions:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._phases: dict[str, str] = {}  # PodGroup uid -> its phase as last seen

    def turned_unknown(self, kind: str | None, podgroup: MutableObj) -> bool:
        uid = str(podgroup["metadata"].get("uid"))
        phase = str((podgroup.get("status") or {}).get("phase") or "")
        with self._lock:
            before = self._phases.pop(uid, None)
            if kind != "DELETED":
                self._phases[uid] = phase
        return kind == "MODIFIED" and phase == "Unknown" and before not in (None, "Unknown")
