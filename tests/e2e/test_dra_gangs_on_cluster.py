"""DRA gangs on the control plane, with kube-controller-manager's resourceclaim-controller making each pod's
claim from its ResourceClaimTemplate (controlplane.KCM_CONTROLLERS) and the scheduler in-process with
`predicate.DynamicResourceAllocationEnable`; the ResourceSlices are published by the test as a driver would.

- 4 nodes x 2 GPUs: a 4-pod gang, each pod's claim from a template, binds whole with each generated claim
  allocated a device of the pod's node and reserved for the pod; a 5-pod gang, which needs a fifth device when only
  four are free (the fifth would be one the first gang holds), stays wholly pending with the DynamicResources
  reason; deleting the first gang's pods deletes their claims, which frees the devices, and the second gang binds.
- A MIG-style DeviceClass selecting on a device attribute (`type == "mig"`) and a request selecting on another
  (`profile`): only the matching devices are allocated, so the gang lands on the nodes that have them.
- A shared claim (one ResourceClaim named by every pod of a gang): allocated once, its pods on the node of its
  device, reservedFor listing each pod with its UID.
"""

from __future__ import annotations

import json

import pytest
from controlplane import wait_for

G, V = "resource.k8s.io", "v1"
DRIVER = "gpu.e2e.volcano-py.io"
TIMEOUT = 60.0

SCHED_CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
    arguments:
      predicate.DynamicResourceAllocationEnable: true
  - name: proportion
"""


@pytest.fixture
def scheduler(control_plane, tmp_path):
    from inprocess import running_scheduler

    with running_scheduler(control_plane, conf=SCHED_CONF, conf_dir=tmp_path) as running:
        yield running


@pytest.fixture
def dra(custom):
    """Publish DeviceClasses and ResourceSlices as a test's driver; all deleted afterwards."""
    made: list[tuple[str, str]] = []

    def device_class(name: str, expression: str) -> str:
        custom.create_cluster_custom_object(G, V, "deviceclasses", {
            "apiVersion": f"{G}/{V}", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]}})
        made.append(("deviceclasses", name))
        return name

    def node_slice(node: str, devices: list[tuple[str, dict[str, str]]]) -> None:
        """One node-local slice: (device name, string attributes) each."""
        custom.create_cluster_custom_object(G, V, "resourceslices", {
            "apiVersion": f"{G}/{V}", "kind": "ResourceSlice", "metadata": {"name": f"{node}-devices"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": name, "attributes": {k: {"string": v} for k, v in attrs.items()}}
                                 for name, attrs in devices]}})
        made.append(("resourceslices", f"{node}-devices"))

    yield device_class, node_slice
    for plural, name in reversed(made):
        custom.delete_cluster_custom_object(G, V, plural, name)


def _podgroup(custom, namespace: str, name: str, members: int) -> None:
    from test_scheduler import GROUP

    custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", {
        "apiVersion": f"{GROUP}/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
        "spec": {"minMember": members, "queue": "default"}})


def _template(custom, namespace: str, name: str, cls: str, *selectors: str) -> None:
    exactly: dict = {"deviceClassName": cls}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    custom.create_namespaced_custom_object(G, V, namespace, "resourceclaimtemplates", {
        "apiVersion": f"{G}/{V}", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}})


def _pod(core_v1, namespace: str, name: str, group: str, tag: str, *, template: str = "", claim: str = "") -> None:
    from test_scheduler import gang_pod

    pod = gang_pod(name, group, tag)
    ref = {"name": "gpu", **({"resourceClaimTemplateName": template} if template else {"resourceClaimName": claim})}
    pod["spec"]["resourceClaims"] = [ref]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    core_v1.create_namespaced_pod(namespace, pod)


def _pods(core_v1, namespace: str) -> dict[str, dict]:
    items = json.loads(core_v1.list_namespaced_pod(namespace, _preload_content=False).data)["items"]
    return {p["metadata"]["name"]: p for p in items}


def _claims(custom, namespace: str) -> dict[str, dict]:
    items = custom.list_namespaced_custom_object(G, V, namespace, "resourceclaims")["items"]
    return {c["metadata"]["name"]: c for c in items}


def _devices(claim: dict) -> list[tuple[str, str, str]]:
    results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
    return [(r["driver"], r["pool"], r["device"]) for r in results]


def _reserved(claim: dict) -> list[tuple[str, str, str]]:
    return [(c["resource"], c["name"], c["uid"]) for c in (claim.get("status") or {}).get("reservedFor") or []]


def _generated(pod: dict) -> str:
    """The claim the claim controller made for the pod's `gpu` claim, as the pod's status names it."""
    statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or []
    return next((s.get("resourceClaimName") or "" for s in statuses if s.get("name") == "gpu"), "")


def _bound(core_v1, namespace: str, names: set[str]) -> dict[str, dict] | None:
    pods = _pods(core_v1, namespace)
    mine = {n: p for n, p in pods.items() if n in names}
    return mine if len(mine) == len(names) and all(p["spec"].get("nodeName") for p in mine.values()) else None


def _check_template_claims(custom, namespace: str, pods: dict[str, dict], device: str | None = None) -> set:
    """Each pod's generated claim: owned by the pod, allocated one device of the pod's node (the pool is named
    after it), reserved for the pod alone; returns the devices."""
    claims = _claims(custom, namespace)
    held = set()
    for name, pod in pods.items():
        claim = claims[_generated(pod)]
        owners = [(o["kind"], o["name"]) for o in claim["metadata"].get("ownerReferences") or []]
        assert owners == [("Pod", name)]
        (got,) = _devices(claim)
        assert got[:2] == (DRIVER, pod["spec"]["nodeName"])
        if device is not None:
            assert got[2] == device
        assert _reserved(claim) == [("pods", name, pod["metadata"]["uid"])]
        held.add(got)
    return held


