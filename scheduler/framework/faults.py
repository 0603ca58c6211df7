"""Layer `framework`: one job's failure costs that job alone.

An exception raised while a plugin or an action handles one job is caught where the session hands out work job
by job, never at the call sites in between:

- the tier runner (`TierRunner.run`) turns an exception from a plugin's function into a `PluginFaultError` that names
  the plugin (the innermost run that saw it: a plugin calling the session, which asks another point, names the
  plugin that raised);
- each action's per-job loop, and a plugin's own per-job loop at open or close, runs the job's turn under
  `Faults.guard(job)`: on an exception the Statements opened in the turn are discarded (so no half-placed gang or
  half-evicted set is left behind), the job gets an `Error` Status (reason `PluginError`: the plugin, the action,
  the exception's type and message), it is left out of the rest of the cycle, logged once while the same fault
  repeats, and counted (`volcano_py_job_errors_total{plugin}`);
- the orderings (`order.py`) call a job (or queue) whose JobOrder (QueueOrder) raises faulted and order it last,
  so the heaps every action builds stay consistent for everybody else; a queue whose Overused raises is left out
  with all its jobs.

What cannot be tied to one job (a plugin's OnSessionOpen failing as a whole) still fails the cycle: the runner
counts consecutive failed cycles and liveness fails after a few (`cache/runner.py`).

kube-scheduler's framework does the same per pod: a plugin's error becomes the pod's `Error` status
(pkg/scheduler/framework/runtime/framework.go, `AsStatus(err)`), and the scheduling queue moves on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import ParamSpec, Protocol, TypeVar

from scheduler.api.decision import Code, Status
from scheduler.api.job import JobInfo
from scheduler.api.queue import QueueInfo
from scheduler.api.reasons import PluginError
from scheduler.framework.memo import CycleMemo

log = logging.getLogger("volcano_py.scheduler")

DETAIL_LIMIT = 200  # characters of the exception's message kept in the reason (a message can be a 1 MiB value)
JOB_ERRORS = "job_errors:"  # + the plugin: a CycleResult counter, exported as volcano_py_job_errors_total{plugin}
OPEN, CLOSE = "OnSessionOpen", "OnSessionClose"


Args = ParamSpec("Args")
R = TypeVar("R")
T = TypeVar("T")


def attempt(fn: Callable[Args, R], *args: Args.args, **kwargs: Args.kwargs) -> tuple[R | None, Exception | None]:
    """`fn(*args, **kwargs)` as (its result, None), or (None, the exception it raised).

    The one place the framework catches whatever a plugin's code raises; every guard above (the orderings, the
    event handlers, the undo of a Statement, a queue's Overused) asks through it and turns the exception into
    an Error status for the job or queue it belongs to. KeyboardInterrupt and SystemExit pass through.
    """
    try:
        return fn(*args, **kwargs), None
    except Exception as exc:  # noqa: BLE001 - the framework's one catch-all: the callers make it a Status
        return None, exc


def for_each(fn: Callable[[T], object], items: Iterable[T]) -> None:
    """`fn(item)` for every item, even when some raise: the first exception is raised once all have run."""
    first: Exception | None = None
    for item in items:
        _, exc = attempt(fn, item)
        first = first or exc
    if first is not None:
        raise first


class Sink(Protocol):
    """Where faults are written: the session's `ResultsCollector` (named here by what it does, since the tier
    runner, which this module serves, sits below it)."""

    def fault(self, job: JobInfo, status: Status) -> None: ...

    def faulted(self, job: JobInfo) -> bool: ...

    def count(self, counter: str) -> None: ...


class Undoable(Protocol):
    """A `Statement`, as the guard sees it."""

    def discard(self) -> None: ...


class PluginFaultError(Exception):
    """An exception from a plugin's function at an extension point, with the plugin named."""

    def __init__(self, plugin: str, error: BaseException) -> None:
        super().__init__(f"{plugin}: {type(error).__name__}: {error}")
        self.plugin = plugin
        self.error = error


def blame(exc: BaseException, modules: Mapping[str, str]) -> str | None:
    """The plugin whose code raised `exc`: the outermost frame of its traceback in a plugin's module."""
    tb = exc.__traceback__
    while tb is not None:
        plugin = modules.get(tb.tb_frame.f_globals.get("__name__", ""))
        if plugin is not None:
            return plugin
        tb = tb.tb_next
    return None


