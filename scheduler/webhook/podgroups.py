"""Layer `webhook`: `/podgroups/validate`, as Volcano's (pkg/webhooks/admission/podgroups/validate/
validate_podgroup.go validatePodGroup).

On CREATE a PodGroup is refused when its queue (if it names one) does not exist or is Closed or Closing (as
for Jobs, `webhook/admission.py`: Volcano also refuses a queue not yet Open), and when its
`networkTopology`, or a `subGroupPolicy` entry's, sets both `highestTierAllowed` and `highestTierName`
(`scheduler.jobs.tier_fields`). Each problem names its field. Every other operation is allowed: Volcano registers
this path for CREATE only, and the scheduler's own status writes must never be refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.jobs.tier_fields import podgroup_tier_problems
from scheduler.webhook.admission import ALLOW, REFUSED_QUEUE_STATES, Decision, Queues, refuse, response

Obj = Mapping[str, Any]


def admit_podgroup(operation: str, podgroup: Obj, queues: Queues) -> Decision:
    if operation != "CREATE":
        return ALLOW
    spec = podgroup.get("spec") if isinstance(podgroup.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    problems = []
    name = spec.get("queue")
    if isinstance(name, str) and name:
        queue = queues.get(name)
        state = str(((queue or {}).get("status") or {}).get("state") or "")
        if queue is None:
            problems.append(f"spec.queue: queue {name!r} does not exist")
        elif state in REFUSED_QUEUE_STATES:  # as for Jobs: a queue just created, not yet Open, is taken
            problems.append(f"spec.queue: queue {name!r} is {state}; a PodGroup can be submitted only to an "
                            "Open queue")
    return refuse([*problems, *podgroup_tier_problems(spec)])


def review_podgroup(review: Obj, queues: Queues) -> dict[str, Any]:
    request = review.get("request") or {}
    podgroup = request.get("object") or {}
    return response(review, admit_podgroup(str(request.get("operation", "")), podgroup, queues))
