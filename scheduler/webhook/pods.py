"""Layer `webhook`: `/pods/mutate`, Volcano's pod defaults (pkg/webhooks/admission/pods/mutate/mutate_pod.go).

With the feature gate SchedulingGatesQueueAdmission, a pod created with the annotation
`scheduling.volcano.sh/queue-allocation-gate: "true"` gets the scheduling gate of that name (`patchSchedulingGates`):
the pod stays SchedulingGated, out of a cluster autoscaler's sight, until the scheduler finds room for it in its
queue and removes the gate. Any pod, whatever its schedulerName, as Volcano's webhook (its configuration selects
pods by namespace only). The gate is appended after those the pod has, never twice. Without the feature gate, or
on another operation, the pod is allowed unchanged.

Volcano adds the gate only when its webhook manager was started with a readable `--admission-conf` (its chart
always passes one); volcano-py has no admission configuration and does not need one (CONFORMANCE.md).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from scheduler.api.fields import QUEUE_ALLOCATION_GATE
from scheduler.webhook.admission import ALLOW, response

Obj = Mapping[str, Any]


def gate_patch(pod: Obj) -> list[dict[str, Any]]:
    """The JSON Patch that adds the queue-allocation gate to an opted-in pod; empty if it does not opt in (the
    annotation is exactly "true") or already has the gate."""
    meta = pod.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(annotations, Mapping) or annotations.get(QUEUE_ALLOCATION_GATE) != "true":
        return []
    spec = pod.get("spec")
    gates = spec.get("schedulingGates") if isinstance(spec, Mapping) else None
    gate = {"name": QUEUE_ALLOCATION_GATE}
    if not isinstance(gates, list):
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [gate]}]
    if any(isinstance(g, Mapping) and g.get("name") == QUEUE_ALLOCATION_GATE for g in gates):
        return []
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": gate}]


def review_pod(review: Obj, queue_allocation_gate: bool) -> dict[str, Any]:
    """`/pods/mutate`: allowed; on CREATE with the feature gate on, with the gate as a JSON Patch if it adds one."""
    request = review.get("request")
    request = request if isinstance(request, Mapping) else {}
    answer = response(review, ALLOW)
    pod = request.get("object")
    if queue_allocation_gate and request.get("operation") == "CREATE" and isinstance(pod, Mapping):
        patch = gate_patch(pod)
        if patch:
            answer["response"]["patchType"] = "JSONPatch"
            answer["response"]["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return answer
