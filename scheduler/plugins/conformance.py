"""Layer `plugins`: `conformance` never offers critical pods (`victims.is_critical`) as preemption or reclaim
victims."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.api.job import TaskInfo
from scheduler.framework.conf_args import NoArgs
from scheduler.framework.evictable import EvictionContext
from scheduler.framework.plugin import Plugin
from scheduler.framework.victims import is_critical


class ConformancePlugin(Plugin[NoArgs]):
    name = "conformance"

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return [t for t in candidates if not is_critical(t)]

    def reclaimable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        return [t for t in candidates if not is_critical(t)]

    def preempt_guard(self, candidates: Sequence[TaskInfo], preemptor: TaskInfo) -> list[TaskInfo]:
        return [t for t in candidates if not is_critical(t)]

    def reclaim_guard(self, candidates: Sequence[TaskInfo], preemptor: TaskInfo) -> list[TaskInfo]:
        return [t for t in candidates if not is_critical(t)]

    @staticmethod
    def evictable(ctx: EvictionContext, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        """Gang eviction: the same protection (Volcano's conformance UnifiedEvictableFn)."""
        return [t for t in candidates if not is_critical(t)]
