"""HyperNode discovery and admission on a real control plane: `volcano-py controllers` keep every HyperNode's
`status.nodeCount` (pkg/controllers/hypernode/hypernode_handler.go), apply a changed discovery conf while running
(the conf ConfigMap is watched, configmap_handler.go), write nothing for HyperNodes with `--controllers=*,
-hyperNode-controller` (cmd/controller-manager, server.go isControllerEnabled), and give a plain pod's PodGroup the
ResourceQuota usage names Volcano's pg controller writes, so the resourcequota plugin holds it
(pkg/controllers/util/util.go CalTaskRequests, pkg/scheduler/plugins/resourcequota).

Each test runs its own controllers process with its own ConfigMap and label keys (test_hypernode_discovery.py's
helpers), and deletes what it made.
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from controlplane import wait_for
from inprocess import running_scheduler
from kubernetes import client
from test_hypernode_discovery import (
    SOURCE_KEY,
    TIMEOUT,
    TOPO,
    conf,
    keys,  # noqa: F401 - the fixture
    label_node,
    made,
    nodes,
    put_conf,
    replica,
    wait_topology,
)
from test_scheduler import GROUP, NODE_SET, unschedulable

API = "topology.volcano.sh/v1alpha1"


def node_count(custom, name: str) -> int | None:
    try:
        obj = custom.get_cluster_custom_object(*TOPO, name)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return (obj.get("status") or {}).get("nodeCount")


@contextmanager
def hand_written(custom, *objs: dict):
    for obj in objs:
        custom.create_cluster_custom_object(*TOPO, obj)
    try:
        yield
    finally:
        for obj in objs:
            try:
                custom.delete_cluster_custom_object(*TOPO, obj["metadata"]["name"])
            except client.ApiException as exc:
                if exc.status != 404:
                    raise


def hypernode(name: str, members: list[dict]) -> dict:
    return {"apiVersion": API, "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": 1, "members": members}}


def test_node_count_is_written_for_discovered_and_hand_written_hypernodes_only_when_it_changes(
        control_plane, core_v1, custom, namespace, keys, tmp_path):  # noqa: F811
    tag = keys.tag
    put_conf(core_v1, namespace, keys, conf(keys))
    rack = f"e2e-{tag}.example.com/rack"
    by_regex = hypernode(f"regex-{tag}", [{"type": "Node", "selector": {"regexMatch": {"pattern": f"^{tag}-n[01]$"}}}])
    by_label = hypernode(f"label-{tag}", [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {rack: "a"}}}},
                                          {"type": "Node", "selector": {"exactMatch": {"name": "elsewhere"}}}])
    with nodes(core_v1, keys, {"n0": {keys.tor: "t0", keys.spine: "s0", rack: "a"},
                               "n1": {keys.tor: "t0", keys.spine: "s0"},
                               "n2": {keys.tor: "t1", keys.spine: "s0"}}), \
            hand_written(custom, by_regex, by_label), replica(control_plane, tmp_path, keys, namespace):
        wait_topology(custom, keys, {(1, keys.tor, "t0"): ["n0", "n1"], (1, keys.tor, "t1"): ["n2"],
                                     (2, keys.spine, "s0"): ["t0", "t1"]}, "the discovered HyperNodes")
        domain = {h["metadata"]["labels"][h["spec"]["tierName"]]: h["metadata"]["name"] for h in made(custom, keys)}
        # Volcano counts the distinct names the selectors give: a tier-2 HyperNode its two member HyperNodes; an
        # exactMatch whether or not the node exists.
        want = {domain["t0"]: 2, domain["t1"]: 1, domain["s0"]: 2, f"regex-{tag}": 2, f"label-{tag}": 2}
        wait_for(lambda: {n: node_count(custom, n) for n in want} == want, TIMEOUT, interval=0.3,
                 what="every HyperNode's status.nodeCount")
        versions = {n: custom.get_cluster_custom_object(*TOPO, n)["metadata"]["resourceVersion"] for n in want}
        # n2 joins the label-selected rack (and gets a label nobody selects on): the label HyperNode is recounted
        # and written; the regex one is recounted in the same pass, unchanged, and not written.
        label_node(core_v1, f"{tag}-n2", {rack: "a", f"e2e-{tag}.example.com/other": "x"})
        wait_for(lambda: node_count(custom, f"label-{tag}") == 3, TIMEOUT, interval=0.3,
                 what="the label-selected HyperNode recounted")
        after = {n: custom.get_cluster_custom_object(*TOPO, n)["metadata"]["resourceVersion"] for n in want}
        assert {n for n in want if after[n] != versions[n]} == {f"label-{tag}"}


def test_a_changed_conf_is_applied_by_the_running_controllers(control_plane, core_v1, custom, namespace, keys,  # noqa: F811
                                                              tmp_path):
    with nodes(core_v1, keys, {"n0": {keys.tor: "t0", keys.spine: "s0"}, "n1": {keys.tor: "t1", keys.spine: "s0"}}), \
            replica(control_plane, tmp_path, keys, namespace) as ctl:
        pid = ctl.proc.pid
        put_conf(core_v1, namespace, keys, conf(keys, spine=False))  # no conf when they started
        wait_topology(custom, keys, {(1, keys.tor, "t0"): ["n0"], (1, keys.tor, "t1"): ["n1"]}, "tors only")
        put_conf(core_v1, namespace, keys, conf(keys))  # a spine tier added
        wait_topology(custom, keys, {(1, keys.tor, "t0"): ["n0"], (1, keys.tor, "t1"): ["n1"],
                                     (2, keys.spine, "s0"): ["t0", "t1"]}, "the spine tier after the conf change")
        assert ctl.proc.poll() is None and ctl.proc.pid == pid  # the same process: no restart
        assert "cannot watch ConfigMap" not in ctl.text()  # the apiserver served the conf's watch


def plain_pod(name: str, tag: str, min_member: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {"scheduling.volcano.sh/group-min-member": str(min_member)}},
            "spec": {"schedulerName": "volcano-py", "nodeSelector": {NODE_SET: tag}, "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}]}}


def plain_podgroup(custom, core_v1, namespace: str, pod: str) -> dict | None:
    uid = core_v1.read_namespaced_pod(pod, namespace).metadata.uid
    try:
        return custom.get_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", f"podgroup-{uid}")
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_the_hypernode_controller_turned_off_writes_nothing(control_plane, core_v1, custom, namespace, keys,  # noqa: F811
                                                            tmp_path, node_set):
    put_conf(core_v1, namespace, keys, conf(keys))
    hand = hypernode(f"hand-{keys.tag}", [{"type": "Node", "selector": {"exactMatch": {"name": f"{keys.tag}-n0"}}}])
    with nodes(core_v1, keys, {"n0": {keys.tor: "t0", keys.spine: "s0"}}), hand_written(custom, hand):
        with replica(control_plane, tmp_path, keys, namespace, "off", "--controllers=*,-hyperNode-controller") as ctl:
            assert "off: hyperNode-controller" in ctl.text()
            # The other controllers of the same process act meanwhile: a plain pod gets its PodGroup, after the conf,
            # the labelled node and the HyperNode were all there to be seen.
            core_v1.create_namespaced_pod(namespace, plain_pod("probe", node_set.tag, 1))
            wait_for(lambda: plain_podgroup(custom, core_v1, namespace, "probe"), TIMEOUT,
                     what="the pg controller made the probe's PodGroup")
            assert made(custom, keys) == [] and node_count(custom, hand["metadata"]["name"]) is None
            assert "HyperNode discovery" not in ctl.text()
        # The same setup with the controller on writes both (so the silence above was the flag's).
        with replica(control_plane, tmp_path, keys, namespace, "on"):
            wait_for(lambda: len(made(custom, keys)) == 2 and node_count(custom, hand["metadata"]["name"]) == 1,
                     TIMEOUT, interval=0.3, what="discovery and nodeCount with the controller on")
            assert all(h["metadata"]["labels"][SOURCE_KEY] == "label" for h in made(custom, keys))


CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: resourcequota
"""


