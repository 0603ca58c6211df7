"""Layer `plugins`: `conformance` never offers critical pods (`victims.is_critical`) as preemption or reclaim
victims."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.api.job import TaskInfo
from scheduler.framework import points as P
from scheduler.framework.conf_args import NoArgs
from scheduler.framework.evictable import EvictionContext
from scheduler.framework.plugin import Plugin, SessionAPI
from scheduler.framework.victims import is_critical


class ConformancePlugin(Plugin[NoArgs]):
    name = "conformance"

    def on_session_open(self, ssn: SessionAPI) -> None:
        def victims(preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
            return [t for t in candidates if not is_critical(t)]

        def guard(candidates: Sequence[TaskInfo], preemptor: TaskInfo) -> list[TaskInfo]:
            return victims(preemptor, candidates)

        ssn.register(P.PREEMPTABLE, victims)
        ssn.register(P.RECLAIMABLE, victims)
        ssn.register(P.PREEMPT_GUARD, guard)
        ssn.register(P.RECLAIM_GUARD, guard)
        ssn.register(P.EVICTABLE, self.evictable)

    @staticmethod
    def evictable(ctx: EvictionContext, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        """Gang eviction: the same protection (Volcano's conformance UnifiedEvictableFn)."""
        return [t for t in candidates if not is_critical(t)]
