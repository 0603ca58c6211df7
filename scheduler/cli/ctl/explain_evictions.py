"""Layer `ctl`: the evictions `volcano-py explain` shows for a job, from the events the scheduler records.

The evictor (cache/evictor.py) puts each eviction's cause as JSON in the annotation
`scheduling.volcano-py.io/eviction-cause` (api/evictions.py) of the Warning `Evict` event on each victim pod and of
the Normal `EvictedForJob` event on the PodGroup the room was made for. Read back here, bounded: an event without a
readable cause is not shown. Kubernetes keeps events an hour by default: older evictions are gone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler.api.evictions import EVENT_CAUSED, POD_CAUSE, describe, read_cause
from scheduler.api.objects import Obj
from scheduler.api.snapshot import EvictCause


@dataclass(frozen=True, slots=True)
class EvictionSeen:
    """One eviction the job suffered (`caused` False: its pod `pod` was evicted for `cause.by`) or caused (`caused`
    True: pod `pod` of job `job` was evicted for it)."""

    time: str
    caused: bool
    pod: str
    job: str
    action: str
    by: str
    rule: str
    breaks_gang: bool


def _stamp(event: Obj) -> str:
    meta = event.get("metadata")
    stamp = event.get("lastTimestamp") or event.get("eventTime") or (
        meta.get("creationTimestamp") if isinstance(meta, Mapping) else None)
    return stamp[:64] if isinstance(stamp, str) else ""


def evictions_seen(key: str, pod_events: Sequence[Obj], podgroup_events: Sequence[Obj]) -> tuple[EvictionSeen, ...]:
    """The evictions the PodGroup `key` (namespace/name) suffered (from the `Evict` events on pods) and caused
    (from the `EvictedForJob` events on it), oldest first, read from the events' cause annotation."""
    out: list[EvictionSeen] = []
    for events, caused in ((pod_events, False), (podgroup_events, True)):
        for event in events:
            if event.get("reason") != (EVENT_CAUSED if caused else "Evict"):
                continue
            meta = event.get("metadata")
            annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
            read = read_cause(annotations.get(POD_CAUSE) if isinstance(annotations, Mapping) else None)
            if read is None:
                continue
            cause, pod, job = read
            if (cause.by if caused else job) != key:
                continue
            out.append(EvictionSeen(_stamp(event), caused, pod, job, cause.action, cause.by, cause.rule,
                                    cause.breaks_gang))
    return tuple(sorted(dict.fromkeys(out), key=lambda e: (e.time, e.caused, e.pod)))


def eviction_line(e: EvictionSeen) -> str:
    said = describe(EvictCause(e.action, e.by, e.rule, e.breaks_gang))
    if e.caused:
        return f"evicted for it: {e.time or '-'} pod {e.pod} of {e.job or '-'} ({said})"
    return f"evicted:  {e.time or '-'} pod {e.pod} ({said})"