def detail(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= DETAIL_LIMIT else text[: DETAIL_LIMIT - 3] + "..."


class Faults:
    """The session's record of faulted jobs and queues, and the guard each per-job loop runs a turn under."""

    __slots__ = ("action", "_results", "_memo", "_modules", "_queue_jobs", "_queues", "_statements", "_depth",
                 "_logged")

    def __init__(self, results: Sink, memo: CycleMemo | None, modules: Mapping[str, str],
                 queue_jobs: Callable[[str], Iterable[JobInfo]]) -> None:
        self.action = OPEN  # the action (or OnSessionOpen / OnSessionClose) running now, named in the reason
        self._results = results
        self._memo = memo
        self._modules = modules  # plugin module -> the plugin's name, to blame an exception on its plugin
        self._queue_jobs = queue_jobs
        self._queues: set[str] = set()  # faulted queues
        self._statements: list[Undoable] = []  # opened during the current guarded turn
        self._depth = 0
        self._logged: dict[str, tuple[str, str, str]] = {}  # faults seen this cycle, for the memo at close

    # ---- asking ----------------------------------------------------------------------------------------
    def job_faulted(self, job: JobInfo) -> bool:
        return self._results.faulted(job)

    def queue_faulted(self, queue: QueueInfo) -> bool:
        return queue.name in self._queues

    # ---- recording -------------------------------------------------------------------------------------
    def status_for(self, exc: BaseException) -> Status:
        if isinstance(exc, PluginFaultError):
            plugin, error = exc.plugin, exc.error
        else:
            plugin, error = blame(exc, self._modules) or self.action, exc
        return Status(Code.ERROR, (PluginError(plugin, self.action, type(error).__name__, detail(error)),), plugin)

    def job(self, job: JobInfo, exc: BaseException) -> None:
        """`job` failed: it gets an Error Status and is left out of the rest of the cycle."""
        if self._results.faulted(job):
            return
        status = self.status_for(exc)
        self._results.fault(job, status)
        self._results.count(JOB_ERRORS + status.plugin)
        if self._memo is not None:
            self._memo.failures.pop(job.key, None)  # not "known to fail": it failed, it did not misfit
        self._log(job.key, f"job {job.key}", status, exc)

    def queue(self, queue: QueueInfo, exc: BaseException) -> None:
        """`queue` failed (its QueueOrder or Overused raised): it and every job in it are left out."""
        if queue.name in self._queues:
            return
        self._queues.add(queue.name)
        status = self.status_for(exc)
        for job in self._queue_jobs(queue.name):
            if not self._results.faulted(job):
                self._results.fault(job, status)
                self._results.count(JOB_ERRORS + status.plugin)
        self._log(f"queue/{queue.name}", f"queue {queue.name}", status, exc)

    def _log(self, key: str, what: str, status: Status, exc: BaseException) -> None:
        reason = status.reasons[0]
        assert isinstance(reason, PluginError)
        mark = (status.plugin, reason.action, reason.error)
        self._logged[key] = mark
        if self._memo is not None and self._memo.faults_logged.get(key) == mark:
            return  # the same fault as last cycle: logged once while it repeats, counted every time
        log.error("%s left out of this cycle: plugin %s failed in %s: %s: %s", what, status.plugin, reason.action,
                  reason.error, reason.detail, exc_info=exc if log.isEnabledFor(logging.DEBUG) else None)

    def close(self) -> None:
        """At session close: the memo keeps this cycle's faults, so the next cycle logs only new ones."""
        if self._memo is not None:
            self._memo.faults_logged = self._logged

    # ---- the guard ---------------------------------------------------------------------------------------
    def opened(self, statement: Undoable) -> None:
        """A Statement was opened: remembered while a guarded turn runs, to be discarded if the turn fails."""
        if self._depth:
            self._statements.append(statement)

    def guard(self, job: JobInfo) -> JobGuard:
        """`with faults.guard(job): ...` runs one job's turn: an exception in it faults `job` alone."""
        return JobGuard(self, job)

    def _enter(self) -> int:
        self._depth += 1
        return len(self._statements)

    def _exit(self, mark: int, job: JobInfo, exc: BaseException | None) -> None:
        self._depth -= 1
        if exc is not None:
            for statement in reversed(self._statements[mark:]):
                _, undo = attempt(statement.discard)  # the job is faulted already; keep undoing the rest
                if undo is not None:
                    log.error("discarding job %s's statement after its fault failed too: %s", job.key, undo)
            self.job(job, exc)
        del self._statements[mark:]


class JobGuard:
    __slots__ = ("_faults", "_job", "_mark")

    def __init__(self, faults: Faults, job: JobInfo) -> None:
        self._faults = faults
        self._job = job
        self._mark = 0

    def __enter__(self) -> None:
        self._mark = self._faults._enter()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        if exc is not None and not isinstance(exc, Exception):
            self._faults._exit(self._mark, self._job, None)  # KeyboardInterrupt, SystemExit: not the job's
            return False
        self._faults._exit(self._mark, self._job, exc)
        return exc is not None
