"""DRA in one scheduling cycle, with the predicates plugin's `predicate.DynamicResourceAllocationEnable`: a gang
whose pods each claim one GPU binds whole, each pod where its claim's device is, with the claims' allocation and
reservedFor handed to the adapter before the binds; a pod whose claim finds no free device waits with the reason
naming request, class and how many devices short; without the argument, claims are not considered."""

from __future__ import annotations

import threading
from typing import Any

from dra_objects import DRIVER, claim, device, device_class, request, slice_

from scheduler.adapter.snapshot import AdapterRules, SnapshotInputs, build_snapshot
from scheduler.api import reasons_dra as R
from scheduler.api.dra import DraObjects
from scheduler.api.dra_parse import claim_from_object, class_from_object, slice_from_object
from scheduler.api.messages import message
from scheduler.api.messages_dra import render_dra
from scheduler.api.reasons import DYNAMIC_RESOURCES, FilterCount, NodeFilter, NodesUnavailable
from scheduler.api.snapshot import CycleResult
from scheduler.cache.parse import ParseCache
from scheduler.cycle import conf_from_text, run_cycle
from scheduler.sim.objects import node_object, pod_object

NOW = 1_800_000_000.0
CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
    arguments:
      predicate.DynamicResourceAllocationEnable: {dra}
  - name: proportion
"""


def podgroup(name: str, members: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": "1",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"minMember": members, "queue": "default"}, "status": {"phase": "Inqueue"}}


def gpu_pod(name: str, group: str) -> dict[str, Any]:
    pod = pod_object(name, namespace="ns", group=group)
    pod["metadata"].update(resourceVersion="1", creationTimestamp="2026-01-01T00:00:00Z", uid=f"uid-{name}")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    pod["status"] = {"phase": "Pending", "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName":
                                                                     f"{name}-gpu"}]}
    return pod


def cycle(dra: bool, pods: dict[str, str], nodes: int = 4, gpus: int = 1) -> CycleResult:
    cache = ParseCache(frozenset({"volcano-py"}), threading.Lock(), lambda *a: None)
    node_objs = [node_object(f"n{i}") for i in range(nodes)]
    for node in node_objs:
        node["metadata"]["resourceVersion"] = "1"
    pod_objs = [gpu_pod(name, group) for name, group in pods.items()]
    groups = {}
    for group in pods.values():
        groups[group] = groups.get(group, 0) + 1
    objects = DraObjects(
        tuple(slice_from_object(slice_(f"n{i}-gpus", f"n{i}", [device(f"gpu-{d}") for d in range(gpus)]))
              for i in range(nodes)),
        (class_from_object(device_class("gpu", f'device.driver == "{DRIVER}"')),),
        tuple(claim_from_object(claim(f"{name}-gpu", request("gpu", "gpu"), namespace="ns")) for name in pods))
    queues, _ = cache.queues([{"metadata": {"name": "default", "resourceVersion": "1"}, "spec": {"weight": 1}}])
    inputs = SnapshotInputs(cache.nodes(node_objs),
                            cache.podgroups([podgroup(g, n) for g, n in groups.items()], cache.pcs, "default"),
                            queues, list(cache.pods(pod_objs, cache.pcs)), NOW, dra=objects)
    return run_cycle(build_snapshot(inputs, AdapterRules(frozenset({"volcano-py"}))),
                     conf_from_text(CONF.format(dra="true" if dra else "false")))


def test_a_gang_binds_whole_with_its_claims_written_and_a_pod_short_of_devices_waits() -> None:
    result = cycle(True, {**{f"w{i}": "train" for i in range(4)}, "late": "late"})
    (gang,) = result.binds
    assert gang.job == "ns/train" and len(gang.binds) == 4
    where = dict(gang.binds)
    writes = {w.name: w for w in gang.claims}
    assert sorted(writes) == [f"w{i}-gpu" for i in range(4)]
    devices = []
    for i in range(4):
        write = writes[f"w{i}-gpu"]
        assert write.allocation is not None and write.allocation.node == where[f"ns/w{i}"]
        assert [c.name for c in write.consumers] == [f"w{i}"]
        devices += [r.device for r in write.allocation.results]
    assert len(set(devices)) == 4
    late = next(s for s in result.podgroups if s.job == "ns/late")
    assert late.decision is not None and late.decision.rejected
    (unavailable,) = [r for r in late.decision.reasons if isinstance(r, NodesUnavailable)]
    short = R.ClaimDevicesShort("ns/late-gpu", "gpu", "gpu", needed=1, available=0)
    assert unavailable.counts == (FilterCount(NodeFilter(DYNAMIC_RESOURCES, render_dra(short) or ""), 4),)
    assert "1 short" in message(late.decision)


def test_without_the_argument_claims_are_not_considered() -> None:
    result = cycle(False, {**{f"w{i}": "train" for i in range(4)}, "late": "late"})
    assert {g.job for g in result.binds} == {"ns/train", "ns/late"}
    assert all(g.claims == () for g in result.binds)


def test_a_gang_that_needs_more_devices_than_free_binds_nothing() -> None:
    result = cycle(True, {f"w{i}": "big" for i in range(5)})  # 5 pods, 4 GPUs
    assert result.binds == [] or all(g.job != "ns/big" for g in result.binds)
