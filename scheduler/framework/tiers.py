"""Layer `framework`: the tier runner — what plugins registered at each extension point, tier by tier, and the
hooks they asked for.

`run(point, ...)` is the only loop over tiers: the point's combiner (`points.py`) folds the registered functions
into one answer. Event handlers hear each placement a Statement makes or takes back; job-enqueued hooks hear
each job the enqueue action admits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ParamSpec, TypeVar, cast

from scheduler.api.job import JobInfo, TaskInfo
from scheduler.framework import points as P
from scheduler.framework.conf import PluginOption
from scheduler.framework.faults import PluginFaultError, blame, for_each

F = TypeVar("F")
R = TypeVar("R")
A = ParamSpec("A")


@dataclass(frozen=True, slots=True)
class EventHandler:
    """Called when a Statement places a task (allocate/pipeline) or takes it back (discard/evict)."""

    allocate: Callable[[TaskInfo], None] | None = None
    deallocate: Callable[[TaskInfo], None] | None = None
    # Optional: the effect of `allocate` for each of the tasks, in order; they are one job's, with one request (a
    # bulk run's tasks on one node). A handler that gives it says that nothing allocate asks while it places a run
    # of a gang's identical tasks (JobReady, scores, predicates) reads what the handler keeps, so the bulk placer
    # may tell it of a node's tasks once they are all placed (`actions/bulk.py`).
    allocate_many: Callable[[Sequence[TaskInfo]], None] | None = None


class TierRunner:
    def __init__(self) -> None:
        self._fns: dict[str, list[list[object]]] = {p.name: [] for p in P.ALL_POINTS}
        self._handlers: list[EventHandler] = []
        # the handlers' allocate and deallocate functions, kept as they are added: told of every placement
        self._allocates: list[Callable[[TaskInfo], None]] = []
        self._deallocates: list[Callable[[TaskInfo], None]] = []
        self._enqueued: list[Callable[[JobInfo], None]] = []
        # plugin module -> plugin name, to name the plugin an exception came from (the session fills it)
        self.plugin_modules: dict[str, str] = {}

    def register(self, point: P.Point[F, A, R], fn: F, *, tier: int, option: PluginOption) -> None:
        """Add a plugin's function to `tier`; honours the plugin's enableXxx switch for the point, and has the
        plugin's Statuses name it."""
        if point.switch is not None and not option.enabled(point.switch):
            return
        if point.stamp is not None:
            fn = point.stamp(fn, option.name)
        tiers = self._fns[point.name]
        while len(tiers) <= tier:
            tiers.append([])
        tiers[tier].append(fn)

    def run(self, point: P.Point[F, A, R], *args: A.args, **kwargs: A.kwargs) -> R:
        """The point's answer; an exception from a plugin's function comes out as a `PluginFaultError` naming the
        plugin, for the per-job guard that is running the turn (`faults.py`). (A `try` costs nothing until
        something raises.)"""
        try:
            return point.combine(self._tiers_of(point), *args, **kwargs)
        except PluginFaultError:
            raise
        except Exception as exc:
            raise PluginFaultError(blame(exc, self.plugin_modules) or point.name, exc) from exc

    def runner(self, point: P.Point[F, A, R]) -> Callable[A, R]:
        """`run` for one point, looked up once: for a loop that asks the same point thousands of times."""
        fns, combine, modules = self._tiers_of(point), point.combine, self.plugin_modules

        def run(*args: A.args, **kwargs: A.kwargs) -> R:
            try:
                return combine(fns, *args, **kwargs)
            except PluginFaultError:
                raise
            except Exception as exc:
                raise PluginFaultError(blame(exc, modules) or point.name, exc) from exc

        return run

    def _tiers_of(self, point: P.Point[F, A, R]) -> list[list[F]]:
        """What plugins serve `point`, tier by tier: the methods registered with it, so of its type F."""
        return cast("list[list[F]]", self._fns[point.name])

    def has(self, point: P.Point[F, A, R]) -> bool:
        return any(self._fns[point.name])

    def functions(self, point: P.Point[F, A, R]) -> list[F]:
        """The functions registered at `point`, in tier order."""
        return [fn for tier in self._tiers_of(point) for fn in tier]

    def add_event_handler(self, handler: EventHandler) -> None:
        self._handlers.append(handler)
        if handler.allocate:
            self._allocates.append(handler.allocate)
        if handler.deallocate:
            self._deallocates.append(handler.deallocate)

    def allocated(self, task: TaskInfo) -> None:
        """Tell the event handlers a Statement placed `task` (or gave it back its place)."""
        for_each(lambda allocate: allocate(task), self._allocates)

    def allocated_many(self, tasks: Sequence[TaskInfo]) -> None:
        """`allocated` for each of `tasks` (one job's, with one request), each handler told of all of them at once
        where it can be."""
        def tell(handler: EventHandler) -> None:
            if handler.allocate_many:
                handler.allocate_many(tasks)
            elif handler.allocate:
                for task in tasks:
                    handler.allocate(task)

        for_each(tell, self._handlers)

    def handlers_batched(self) -> bool:
        """Whether every handler that hears placements may hear a run of them at once (`allocate_many`)."""
        return all(h.allocate is None or h.allocate_many is not None for h in self._handlers)

    def deallocated(self, task: TaskInfo) -> None:
        """Tell the event handlers a Statement took `task` off its node (or marked it releasing).

        Every handler hears every placement and every removal, even when one of them raises (the first error
        is raised after all have heard): a handler that missed a placement would count the job's queue short
        once the failed job's statement is discarded, and so hurt the other jobs of that queue."""
        for_each(lambda deallocate: deallocate(task), self._deallocates)

    def on_job_enqueued(self, fn: Callable[[JobInfo], None]) -> None:
        self._enqueued.append(fn)

    def job_enqueued(self, job: JobInfo) -> None:
        for fn in self._enqueued:
            fn(job)
