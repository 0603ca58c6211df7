"""Layer `sim`: ResourceQuotas in the in-memory cluster, with the quota controller's status.

A workload may list ResourceQuota manifests (core/v1) beside its Jobs. The scheduler reads a quota's status, as
Volcano's cache does (api/quota.py), and in a real cluster kube-controller-manager's quota controller writes it.
Here the simulator stands in for that controller, each cycle: `status.hard` is `spec.hard`, and `status.used` the
usage of the namespace's pods that are not Succeeded or Failed (Pending ones included, as Kubernetes counts every
pod that exists), per pod the names Kubernetes' pod evaluator gives (`pods`, `count/pods`, `cpu` and
`requests.cpu`, `limits.cpu`, ...: jobs/expand.py `quota_usage`). A manifest that gives `status.hard` keeps its
status as written, for every cycle. The simulator does not refuse pods over a quota (the apiserver's quota
admission, which the real scheduler leaves to the apiserver).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.api.convert import key_of
from scheduler.api.fields import FieldError
from scheduler.api.objects import MutableObj
from scheduler.api.quota import ResourceQuotaInfo, quota_from_object, to_nano
from scheduler.api.resources import pod_request
from scheduler.jobs.expand import quota_usage, sum_limits

TERMINAL = ("Succeeded", "Failed")


def quota_problem(manifest: Mapping[str, Any]) -> str:
    """Why the scheduler could not read this quota ("" when it can): spec.hard is read as status.hard would be."""
    status = manifest.get("status")
    if isinstance(status, Mapping) and status.get("hard") is not None:
        probe: Mapping[str, Any] = manifest
    else:
        probe = {"metadata": manifest.get("metadata"), "status": {"hard": _spec_hard(manifest)}}
    try:
        quota_from_object(probe)
    except FieldError as exc:
        return str(exc)
    return ""


def _spec_hard(manifest: Mapping[str, Any]) -> Any:
    spec = manifest.get("spec")
    return (spec.get("hard") if isinstance(spec, Mapping) else spec) or {}


def pod_usage(pod: Mapping[str, Any]) -> dict[str, int]:
    """One pod's quota usage by name, in nano-units (Kubernetes' PodUsageFunc, as Volcano's job controller
    writes it into minResources); nothing for a pod that has finished."""
    if (pod.get("status") or {}).get("phase") in TERMINAL:
        return {}
    spec = pod.get("spec") or {}
    usage = quota_usage(pod_request(spec), sum_limits([spec]), 1)
    return {name: to_nano(amount, name) for name, amount in usage.items()}


@dataclass(slots=True)
class SimQuotas:
    manifests: dict[str, MutableObj] = field(default_factory=dict)  # by namespace/name

    def add(self, quota: Mapping[str, Any]) -> str:
        manifest = copy.deepcopy(dict(quota))
        meta = manifest.get("metadata")
        manifest["metadata"] = {"namespace": "default", **(meta if isinstance(meta, Mapping) else {})}
        problem = quota_problem(manifest)
        if problem:
            raise ValueError(f"ResourceQuota: {problem}")
        key = key_of(manifest)
        self.manifests[key] = manifest
        return key

    def infos(self, pods: Iterable[Mapping[str, Any]]) -> tuple[ResourceQuotaInfo, ...]:
        """Every quota's status as the quota controller would have written it by now."""
        namespaces = {m["metadata"]["namespace"] for m in self.manifests.values()}
        used: dict[str, dict[str, int]] = {ns: {} for ns in namespaces}
        for pod in pods:
            totals = used.get((pod.get("metadata") or {}).get("namespace", "default"))
            if totals is None:
                continue
            for name, amount in pod_usage(pod).items():
                totals[name] = totals.get(name, 0) + amount
        out = []
        for manifest in self.manifests.values():
            status = manifest.get("status")
            if isinstance(status, Mapping) and status.get("hard") is not None:
                out.append(quota_from_object(manifest))
                continue
            info = quota_from_object({"metadata": manifest["metadata"], "status": {"hard": _spec_hard(manifest)}})
            namespace_used = used[info.namespace]
            counted = {name: namespace_used.get(name, 0) for name in info.hard}  # the controller lists hard's names
            out.append(ResourceQuotaInfo(info.namespace, info.name, info.hard, counted))
        return tuple(out)