@pytest.fixture
def scheduler(control_plane, tmp_path):
    with running_scheduler(control_plane, conf=CONF, conf_dir=tmp_path) as running:
        yield running


def test_a_plain_pods_podgroup_is_held_by_a_quota_on_requests_cpu(
        control_plane, scheduler, core_v1, custom, namespace, keys, tmp_path, node_set):  # noqa: F811
    node_set(gpus=0)
    core_v1.create_namespaced_resource_quota(namespace, {"metadata": {"name": "compute"},
                                                         "spec": {"hard": {"requests.cpu": "1"}}})

    def quota_seen() -> bool:
        obj = scheduler.cache.stores.resource_quotas.objects.get(f"{namespace}/compute")
        return bool(obj and (obj.get("status") or {}).get("hard"))

    wait_for(quota_seen, TIMEOUT, what="the scheduler's cache holds the quota with its status")
    with replica(control_plane, tmp_path, keys, namespace):
        # group-min-member 5 of 250m: the PodGroup asks 1250m, more than the quota's 1 cpu whatever is used; each
        # pod alone passes the apiserver's quota admission.
        core_v1.create_namespaced_pod(namespace, plain_pod("over", node_set.tag, 5))
        core_v1.create_namespaced_pod(namespace, plain_pod("within", node_set.tag, 1))
        over = wait_for(lambda: plain_podgroup(custom, core_v1, namespace, "over"), TIMEOUT, what="over's PodGroup")
        assert over["spec"]["minResources"]["requests.cpu"] == "1250m"
        assert over["spec"]["minResources"]["count/pods"] == "5"
        held = wait_for(lambda: unschedulable(custom, namespace, over["metadata"]["name"]), TIMEOUT,
                        what="the plain pod's PodGroup held by the quota")
        assert held["reason"] == "NotEnqueued" and "requests.cpu" in held["message"], held
        wait_for(lambda: core_v1.read_namespaced_pod("within", namespace).spec.node_name, TIMEOUT,
                 what="the pod within the quota bound")
        assert core_v1.read_namespaced_pod("over", namespace).spec.node_name is None
