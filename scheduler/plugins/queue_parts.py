"""Layer `plugins`: each job's part in its queue's amounts, summed per queue, for the queue-share plugins.

A job's part is what it holds, what it asks (held plus its pending pods' requests), the minResources it is
admitted for and still lacks, and what it holds beyond its minResources (`shares.py`). `job_parts` keeps each
job's part and the sums per queue in the session's store (`framework/carry.py`): a session that follows the last
one works out the parts of the jobs that changed alone and corrects the sums by the difference. The amounts are
integers, so the sums are those of a pass over every job.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduler.api.job import JobInfo
from scheduler.api.resources import ZERO, Resource
from scheduler.framework.plugin import SessionAPI
from scheduler.plugins.shares import Part, elastic_of, reserved_by_admitted, without_pods

STORE = "queue-parts"


def job_parts(ssn: SessionAPI) -> dict[str, Part]:
    """Queue name -> the sum of its jobs' parts (a queue with no job: absent). Not to be changed: the plugins that
    ask in one session (proportion or capacity, overcommit) share it."""
    jobs, changes = ssn.jobs, ssn.changes
    kept = changes.store(STORE)  # (without a memo, the session's own: proportion and overcommit share it)
    parts: dict[str, tuple[str, Part]] | None = kept.get("parts")
    sums: dict[str, Part] | None = kept.get("sums")
    redo: set[str] | None = kept.get("redo")  # jobs whose part was not worked out from their state as read
    if sums is not None and kept.get("by") is changes and kept.get("marks") == len(changes.marked):
        return sums  # worked out already in this session, and no job's phase was set since
    if changes.since is None or parts is None or sums is None or redo is None:
        parts, sums = {}, {}
        for job in jobs.values():
            _add(parts, sums, job)
    else:
        # the parts that went and came, per queue, summed in one pass each (not a Resource per addition); a job
        # whose part is what it was (its PodGroup's status written, say) changes no sum
        went: dict[str, list[Part]] = {}
        came: dict[str, list[Part]] = {}
        for key in changes.since | redo:
            old = parts.pop(key, None)
            now = jobs.get(key)
            part = _part(now) if now is not None else None
            if old is not None and now is not None and old[0] == now.queue and old[1] == part:
                parts[key] = old
                continue
            if old is not None:
                went.setdefault(old[0], []).append(old[1])
            if now is not None and part is not None:
                parts[key] = (now.queue, part)
                came.setdefault(now.queue, []).append(part)
        for queue in went.keys() | came.keys():
            gone, new = went.get(queue, []), came.get(queue, [])
            b = sums.get(queue) or (ZERO, ZERO, ZERO, ZERO)
            sums[queue] = (_moved(b, gone, new, 0), _moved(b, gone, new, 1), _moved(b, gone, new, 2),
                           _moved(b, gone, new, 3))
    # A job whose phase or minAvailable was set before this plugin opened (the gang plugin's timeout): its part
    # is made again next session.
    redo = {key for key in changes.marked if key in parts}
    kept["parts"], kept["sums"], kept["redo"] = parts, sums, redo
    kept["by"], kept["marks"] = changes, len(changes.marked)
    return sums


def _moved(before: Part, gone: Iterable[Part], new: Iterable[Part], i: int) -> Resource:
    """The `i`th amount of a queue's sum with the parts `gone` taken off and the parts `new` added."""
    return before[i] - Resource.total(p[i] for p in gone) + Resource.total(p[i] for p in new)


def _part(job: JobInfo) -> Part:
    held = without_pods(job.allocated())
    # Every pending pod asks of its queue, whatever its PodGroup's phase (Volcano's proportion.go counts
    # TaskStatusIndex[Pending] of every job): a bare PodGroup's pods exist before it is admitted, a Volcano
    # Job's are created only after, so only the former weigh on the shares before enqueue.
    return (held, held + without_pods(job.pending_request()), reserved_by_admitted(job), elastic_of(job))


def _add(parts: dict[str, tuple[str, Part]], sums: dict[str, Part], job: JobInfo) -> None:
    part = _part(job)
    parts[job.key] = (job.queue, part)
    before = sums.get(job.queue)
    sums[job.queue] = part if before is None else (
        before[0] + part[0], before[1] + part[1], before[2] + part[2], before[3] + part[3])
