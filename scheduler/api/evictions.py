"""Layer `api`: an eviction's cause as the cluster keeps it, and the eviction notice's annotations.

The cause (`snapshot.EvictCause`: the action, the job room is made for, the rule, whether the victim's gang is
broken) travels as one small JSON object, written by the evictor (cache/evictor.py) as an annotation on the
events it records and on a victim given notice, and read back by `volcano-py explain` (ctl/explain.py) and the
simulator's report. `read_cause` parses it once, bounded: anything else reads as None.

The notice (docs/preemption.md): a Queue annotated `volcano-py.io/eviction-notice: <duration>` has its pods
annotated `scheduling.volcano-py.io/eviction-notice: <RFC 3339 deadline>` (and the cause) when they are chosen as
victims, and deleted once the deadline passed. The annotation on the pod is the state: a restarted scheduler
finds the deadline there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from scheduler.api.snapshot import EvictCause

QUEUE_NOTICE: Final = "volcano-py.io/eviction-notice"  # on a Queue: a Go duration (or seconds), at most NOTICE_MAX
NOTICE_MAX: Final = 3600.0  # an hour: a checkpoint takes minutes; longer holds the preemptor too long
POD_NOTICE: Final = "scheduling.volcano-py.io/eviction-notice"  # on the victim: the RFC 3339 deadline
POD_CAUSE: Final = "scheduling.volcano-py.io/eviction-cause"  # on the victim and on the events: the cause, JSON
EVENT_CAUSED: Final = "EvictedForJob"  # the Normal event on the preemptor's PodGroup naming each victim
MAX_TEXT: Final = 512
MAX_JSON: Final = 2048


def cause_json(cause: EvictCause, victim: str = "", job: str = "") -> str:
    """The cause (and the victim pod and its job, when known) as compact JSON."""
    out: dict[str, Any] = {"action": cause.action, "by": cause.by, "rule": cause.rule, "breaksGang": cause.breaks_gang}
    if victim:
        out["pod"] = victim
    if job:
        out["job"] = job
    return json.dumps(out, separators=(",", ":"), sort_keys=True)


def describe(cause: EvictCause) -> str:
    """The cause for people: `gangpreempt for ns/high, whole bundle, gang broken`."""
    broken = ", gang broken" if cause.breaks_gang else ""
    return f"{cause.action} for {cause.by}, {cause.rule}{broken}"


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and len(value) <= MAX_TEXT else None


def read_cause(text: object) -> tuple[EvictCause, str, str] | None:
    """(cause, victim pod key, victim job key) from `cause_json`'s text; None if it is not that (bounded)."""
    if not isinstance(text, str) or len(text) > MAX_JSON:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, Mapping):
        return None
    action, by, rule = _text(data.get("action")), _text(data.get("by")), _text(data.get("rule"))
    broken = data.get("breaksGang", False)
    pod, job = _text(data.get("pod", "")), _text(data.get("job", ""))
    if not action or by is None or rule is None or not isinstance(broken, bool) or pod is None or job is None:
        return None
    return EvictCause(action, by, rule, broken), pod, job
