"""PersistentVolume, PersistentVolumeClaim and StorageClass manifests from a few keywords, for the volume tests."""

from __future__ import annotations

from typing import Any

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
WFFC = "WaitForFirstConsumer"


def volume(
    name: str,
    *,
    storage_class: str = "local",
    size: str = "10Gi",
    node: str | None = None,
    zone: str | None = None,
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    labels: dict[str, str] | None = None,
    claim: str | None = None,
) -> dict[str, Any]:
    """A PersistentVolume; `node` pins it to one node (a local volume's node affinity), `zone` labels its zone."""
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {
            "storageClassName": storage_class,
            "capacity": {"storage": size},
            "accessModes": list(modes),
            "hostPath": {"path": f"/tmp/{name}"},
        },
        "status": {"phase": "Available"},
    }
    if node:
        obj["spec"]["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}]
            }
        }
    if zone:
        obj["metadata"]["labels"][ZONE] = zone
    if claim:
        namespace, claim_name = claim.split("/")
        obj["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": namespace, "name": claim_name}
        obj["status"]["phase"] = "Bound"
    return obj


def claim(
    name: str,
    *,
    storage_class: str | None = "local",
    size: str = "5Gi",
    bound_to: str | None = None,
    namespace: str = "default",
    modes: tuple[str, ...] = ("ReadWriteOnce",),
) -> dict[str, Any]:
    """A PersistentVolumeClaim, pending, or bound to `bound_to` as the PV controller leaves a bound one."""
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"accessModes": list(modes), "resources": {"requests": {"storage": size}}},
        "status": {"phase": "Pending"},
    }
    if storage_class is not None:
        obj["spec"]["storageClassName"] = storage_class
    if bound_to:
        obj["spec"]["volumeName"] = bound_to
        obj["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
        obj["status"]["phase"] = "Bound"
    return obj


def storage_class(
    name: str = "local", *, mode: str = WFFC, provisioner: str = NO_PROVISIONER, zones: tuple[str, ...] = ()
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }
    if zones:
        obj["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": list(zones)}]}]
    return obj
