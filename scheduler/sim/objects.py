"""Layer `sim`: Kubernetes-shaped Node and Pod objects from a few keywords (simulator input and tests)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.api.convert import key_of
from scheduler.api.objects import MutableObj
from scheduler.api.pod import GROUP_NAME_ANNOTATION, TASK_SPEC_KEY

DEFAULT_GRACE = 30.0  # seconds: Kubernetes' default terminationGracePeriodSeconds
MAX_GRACE = 86_400  # a day: a larger value is refused when the pod is added

STANDARD_LABELS = {
    "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
    "beta.kubernetes.io/arch": "amd64",
}


def node_object(
    name: str,
    *,
    cpu: str | int = "64",
    memory: str = "512Gi",
    gpu: int | str = 0,
    pods: int = 110,
    ephemeral_storage: str = "200Gi",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
    ready: bool = True,
    extra: Mapping[str, Any] | None = None,
) -> MutableObj:
    # Every kubelet reports ephemeral-storage and the standard os/arch/hostname labels; Volcano's examples
    # ask for both (`ephemeral-storage` requests, `nodeSelector: {kubernetes.io/os: linux}`).
    allocatable: dict[str, Any] = {
        "cpu": str(cpu), "memory": memory, "pods": str(pods), "ephemeral-storage": ephemeral_storage,
    }
    if gpu:
        allocatable["nvidia.com/gpu"] = str(gpu)
    allocatable.update(extra or {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {**STANDARD_LABELS, "kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": [dict(t) for t in taints], "unschedulable": unschedulable},
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod_object(
    name: str,
    *,
    namespace: str = "default",
    group: str | None = None,
    role: str = "",
    gpu: int | str = 0,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    limits_only: bool = False,
    priority_class: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, str]] = (),
    affinity: Mapping[str, Any] | None = None,
    scheduler_name: str = "volcano-py",
    claims: Sequence[str] = (),
) -> MutableObj:
    quantities: dict[str, Any] = {}
    if cpu:
        quantities["cpu"] = cpu
    if memory:
        quantities["memory"] = memory
    if gpu:
        quantities["nvidia.com/gpu"] = str(gpu)
    resources = {"limits": quantities} if limits_only else {"requests": quantities}
    annotations: dict[str, str] = {}
    labels: dict[str, str] = {}
    if group:
        annotations[GROUP_NAME_ANNOTATION] = group
    if role:
        annotations[TASK_SPEC_KEY] = role
        labels[TASK_SPEC_KEY] = role
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "containers": [{"name": "main", "image": "busybox", "resources": resources if quantities else {}}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if affinity:
        spec["affinity"] = dict(affinity)
    if claims:  # PersistentVolumeClaims by name, as volumes (mounted nowhere: the scheduler reads only the claims)
        spec["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations, "labels": labels},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def merge_annotations(manifest: dict[str, Any], patch: Mapping[str, str | None]) -> None:
    """A merge patch of `metadata.annotations`, as the apiserver applies it (None removes the key)."""
    annotations = manifest.setdefault("metadata", {}).setdefault("annotations", {})
    for key, value in patch.items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value


def grace_of(pod: MutableObj) -> float:
    """The pod's `terminationGracePeriodSeconds` (Kubernetes' 30 when absent), bounded."""
    value = pod["spec"].get("terminationGracePeriodSeconds")
    if value is None:
        return DEFAULT_GRACE
    if type(value) is not int or not 0 <= value <= MAX_GRACE:
        raise ValueError(f"pod {key_of(pod)}: spec.terminationGracePeriodSeconds: expected an integer in "
                         f"[0, {MAX_GRACE}], got {value!r}")
    return float(value)
