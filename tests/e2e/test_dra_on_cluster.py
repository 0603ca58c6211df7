"""DRA objects on a real apiserver (resource.k8s.io/v1, served by default since Kubernetes 1.34): the objects a
test publishes as a driver and a user would (4 nodes x 2 GPUs, a DeviceClass, a claim template, a shared claim)
are accepted by the apiserver's validation, watched by the cache, read by the parser with the apiserver's
defaults, allocated by the allocator; the allocation the binder would write is accepted by the apiserver and
read back as holding its devices, and a deleted slice leaves the cache."""

from __future__ import annotations

import uuid

import pytest
from controlplane import wait_for

from scheduler.api import reasons_dra as R
from scheduler.api.dra import Consumer, PodClaim, PodClaims
from scheduler.api.dra_parse import claim_from_object
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.dra import DraReader
from scheduler.dra.allocator import Allocator, PodRef
from scheduler.dra.status import status_patch

G, V = "resource.k8s.io", "v1"
DRIVER = "gpu.e2e.volcano-py.io"
TIMEOUT = 60.0


@pytest.fixture
def published(custom):
    """4 node-local slices of 2 GPUs and a DeviceClass, deleted afterwards; returns (tag, nodes, class)."""
    tag = uuid.uuid4().hex[:6]
    nodes = [f"dra-{tag}-{i}" for i in range(4)]
    cls = f"gpu-{tag}"
    custom.create_cluster_custom_object(G, V, "deviceclasses", {
        "apiVersion": f"{G}/{V}", "kind": "DeviceClass", "metadata": {"name": cls},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    for i, node in enumerate(nodes):
        custom.create_cluster_custom_object(G, V, "resourceslices", {
            "apiVersion": f"{G}/{V}", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{d}",
                                  "attributes": {"model": {"string": "a100" if i % 2 == 0 else "h100"},
                                                 "index": {"int": d}},
                                  "capacity": {"memory": {"value": "80Gi"}}} for d in range(2)]}})
    yield tag, nodes, cls
    for node in nodes:
        custom.delete_cluster_custom_object(G, V, "resourceslices", f"{node}-gpus")
    custom.delete_cluster_custom_object(G, V, "deviceclasses", cls)


@pytest.fixture
def cache(control_plane):
    api = control_plane.api_client()
    running = ClusterCache(api, {"volcano-py"}, "default").start()
    try:
        assert running.wait_synced(TIMEOUT)
        yield running
    finally:
        running.stop()
        api.close()


