"""Layer `dra`: what the binder writes on a ResourceClaim before the binds (`status.allocation` and
`status.reservedFor`, resource.k8s.io/v1), and what it writes to release them when a gang's plan is discarded.

Kubernetes' DynamicResources plugin writes both in its PreBind (pkg/scheduler/framework/plugins/
dynamicresources); the kubelet starts a pod only when its claims are allocated and reserved for it.
"""

from __future__ import annotations

from typing import Any

from scheduler.api.dra import Allocation, ClaimWrite, Consumer
from scheduler.api.selectors import NodeSelectorTerm, Requirement


def _requirement(r: Requirement) -> dict[str, Any]:
    out: dict[str, Any] = {"key": r.key, "operator": r.operator}
    if r.values:
        out["values"] = list(r.values)
    return out


def _term(t: NodeSelectorTerm) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if t.match_expressions:
        out["matchExpressions"] = [_requirement(r) for r in t.match_expressions]
    if t.match_fields:
        out["matchFields"] = [_requirement(r) for r in t.match_fields]
    return out


def allocation_json(allocation: Allocation) -> dict[str, Any]:
    results = []
    for r in allocation.results:
        item: dict[str, Any] = {"request": r.request, "driver": r.device.driver, "pool": r.device.pool,
                                "device": r.device.device}
        if r.admin_access:
            item["adminAccess"] = True
        results.append(item)
    out: dict[str, Any] = {"devices": {"results": results}}
    if allocation.node:
        out["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [allocation.node]}]}]}
    elif allocation.node_selector:
        out["nodeSelector"] = {"nodeSelectorTerms": [_term(t) for t in allocation.node_selector]}
    return out


def consumer_json(c: Consumer) -> dict[str, Any]:
    out = {"resource": c.resource, "name": c.name, "uid": c.uid}
    if c.api_group:
        out["apiGroup"] = c.api_group
    return out


def status_patch(write: ClaimWrite, reserved: tuple[Consumer, ...]) -> dict[str, Any]:
    """A merge patch of the claim's status: its allocation (when new) and `reserved` (the claim's consumers as
    read) plus the write's. reservedFor is replaced whole: a merge patch cannot append to a list."""
    status: dict[str, Any] = {"reservedFor": [consumer_json(c) for c in
                                              (*reserved, *(c for c in write.consumers if c not in reserved))]}
    if write.allocation is not None:
        status["allocation"] = allocation_json(write.allocation)
    return {"status": status}


def release_patch(write: ClaimWrite, reserved: tuple[Consumer, ...]) -> dict[str, Any]:
    """Undo `status_patch` for a discarded plan: the write's consumers leave reservedFor, and an allocation the
    write made is removed when nobody else holds the claim."""
    left = [consumer_json(c) for c in reserved if c not in write.consumers]
    status: dict[str, Any] = {"reservedFor": left or None}
    if write.allocation is not None and not left:
        status["allocation"] = None
    return {"status": status}
