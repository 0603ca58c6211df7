"""Layer `plugins`: `cdp` (cooldown protection) keeps a recently started pod from being preempted or reclaimed.

As Volcano's cdp plugin (pkg/scheduler/plugins/cdp/cdp.go), served at the Preemptable and Reclaimable points (the
legacy `preempt` and `reclaim` actions). A pod with a cooldown (`volcano.sh/cooldown-time`, a Go duration, the
label before the annotation; parsed once, `api.convert.cooldown_of`) that is Running is not offered as a victim
while its `PodScheduled=True` transition plus the cooldown is after now (the session's clock). Every other
candidate is offered: no cooldown, a cooldown Go cannot read (the pod then has a reason and one log line, and is
not protected, as in Volcano, which logs a warning and treats it as no cooldown), not Running, or no
`PodScheduled=True` condition with a time.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.api.job import TaskInfo
from scheduler.api.phases import TaskStatus
from scheduler.framework.conf_args import NoArgs
from scheduler.framework.plugin import Plugin, SessionAPI


def cooling_down(task: TaskInfo, now: float) -> bool:
    """The pod is Running and within its cooldown: PodScheduled time + cooldown is after `now`."""
    return (
        task.cooldown is not None
        and task.scheduled_at is not None
        and task.status is TaskStatus.RUNNING
        and task.scheduled_at + task.cooldown > now
    )


class CdpPlugin(Plugin[NoArgs]):
    name = "cdp"

    def on_session_open(self, ssn: SessionAPI) -> None:
        self.now = ssn.now

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return [t for t in candidates if not cooling_down(t, self.now)]

    def reclaimable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return [t for t in candidates if not cooling_down(t, self.now)]