def test_a_gang_binds_with_template_claims_a_gang_needing_held_devices_waits_until_deletion_frees_them(
        scheduler, dra, custom, core_v1, namespace, node_set):
    from test_scheduler import unschedulable

    device_class, node_slice = dra
    nodes = [node_set(gpus=0) for _ in range(4)]
    tag = node_set.tag
    cls = device_class(f"gpu-{tag}", f'device.driver == "{DRIVER}"')
    for node in nodes:
        node_slice(node, [("gpu-0", {"model": "a100"}), ("gpu-1", {"model": "a100"})])
    _template(custom, namespace, "one-gpu", cls)

    first = {f"w{i}" for i in range(4)}
    _podgroup(custom, namespace, "train", 4)
    for name in sorted(first):
        _pod(core_v1, namespace, name, "train", tag, template="one-gpu")
    bound = wait_for(lambda: _bound(core_v1, namespace, first), TIMEOUT, what="the 4-pod gang bound")
    held = _check_template_claims(custom, namespace, bound)
    assert len(held) == 4
    first_claims = {_generated(p) for p in bound.values()}

    # Created once the first is bound (created together, the second gang, complete, could be placed first).
    second = {f"late{i}" for i in range(5)}
    _podgroup(custom, namespace, "late", 5)
    for name in sorted(second):
        _pod(core_v1, namespace, name, "late", tag, template="one-gpu")
    # (until the claim controller has made their claims, the pods wait with another reason: "not made yet")
    waiting = wait_for(lambda: (c := unschedulable(custom, namespace, "late")) and "short" in c["message"] and c,
                       TIMEOUT, what="the 5-pod gang held for want of devices")
    assert "cannot allocate the pod's ResourceClaims" in waiting["message"]
    assert f"of class {cls} needed, 0 free, 1 short" in waiting["message"]
    pods = _pods(core_v1, namespace)
    assert not [n for n in second if pods[n]["spec"].get("nodeName")]  # four could fit: none is bound
    late_claims = {_generated(pods[n]) for n in second} - {""}
    assert all(not _devices(c) for n, c in _claims(custom, namespace).items() if n in late_claims)

    for name in first:
        core_v1.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    bound = wait_for(lambda: _bound(core_v1, namespace, second), TIMEOUT, what="the 5-pod gang bound once freed")
    assert len(_check_template_claims(custom, namespace, bound)) == 5
    assert not first_claims & set(_claims(custom, namespace))  # the first gang's claims went with its pods


def test_a_mig_style_class_allocates_only_devices_whose_attributes_match(
        scheduler, dra, custom, core_v1, namespace, node_set):
    device_class, node_slice = dra
    nodes = [node_set(gpus=0) for _ in range(4)]
    tag = node_set.tag
    cls = device_class(f"mig-{tag}", f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].type == "mig"')
    for i, node in enumerate(nodes):  # a whole GPU listed first on every node, then one MIG slice
        profile = "1g.10gb" if i < 2 else "3g.40gb"
        node_slice(node, [("gpu-0", {"type": "gpu", "profile": "full"}),
                          ("mig-0", {"type": "mig", "profile": profile})])
    _template(custom, namespace, "one-3g", cls, f'device.attributes["{DRIVER}"].profile == "3g.40gb"')
    members = {"m0", "m1"}
    _podgroup(custom, namespace, "mig", 2)
    for name in sorted(members):
        _pod(core_v1, namespace, name, "mig", tag, template="one-3g")
    bound = wait_for(lambda: _bound(core_v1, namespace, members), TIMEOUT, what="the MIG gang bound")
    assert sorted(p["spec"]["nodeName"] for p in bound.values()) == sorted(nodes[2:])
    _check_template_claims(custom, namespace, bound, device="mig-0")


def test_a_shared_claim_is_allocated_once_and_reserved_for_each_pod_of_the_gang(
        scheduler, dra, custom, core_v1, namespace, node_set):
    device_class, node_slice = dra
    nodes = [node_set(gpus=0) for _ in range(2)]
    tag = node_set.tag
    cls = device_class(f"gpu-{tag}", f'device.driver == "{DRIVER}"')
    for node in nodes:
        node_slice(node, [("gpu-0", {"model": "a100"})])
    custom.create_namespaced_custom_object(G, V, namespace, "resourceclaims", {
        "apiVersion": f"{G}/{V}", "kind": "ResourceClaim", "metadata": {"name": "shared"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}}})
    members = {"s0", "s1", "s2"}
    _podgroup(custom, namespace, "share", 3)
    for name in sorted(members):
        _pod(core_v1, namespace, name, "share", tag, claim="shared")
    bound = wait_for(lambda: _bound(core_v1, namespace, members), TIMEOUT, what="the sharing gang bound")
    (node,) = {p["spec"]["nodeName"] for p in bound.values()}  # one device: every pod where it is
    claim = _claims(custom, namespace)["shared"]
    assert _devices(claim) == [(DRIVER, node, "gpu-0")]
    assert sorted(_reserved(claim)) == sorted(("pods", n, p["metadata"]["uid"]) for n, p in bound.items())
