"""Layer `plugins`: `minruntime` — a running job is no victim before it has run its minimum runtime.

A rule beyond Volcano's (after KAI-Scheduler's minruntime plugin and Volcano's cdp), served at the victim filter
every evicting action asks last (`points.VICTIM_FILTER`: preempt, reclaim, gangpreempt, gangreclaim,
consolidate), whatever tier answered before it. Off unless the plugin is listed in the conf; listed without
arguments it protects only the jobs and queues that ask for it by annotation. A job's minimum runtime is, first found:

1. `volcano-py.io/min-runtime` on its pods (a Go duration; the largest over its pods), capped at `maxMinRuntime`;
2. its Queue's annotations (`api/min_runtime.py`, read at the edge; KAI-Scheduler's queue-level min-runtime):
   `volcano-py.io/reclaim-min-runtime` when another queue evicts (reclaim, gangreclaim),
   `volcano-py.io/preempt-min-runtime` when its own queue does (preempt, gangpreempt), else
   `volcano-py.io/min-runtime` (also the one for a consolidate move);
3. `queueMinRuntime[<its queue>]` (plugin argument: queue name -> Go duration);
4. `minRuntime` (plugin argument, a Go duration; default 0: none).

It runs from the job's start: the earliest `PodScheduled=True` time of its pods on nodes (their creation when no
pod says). While `now < start + minimum runtime`, none of the job's pods is a victim. A pod with Volcano's cdp
cooldown (`volcano.sh/cooldown-time`, parsed at the edge as the cdp plugin reads it) is also kept while its own
`PodScheduled` time plus the cooldown is after now (argument `cooldown: false` turns that source off).

Bounds: every duration is 0 .. 7 days (an argument outside them is a conf error); an annotation that Go cannot
read, or negative, is ignored with one log line, and one above `maxMinRuntime` (default 24h) is taken as it.
A Queue annotation is read at the edge with the same bounds (0s to 168h; `0s` is set and means none for that
queue); a bad one gives a `FieldInvalid` reason and one log line, and reads as not set. It is not capped by
`maxMinRuntime` (the Queue is the administrator's object, a pod the user's).
A preemptor that was refused victims this way is held with a `MinRuntimeProtected` reason (`api/reasons.py`), so
`volcano-py explain` and the simulator's report say which job was kept and for how long.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.api import reasons as R
from scheduler.api.decision import Code, Status
from scheduler.api.job import JobInfo, TaskInfo
from scheduler.api.min_runtime import MIN_RUNTIME_BOUND, NO_MIN_RUNTIME, QueueMinRuntime
from scheduler.api.phases import TaskStatus
from scheduler.durations import SECOND, DurationError, parse_go_duration
from scheduler.framework.conf_args import ArgReader
from scheduler.framework.evictable import EvictionContext, EvictionKind
from scheduler.framework.plugin import Plugin, SessionAPI

log = logging.getLogger("volcano_py.plugins.minruntime")

ANNOTATION = "volcano-py.io/min-runtime"
MIN_RUNTIME = "minRuntime"
QUEUE_MIN_RUNTIME = "queueMinRuntime"
MAX_MIN_RUNTIME = "maxMinRuntime"
COOLDOWN = "cooldown"
BOUND = MIN_RUNTIME_BOUND  # seconds (168h): no minimum runtime, argument or annotation, is longer
DEFAULT_MAX = 24 * 3600.0
ON_NODE = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.BINDING, TaskStatus.ALLOCATED})
# Which of a queue's settings an eviction reads: inside the queue, by another queue, or a move (consolidate).
IN_QUEUE, CROSS_QUEUE, MOVE = "preempt", "reclaim", "move"
FAMILIES = (IN_QUEUE, CROSS_QUEUE, MOVE)
_logged: set[tuple[str, str]] = set()  # (job, value) already logged as unreadable: one line each
_LOGGED_MAX = 10_000


@dataclass(frozen=True, slots=True)
class MinRuntimeArgs:
    default: float = 0.0  # seconds
    queues: Mapping[str, float] = field(default_factory=dict)
    maximum: float = DEFAULT_MAX
    cooldown: bool = True


@dataclass(frozen=True, slots=True)
class Protection:
    until: float  # seconds since the epoch
    minimum: float
    source: str


def annotated(task: TaskInfo) -> float | None:
    """The pod's `volcano-py.io/min-runtime` in seconds; None if absent; -1.0 if unreadable or negative."""
    value = task.annotations.get(ANNOTATION) if task.annotations else None
    if value is None:
        return None
    try:
        seconds = parse_go_duration(value.strip()) / SECOND if len(value) <= 64 else -1.0
    except DurationError:
        return -1.0
    return seconds if seconds >= 0 else -1.0


def _log_once(job: JobInfo, task: TaskInfo) -> None:
    """One log line per job and value that cannot be read (not one per pod, nor one per cycle)."""
    value = str(task.annotations.get(ANNOTATION, ""))[:64]
    if (job.key, value) in _logged or len(_logged) >= _LOGGED_MAX:
        return
    _logged.add((job.key, value))
    log.warning("job %s: pod annotation %s=%r is not a duration of 0 or more (such as 10m); ignored", job.key,
                ANNOTATION, value)


