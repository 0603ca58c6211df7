"""The production scheduler and the simulator build their snapshots with the same function (issue 17).

One set of Kubernetes objects (nodes with labels and taints, a Volcano Job's PodGroup and pods, a bare PodGroup,
plain pods with and without a group annotation, a HyperNode, priority classes, queues) goes to the production
path (a `ClusterCache` whose stores are fed as its watches feed them, no apiserver) and to the simulator
(`InMemoryCluster`); the snapshots, and the cycle each runs, must be the same structured values.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest
from snapshot_values import result_value, snapshot_value

from scheduler.api.snapshot import ClusterSnapshot
from scheduler.api.timestamps import rfc3339
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cycle import builtin_default_conf, run_cycle
from scheduler.jobs.expand import normalize_job, podgroup_for, pods_for
from scheduler.sim.cluster import InMemoryCluster
from scheduler.sim.objects import node_object, pod_object

Obj = dict[str, Any]
CREATED = 1_700_000_000.0  # every object's creationTimestamp, and the simulator's clock when it is added
NOW = CREATED + 30.0
PRIORITY_CLASSES = {"high": 1000, "low": 10}
CONF = builtin_default_conf()


# ---- the objects ------------------------------------------------------------------------------------------
def volcano_job() -> Obj:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml", "uid": "uid-train"},
        "spec": {
            "minAvailable": 3,
            "queue": "team-a",
            "priorityClassName": "high",
            "tasks": [
                {"name": "ps", "replicas": 1, "template": {"spec": {"containers": [
                    {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}},
                {"name": "worker", "replicas": 2, "template": {"spec": {
                    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
                    "containers": [{"name": "main", "image": "busybox",
                                    "resources": {"requests": {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "1"}}}],
                }}},
            ],
        },
    }


def objects() -> dict[str, list[Obj]]:
    nodes = [
        node_object("n1", cpu="8", memory="32Gi", labels={"zone": "a"}),
        node_object("n2", cpu="16", memory="64Gi", gpu=4, labels={"zone": "b"},
                    taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        node_object("n3", cpu="4", memory="8Gi", unschedulable=True),
    ]
    queues = [
        {"metadata": {"name": "default"}, "spec": {"weight": 1}},
        {"metadata": {"name": "team-a"}, "spec": {"weight": 2, "capability": {"cpu": "20"}}},
    ]
    job = normalize_job(volcano_job())
    job_pg = podgroup_for(job, PRIORITY_CLASSES)
    job_pods = pods_for(job, podgroup=job_pg["metadata"]["name"])
    job_pods[0]["spec"]["nodeName"] = "n1"  # the ps is already running
    job_pods[0]["status"] = {"phase": "Running"}
    bare_pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
               "metadata": {"name": "bare", "namespace": "ml"},
               "spec": {"minMember": 2, "queue": "team-a", "minResources": {"cpu": "2"}},
               "status": {"phase": "Inqueue"}}
    bare_pods = [pod_object(f"bare-{i}", namespace="ml", group="bare", priority_class="low") for i in range(2)]
    # A ReplicaSet's pod: the controllers made `podgroup-<owner uid>` for it, which it joins.
    owned = pod_object("web-1", namespace="web")
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                             "uid": "rs-web", "controller": True}]
    owned_pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "podgroup-rs-web", "namespace": "web"},
                "spec": {"minMember": 1, "queue": "default"}, "status": {"phase": "Inqueue"}}
    alone = pod_object("alone", namespace="web", cpu="500m")  # no PodGroup anywhere: a gang of one
    wants = pod_object("wants-gang", namespace="web")  # asks for a gang whose PodGroup is not there yet
    wants["metadata"]["annotations"]["scheduling.volcano.sh/group-min-member"] = "3"
    orphan = pod_object("orphan", namespace="ml", group="no-such-group")  # names a PodGroup that does not exist
    foreign = pod_object("kube-proxy", namespace="kube-system", cpu="250m", memory="256Mi",
                         scheduler_name="default-scheduler")
    foreign["spec"]["nodeName"] = "n2"
    foreign["status"] = {"phase": "Running"}
    hypernode = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "rack-1"},
                 "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n1"}}},
                                                 {"type": "Node", "selector": {"regexMatch": {"pattern": "^n[23]$"}}}]}}
    priority_classes = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                         "metadata": {"name": name}, "value": value} for name, value in PRIORITY_CLASSES.items()]
    out = {
        "PriorityClass": priority_classes,
        "Node": nodes,
        "Queue": queues,
        "PodGroup": [job_pg, bare_pg, owned_pg],
        "Pod": [*job_pods, *bare_pods, owned, alone, wants, orphan, foreign],
        "HyperNode": [hypernode],
    }
    for objs in out.values():
        for i, obj in enumerate(objs):
            meta = obj.setdefault("metadata", {})
            meta["resourceVersion"] = str(100 + i)
            meta["creationTimestamp"] = rfc3339(CREATED)
    return out


# ---- the two paths ----------------------------------------------------------------------------------------
def production(objs: Mapping[str, list[Obj]]) -> ClusterCache:
    """A ClusterCache fed as its watches feed it (ADDED events), without an apiserver."""
    cache = ClusterCache(None, {"volcano-py", "volcano"}, "default", clock=lambda: NOW)
    stores = {"PriorityClass": cache.priority_classes, "Node": cache.nodes, "Queue": cache.queues,
              "PodGroup": cache.podgroups, "Pod": cache.pods, "HyperNode": cache.hypernodes}
    for kind, items in objs.items():
        for obj in items:
            cache.watcher._on_event(stores[kind], "ADDED", copy.deepcopy(obj))
    return cache


def simulator(objs: Mapping[str, list[Obj]]) -> InMemoryCluster:
    sim = InMemoryCluster(now=CREATED)
    for pc in objs["PriorityClass"]:
        sim.add_priority_class(pc["metadata"]["name"], pc["value"])
    for node in objs["Node"]:
        sim.add_node(node)
    for queue in objs["Queue"]:
        sim.add_queue(queue)
    for pg in objs["PodGroup"]:
        sim.add_podgroup(pg)
    for pod in objs["Pod"]:
        sim.add_pod(pod)
    for hypernode in objs["HyperNode"]:
        sim.add_hypernode(hypernode)
    sim.now = NOW
    return sim


@pytest.fixture()
def both() -> tuple[ClusterSnapshot, ClusterSnapshot]:
    """Fresh for each test: a cycle changes the infos of the snapshot it runs on."""
    objs = objects()
    return production(objs).snapshot(), simulator(objs).snapshot()


# ---- the tests --------------------------------------------------------------------------------------------
def test_production_and_the_simulator_build_the_same_snapshot(both):
    prod, sim = both
    assert snapshot_value(prod) == snapshot_value(sim)


def test_production_and_the_simulator_run_the_same_cycle_on_it(both):
    prod, sim = both
    prod_result, sim_result = run_cycle(prod, CONF), run_cycle(sim, CONF)
    assert prod_result.binds, "the cycle should bind something, or the comparison says little"
    assert result_value(prod_result) == result_value(sim_result)


@pytest.mark.parametrize("path", ["production", "simulator"])
def test_gang_membership_is_decided_alike(both, path):
    snapshot = both[0] if path == "production" else both[1]
    members = {uid: sorted(job.tasks) for uid, job in snapshot.jobs.items()}
    assert members == {
        "ml/train-uid-train": ["ml/train-ps-0", "ml/train-worker-0", "ml/train-worker-1"],
        "ml/bare": ["ml/bare-0", "ml/bare-1"],
        "web/podgroup-rs-web": ["web/web-1"],  # a plain pod joins the PodGroup the controllers made for it
        "web/alone": ["web/alone"],  # a plain pod with none is a gang of one
    }  # wants-gang waits for its PodGroup; orphan names one that does not exist; kube-proxy is not ours
    assert snapshot.jobs["web/podgroup-rs-web"].tasks["web/web-1"].job == "web/podgroup-rs-web"
    assert snapshot.jobs["ml/train-uid-train"].priority == 1000
    assert snapshot.jobs["ml/bare"].tasks["ml/bare-0"].priority == 10
    assert set(snapshot.nodes["n2"].tasks) == {"kube-system/kube-proxy"}  # another scheduler's pod takes room
    assert set(snapshot.nodes["n1"].tasks) == {"ml/train-ps-0"}
    assert [h["metadata"]["name"] for h in snapshot.hypernodes] == ["rack-1"]


def test_a_pod_bound_a_moment_ago_is_on_its_node_before_the_watch_shows_it():
    """Production only (the simulator's binds land at once): the assumed bind goes through the shared builder."""
    objs = objects()
    cache = production(objs)
    cache.stores.assumed["web/alone"] = ("n1", NOW)
    snapshot = cache.snapshot()
    assert snapshot.jobs["web/alone"].tasks["web/alone"].node_name == "n1"
    assert "web/alone" in snapshot.nodes["n1"].tasks


@pytest.mark.parametrize("hypernode", [
    {"metadata": {}, "spec": {"tier": 1}},
    {"metadata": {"name": "rack"}, "spec": {"tier": "top"}},
], ids=["without a name", "with a tier that is not a number"])
def test_the_simulator_refuses_a_hypernode_it_cannot_read(hypernode):
    with pytest.raises(ValueError, match="HyperNode"):
        InMemoryCluster().add_hypernode(hypernode)