def test_dra_objects_are_watched_read_and_allocated(custom, namespace, published, cache):
    _, nodes, cls = published
    custom.create_namespaced_custom_object(G, V, namespace, "resourceclaimtemplates", {
        "apiVersion": f"{G}/{V}", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}}}})
    custom.create_namespaced_custom_object(G, V, namespace, "resourceclaims", {
        "apiVersion": f"{G}/{V}", "kind": "ResourceClaim", "metadata": {"name": "shared-h100"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": cls,
            "selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "h100"'}}]}}]}}})
    reader = DraReader()

    def mine():
        objs = reader.read(cache.stores)
        slices = [s for s in objs.slices if s.driver == DRIVER and s.node_name in nodes]
        claims = [c for c in objs.claims if c.namespace == namespace]
        templates = [t for t in objs.templates if t.namespace == namespace]
        classes = [c for c in objs.classes if c.name == cls]
        return (slices, classes, claims, templates) if len(slices) == 4 and claims and templates and classes \
            else None

    slices, classes, claims, templates = wait_for(mine, TIMEOUT, what="the DRA objects in the cache")
    assert reader.problems == {} or all(k[1].split("/")[0] != namespace for k in reader.problems)
    assert sorted(d.name for s in slices for d in s.devices) == sorted(["gpu-0", "gpu-1"] * 4)
    assert slices[0].devices[0].capacity[DRIVER]["memory"] == 80 * 2**30
    (shared,) = claims
    assert shared.spec.requests[0].count == 1 and shared.spec.requests[0].mode == "ExactCount"  # apiserver defaults

    alloc = Allocator(slices, classes, claims, templates)
    trial = alloc.tentative()
    for i, node in enumerate(nodes):  # a gang of 4, one GPU each from the template, one pod per node
        pod = PodRef(namespace, f"w{i}", f"uid-w{i}")
        assert trial.place(pod, PodClaims((PodClaim("gpu", template="one-gpu"),)), node, {}) == ()
    for i in range(2):  # the shared claim: two pods on an h100 node
        pod = PodRef(namespace, f"s{i}", f"uid-s{i}")
        assert trial.place(pod, PodClaims((PodClaim("g", claim="shared-h100"),)), nodes[1], {}) == ()
    pod = PodRef(namespace, "late", "uid-late")
    assert trial.place(pod, PodClaims((PodClaim("gpu", template="one-gpu"),)), nodes[1], {}) == \
        (R.ClaimDevicesShort(f"{namespace}/late-gpu", "gpu", cls, 1, 0, nodes[1]),)

    # what the binder writes on the shared claim is accepted, and read back as holding its device
    (write,) = [w for w in trial.plan() if w.name == "shared-h100"]
    answer = custom.patch_namespaced_custom_object_status(G, V, namespace, "resourceclaims", "shared-h100",
                                                          status_patch(write, ()))
    # as written: kube-controller-manager's resourceclaim controller then drops these reservations (no such pods)
    assert claim_from_object(answer).reserved_for == (Consumer("pods", "s0", "uid-s0"),
                                                      Consumer("pods", "s1", "uid-s1"))

    def allocated():
        got = [c for c in reader.read(cache.stores).claims if c.key == f"{namespace}/shared-h100"]
        return got[0] if got and got[0].allocation else None

    back = wait_for(allocated, TIMEOUT, what="the claim's allocation in the cache")
    assert back.allocation == write.allocation
    again = Allocator(slices, classes, [back], templates)
    assert again.held == {r.device for r in write.allocation.results}

    custom.delete_cluster_custom_object(G, V, "resourceslices", f"{nodes[0]}-gpus")
    wait_for(lambda: not [s for s in reader.read(cache.stores).slices if s.node_name == nodes[0]], TIMEOUT,
             what="the deleted slice gone from the cache")
    custom.create_cluster_custom_object(G, V, "resourceslices", {  # for the fixture's clean-up
        "apiVersion": f"{G}/{V}", "kind": "ResourceSlice", "metadata": {"name": f"{nodes[0]}-gpus"},
        "spec": {"driver": DRIVER, "nodeName": nodes[0], "devices": [],
                 "pool": {"name": nodes[0], "generation": 1, "resourceSliceCount": 1}}})


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


def _claimed_pod(name: str, group: str, tag: str, claim_name: str) -> dict:
    from test_scheduler import gang_pod

    pod = gang_pod(name, group, tag)
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
    return pod


def test_a_gang_binds_with_its_claims_allocated_a_late_one_waits_until_devices_are_freed(
        scheduler, custom, core_v1, namespace, node_set):
    """4 nodes x 1 GPU published by the test: a 4-pod gang, each pod with its own claim, binds whole, each pod on
    the node of its claim's device, the claims allocated and reserved for it before the binds; a 1-pod gang whose
    claim needs a fifth GPU stays pending with the DynamicResources reason; deleting the first gang and its claims
    frees the devices and the late gang binds."""
    from test_scheduler import GROUP, bound_pods, unschedulable

    nodes = [node_set(gpus=0) for _ in range(4)]
    tag = node_set.tag
    cls = f"gpu-{tag}"
    custom.create_cluster_custom_object(G, V, "deviceclasses", {
        "apiVersion": f"{G}/{V}", "kind": "DeviceClass", "metadata": {"name": cls},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    for node in nodes:
        custom.create_cluster_custom_object(G, V, "resourceslices", {
            "apiVersion": f"{G}/{V}", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                  "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}}}]}})
    try:
        for name in [f"w{i}" for i in range(4)] + ["late"]:
            custom.create_namespaced_custom_object(G, V, namespace, "resourceclaims", {
                "apiVersion": f"{G}/{V}", "kind": "ResourceClaim", "metadata": {"name": f"{name}-gpu"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}}})
        for group, members in (("train", 4), ("late", 1)):
            custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", {
                "apiVersion": f"{GROUP}/v1beta1", "kind": "PodGroup", "metadata": {"name": group},
                "spec": {"minMember": members, "queue": "default"}})
        for i in range(4):
            core_v1.create_namespaced_pod(namespace, _claimed_pod(f"w{i}", "train", tag, f"w{i}-gpu"))
        bound = wait_for(lambda: (b := bound_pods(core_v1, namespace)) and len(b) >= 4 and b, TIMEOUT,
                         what="the 4-pod gang bound")
        assert set(bound) == {f"w{i}" for i in range(4)}
        # only now the late gang: created with the first, it may be placed first (its gang complete, the first
        # one not yet), and then it is the first gang that waits
        core_v1.create_namespaced_pod(namespace, _claimed_pod("late", "late", tag, "late-gpu"))
        for i in range(4):
            obj = custom.get_namespaced_custom_object(G, V, namespace, "resourceclaims", f"w{i}-gpu")
            results = obj["status"]["allocation"]["devices"]["results"]
            assert [(r["driver"], r["pool"], r["device"]) for r in results] == [(DRIVER, bound[f"w{i}"], "gpu-0")]
            assert [(c["resource"], c["name"]) for c in obj["status"]["reservedFor"]] == [("pods", f"w{i}")]
        held = wait_for(lambda: unschedulable(custom, namespace, "late"), TIMEOUT, what="the late gang held")
        assert "late-gpu" in held["message"] and "1 short" in held["message"]
        assert "late" not in bound_pods(core_v1, namespace)

        for i in range(4):
            core_v1.delete_namespaced_pod(f"w{i}", namespace, grace_period_seconds=0)
            custom.delete_namespaced_custom_object(G, V, namespace, "resourceclaims", f"w{i}-gpu")
        wait_for(lambda: "late" in bound_pods(core_v1, namespace), TIMEOUT, what="the late gang bound once freed")
    finally:
        for node in nodes:
            custom.delete_cluster_custom_object(G, V, "resourceslices", f"{node}-gpus")
        custom.delete_cluster_custom_object(G, V, "deviceclasses", cls)
