"""resource.k8s.io/v1 objects as the apiserver serves them, for the DRA tests (plain dicts)."""

from __future__ import annotations

from typing import Any

DRIVER = "gpu.example.com"


def device(name: str, **attrs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "attributes": {}, "capacity": {}}
    for key, value in attrs.items():
        if key == "memory":
            out["capacity"]["memory"] = {"value": value}
        elif isinstance(value, bool):
            out["attributes"][key] = {"bool": value}
        elif isinstance(value, int):
            out["attributes"][key] = {"int": value}
        else:
            out["attributes"][key] = {"string": value}
    return out


def slice_(name: str, node: str, devices: list[dict[str, Any]], *, pool: str = "", all_nodes: bool = False,
           driver: str = DRIVER) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": driver, "pool": {"name": pool or node or name, "generation": 1,
                                                       "resourceSliceCount": 1}, "devices": devices}
    if all_nodes:
        spec["allNodes"] = True
    else:
        spec["nodeName"] = node
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def device_class(name: str, *selectors: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": s}} for s in selectors]}}


def request(name: str, cls: str, *selectors: str, count: int | None = None, mode: str | None = None,
            admin: bool = False) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if count is not None:
        exactly["count"] = count
    if mode is not None:
        exactly["allocationMode"] = mode
    if admin:
        exactly["adminAccess"] = True
    return {"name": name, "exactly": exactly}


def claim_spec(*requests: dict[str, Any], match: list[tuple[str, list[str]]] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if match:
        devices["constraints"] = [{"matchAttribute": a, **({"requests": r} if r else {})} for a, r in match]
    return {"devices": devices}


def claim(name: str, *requests: dict[str, Any], namespace: str = "default", uid: str = "",
          match: list[tuple[str, list[str]]] | None = None, status: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                           "metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}"},
                           "spec": claim_spec(*requests, match=match)}
    if status is not None:
        out["status"] = status
    return out


def template(name: str, *requests: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"spec": claim_spec(*requests)}}


def pod(name: str, claims: list[tuple[str, str, str]], *, namespace: str = "default",
        generated: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    """`claims`: (pod claim name, claim name, template name), one of the last two empty."""
    refs = []
    for cname, claim_name, template_name in claims:
        ref = {"name": cname}
        if claim_name:
            ref["resourceClaimName"] = claim_name
        if template_name:
            ref["resourceClaimTemplateName"] = template_name
        refs.append(ref)
    out: dict[str, Any] = {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
                           "spec": {"resourceClaims": refs, "containers": []}}
    if generated:
        out["status"] = {"resourceClaimStatuses": [{"name": n, "resourceClaimName": c} for n, c in generated]}
    return out