class MinRuntimePlugin(Plugin[MinRuntimeArgs]):
    name = "minruntime"

    @classmethod
    def parse_args(cls, reader: ArgReader) -> MinRuntimeArgs:
        raw_default, raw_max = reader.raw(MIN_RUNTIME), reader.raw(MAX_MIN_RUNTIME)
        default = 0.0 if raw_default is None else reader.duration(MIN_RUNTIME, raw_default, BOUND)
        maximum = DEFAULT_MAX if raw_max is None else reader.duration(MAX_MIN_RUNTIME, raw_max, BOUND)
        raw_queues = reader.raw(QUEUE_MIN_RUNTIME)
        if raw_queues is not None and not isinstance(raw_queues, Mapping):
            raise reader.fail(QUEUE_MIN_RUNTIME, "a map of queue name to duration")
        queues = {str(q): reader.duration(QUEUE_MIN_RUNTIME, v, BOUND) for q, v in (raw_queues or {}).items()}
        return MinRuntimeArgs(default, queues, maximum, reader.boolean(COOLDOWN, True))

    def on_session_open(self, ssn: SessionAPI) -> None:
        self.ssn = ssn
        self.now = ssn.now
        # job -> why it is kept from every eviction now; or, for a job whose queue's annotations tell the eviction
        # families apart (and whose pods ask nothing), job -> family -> why
        self.protected: dict[str, Protection] = {}
        self.by_family: dict[str, dict[str, Protection]] = {}
        for job in ssn.jobs.values():
            self._protect(job)

    def inactive_points(self) -> frozenset[str]:
        if self.protected or self.by_family or self.args.cooldown:
            return frozenset()
        return frozenset({"victim_filter"})

    def _asked(self, job: JobInfo, on_node: Sequence[TaskInfo]) -> float | None:
        """The job's own minimum (its pods' annotation, the largest, capped); None if none asks."""
        read = [(t, annotated(t)) for t in on_node]
        bad = next((t for t, s in read if s is not None and s < 0), None)
        if bad is not None:
            _log_once(job, bad)
        asked = [s for _, s in read if s is not None and s >= 0]
        return min(max(asked), self.args.maximum) if asked else None

    def _resolve(self, job: JobInfo, asked: float | None, own: QueueMinRuntime, family: str) -> tuple[float, str]:
        """job > queue (its annotation `own`, then the plugin's queueMinRuntime) > the plugin's default."""
        if asked is not None:
            return asked, R.MIN_RUNTIME_JOB
        if own.is_set:
            minimum = own.for_eviction(cross_queue=family == CROSS_QUEUE, moving=family == MOVE)
            if minimum is not None:
                return minimum, R.MIN_RUNTIME_QUEUE_ANNOTATION
        configured = self.args.queues.get(job.queue)
        if configured is not None:
            return configured, R.MIN_RUNTIME_QUEUE
        return self.args.default, R.MIN_RUNTIME_DEFAULT

    def _protect(self, job: JobInfo) -> None:
        """Note each eviction family the job is kept from now, and why. The families differ only through the
        annotations of the job's queue, and only when no pod asks: otherwise one answer holds for all (the cost of
        a job of a queue without them is one lookup)."""
        on_node = [t for t in job.tasks.values() if t.status in ON_NODE]
        if not on_node:
            return
        asked = self._asked(job, on_node)
        start = min(t.scheduled_at if t.scheduled_at is not None else t.creation for t in on_node)
        queue = self.ssn.queues.get(job.queue)
        own = queue.min_runtime if queue is not None else NO_MIN_RUNTIME
        if asked is None and own.is_set:
            kept = {}
            for family in FAMILIES:
                minimum, source = self._resolve(job, asked, own, family)
                if minimum > 0 and start + minimum > self.now:
                    kept[family] = Protection(start + minimum, minimum, source)
            if kept:
                self.by_family[job.key] = kept
            return
        minimum, source = self._resolve(job, asked, NO_MIN_RUNTIME, IN_QUEUE)
        if minimum > 0 and start + minimum > self.now:
            self.protected[job.key] = Protection(start + minimum, minimum, source)

    def _kept(self, task: TaskInfo, family: str) -> Protection | None:
        """Why `task` is no victim of an eviction of `family` now (None: it may go)."""
        found = self.protected.get(task.job)
        if found is None and self.by_family:
            found = self.by_family.get(task.job, {}).get(family)
        if found is not None:
            return found
        if (self.args.cooldown and task.cooldown is not None and task.cooldown > 0 and task.scheduled_at is not None
                and task.scheduled_at + task.cooldown > self.now):
            return Protection(task.scheduled_at + task.cooldown, task.cooldown, R.MIN_RUNTIME_COOLDOWN)
        return None

    def victim_filter(self, ctx: EvictionContext, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        kept: list[TaskInfo] = []
        spared: dict[str, Protection] = {}
        family = family_of(ctx.kind)
        for task in candidates:
            protection = self._kept(task, family)
            if protection is None:
                kept.append(task)
            elif task.job not in spared or protection.until < spared[task.job].until:
                spared[task.job] = protection
        if spared:
            self._tell(ctx.job, spared)
        return kept

    def _tell(self, preemptor: JobInfo, spared: dict[str, Protection]) -> None:
        first_job, first = min(spared.items(), key=lambda kv: (kv[1].until, kv[0]))
        reason = R.MinRuntimeProtected(len(spared), first_job, round(first.until - self.now, 3),
                                       round(first.minimum, 3), first.source)
        self.ssn.hold(preemptor, Status(Code.UNSCHEDULABLE, (reason,), self.name))
        self.ssn.look_again(first.until)  # a replay that skips idle time comes back when the first one may go
        if self.ssn.trace is not None:
            self.ssn.trace(f"minruntime: {preemptor.key} may not evict {', '.join(sorted(spared))}: within their "
                           "minimum runtime")


def family_of(kind: EvictionKind) -> str:
    """Which of a queue's settings an eviction of `kind` reads (api/min_runtime.py)."""
    if kind == EvictionKind.CONSOLIDATE:
        return MOVE
    return CROSS_QUEUE if kind.cross_queue else IN_QUEUE
