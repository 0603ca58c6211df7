"""HyperNode discovery from node labels on a real control plane (issue 34): `volcano-py controllers` read Volcano's
controller ConfigMap (`<HELM_RELEASE_NAME>-controller-configmap` in `KUBE_POD_NAMESPACE`, key
`volcano-controller.conf`, `networkTopologyDiscovery` with `source: label`) and keep HyperNodes as Volcano's
hypernode controller does (pkg/controllers/hypernode): marked `volcano.sh/network-topology-source: label`,
`spec.tierName` the label key, leaves' members nodes and upper tiers' members HyperNodes; hand-written ones are
left alone; only the Lease holder writes, and a standby that takes over mid-reconcile finishes it.

Each test runs its own controllers (a process, as a user runs them) with its own ConfigMap and label keys, and
deletes what it made.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from controlplane import REPO_ROOT, delete_node_and_pods, wait_for
from kubernetes import client

TIMEOUT = 60
TOPO = ("topology.volcano.sh", "v1alpha1", "hypernodes")
SOURCE_KEY = "volcano.sh/network-topology-source"
NAME = re.compile(r"^hypernode-fabric-tier[12]-[bcdfghjklmnpqrstvwxz2456789]{5}$")


class Keys:
    def __init__(self) -> None:
        self.tag = uuid.uuid4().hex[:6]
        self.tor = f"e2e-{self.tag}.example.com/tor"
        self.spine = f"e2e-{self.tag}.example.com/spine"
        self.release = f"disc-{self.tag}"


def conf(keys: Keys, *, spine: bool = True, extra: str = "") -> str:
    """Volcano's conf shape (api/example.yaml), top tier first, the node's own label last; a ufm source too, which
    volcano-py does not serve (logged once)."""
    labels = ([{"nodeLabel": keys.spine}] if spine else []) + [{"nodeLabel": keys.tor},
                                                               {"nodeLabel": "kubernetes.io/hostname"}]
    doc = {"networkTopologyDiscovery": [
        {"source": "ufm", "enabled": True, "interval": "10m", "config": {"endpoint": "https://ufm:8080"}},
        {"source": "label", "enabled": True, "config": {"networkTopologyTypes": {"fabric": labels}}},
    ]}
    return yaml.safe_dump(doc) + extra


def put_conf(core_v1, namespace: str, keys: Keys, text: str) -> None:
    body = {"metadata": {"name": f"{keys.release}-controller-configmap", "namespace": namespace},
            "data": {"volcano-controller.conf": text}}
    try:
        core_v1.create_namespaced_config_map(namespace, body)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
        core_v1.replace_namespaced_config_map(body["metadata"]["name"], namespace, body)


def label_node(core_v1, name: str, labels: dict[str, str | None]) -> None:
    core_v1.patch_node(name, {"metadata": {"labels": labels}})


@contextmanager
def nodes(core_v1, keys: Keys, labels: dict[str, dict[str, str]]):
    """Plain nodes (tainted: nothing lands on them) with these labels; deleted afterwards."""
    names = [f"{keys.tag}-{n}" for n in labels]
    for short, name in zip(labels, names, strict=True):
        core_v1.create_node({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels[short]}},
                             "spec": {"taints": [{"key": "e2e-discovery", "effect": "NoSchedule"}]}})
    try:
        yield
    finally:
        for name in names:
            delete_node_and_pods(core_v1, name)


def all_hypernodes(custom) -> list[dict]:
    return custom.list_cluster_custom_object(*TOPO)["items"]


def made(custom, keys: Keys) -> list[dict]:
    """The HyperNodes discovery made for this test's label keys."""
    return [h for h in all_hypernodes(custom) if (h["metadata"].get("labels") or {}).get(SOURCE_KEY) == "label"
            and {keys.tor, keys.spine} & set(h["metadata"]["labels"])]


def topology(custom, keys: Keys) -> dict[tuple[int, str, str], list[str]]:
    """(tier, tierName, label value) -> members, a HyperNode member told by its label value, a node by its short
    name; asserting each HyperNode's marker, name and member types on the way."""
    found = made(custom, keys)
    value_of = {h["metadata"]["name"]: h["metadata"]["labels"][h["spec"]["tierName"]] for h in found}
    out = {}
    for h in found:
        spec = h["spec"]
        assert h["metadata"]["labels"][SOURCE_KEY] == "label" and NAME.match(h["metadata"]["name"]), h["metadata"]
        kind = "Node" if spec["tier"] == 1 else "HyperNode"
        assert all(m["type"] == kind for m in spec["members"]), spec
        names = [m["selector"]["exactMatch"]["name"] for m in spec["members"]]
        shown = [n.removeprefix(f"{keys.tag}-") for n in names] if kind == "Node" else [value_of.get(n, n)
                                                                                         for n in names]
        out[(spec["tier"], spec["tierName"], h["metadata"]["labels"][spec["tierName"]])] = sorted(shown)
    assert len(out) == len(found), "two HyperNodes for one domain"
    return out


def wait_topology(custom, keys: Keys, want: dict, what: str) -> None:
    wait_for(lambda: topology(custom, keys) == want, TIMEOUT, interval=0.3, what=what)


def names_by_domain(custom, keys: Keys) -> dict[str, str]:
    return {h["metadata"]["labels"][h["spec"]["tierName"]]: h["metadata"]["name"] for h in made(custom, keys)}


class Replica:
    def __init__(self, control_plane, log: Path, keys: Keys, namespace: str, identity: str, *extra: str):
        env = dict(os.environ, KUBE_POD_NAMESPACE=namespace, HELM_RELEASE_NAME=keys.release)
        cmd = [sys.executable, "-m", "scheduler.cli", "controllers", "--kubeconfig", str(control_plane.kubeconfig),
               "--leader-elect-lease-name", f"disc-{keys.tag}", "--leader-elect-identity", identity,
               "--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s",
               "--leader-elect-retry-period=1s", *extra]
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT, env=env)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def leading(self) -> bool:
        return "controllers for" in self.text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        print(self.text()[-3000:])


@pytest.fixture
def keys(custom):
    k = Keys()
    yield k
    for h in made(custom, k):
        try:
            custom.delete_cluster_custom_object(*TOPO, h["metadata"]["name"])
        except client.ApiException as exc:
            if exc.status != 404:
                raise


@contextmanager
def replica(control_plane, tmp_path: Path, keys: Keys, namespace: str, identity: str = "only", *extra: str):
    r = Replica(control_plane, tmp_path / f"{identity}.log", keys, namespace, identity, *extra)
    try:
        wait_for(lambda: r.leading() or r.proc.poll() is not None, TIMEOUT, what=f"{identity} leads")
        assert r.proc.poll() is None, r.text()[-3000:]
        yield r
    finally:
        r.stop()


def test_labels_become_marked_hypernodes_with_tier_names_and_a_hand_written_one_is_left_alone(
        control_plane, core_v1, custom, namespace, keys, tmp_path):
    put_conf(core_v1, namespace, keys, conf(keys))
    hand = custom.create_cluster_custom_object(*TOPO, {
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": f"hand-{keys.tag}", "labels": {keys.tor: "t0"}},  # same label, no source marker
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": f"{keys.tag}-n0"}}}]}})
    try:
        with nodes(core_v1, keys, {"n0": {keys.tor: "t0", keys.spine: "s0"}, "n1": {keys.tor: "t0", keys.spine: "s0"},
                                   "n2": {keys.tor: "t1", keys.spine: "s0"}, "n3": {keys.tor: "t2"},
                                   "n4": {keys.spine: "s9"}, "n5": {}}), \
                replica(control_plane, tmp_path, keys, namespace) as ctl:
            wait_topology(custom, keys, {
                (1, keys.tor, "t0"): ["n0", "n1"], (1, keys.tor, "t1"): ["n2"], (1, keys.tor, "t2"): ["n3"],
                (2, keys.spine, "s0"): ["t0", "t1"],  # n4: a spine without a tor stops the walk at tier 1
            }, "HyperNodes from the labels")
            assert ctl.text().count("networkTopologyDiscovery source 'ufm'") == 1
            # every HyperNode's status.nodeCount is written once (hypernode_handler.go; the hand-written one's
            # too); then a second reconcile (a HyperNode deleted triggers one, as in Volcano) writes nothing
            wait_for(lambda: all((h.get("status") or {}).get("nodeCount") == len(h["spec"]["members"])
                                 for h in [*made(custom, keys), custom.get_cluster_custom_object(
                                     *TOPO, f"hand-{keys.tag}")]), TIMEOUT, what="the nodeCounts written")
            versions = {h["metadata"]["name"]: h["metadata"]["resourceVersion"] for h in made(custom, keys)}
            quiet = ctl.text().count("nothing to change")
            custom.create_cluster_custom_object(*TOPO, {
                "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                "metadata": {"name": f"tmp-{keys.tag}"}, "spec": {"tier": 9, "members": []}})
            custom.delete_cluster_custom_object(*TOPO, f"tmp-{keys.tag}")
            wait_for(lambda: ctl.text().count("nothing to change") > quiet, TIMEOUT, what="a second reconcile")
            assert {h["metadata"]["name"]: h["metadata"]["resourceVersion"] for h in made(custom, keys)} == versions
            assert "updating HyperNode" not in ctl.text()
        after = {h["metadata"]["name"]: h for h in all_hypernodes(custom)}.get(f"hand-{keys.tag}")
        assert after is not None, "the hand-written HyperNode was deleted"
        # untouched but for its status.nodeCount, which Volcano's controller writes for every HyperNode
        assert after["metadata"]["generation"] == hand["metadata"]["generation"]
        assert after["spec"] == hand["spec"] and after["metadata"]["labels"] == {keys.tor: "t0"}
        assert after["status"] == {"nodeCount": 1}
    finally:
        try:
            custom.delete_cluster_custom_object(*TOPO, f"hand-{keys.tag}")
        except client.ApiException as exc:
            if exc.status != 404:
                raise


def test_relabels_removals_and_conf_changes_converge(control_plane, core_v1, custom, namespace, keys, tmp_path):
    put_conf(core_v1, namespace, keys, conf(keys))
    n = {s: f"{keys.tag}-{s}" for s in ("n0", "n1", "n2", "n3")}
    with nodes(core_v1, keys, {"n0": {keys.tor: "t0", keys.spine: "s0"}, "n1": {keys.tor: "t0", keys.spine: "s0"},
                               "n2": {keys.tor: "t1", keys.spine: "s0"}, "n3": {keys.tor: "t2", keys.spine: "s0"}}), \
            replica(control_plane, tmp_path, keys, namespace) as ctl:
        wait_topology(custom, keys, {(1, keys.tor, "t0"): ["n0", "n1"], (1, keys.tor, "t1"): ["n2"],
                                     (1, keys.tor, "t2"): ["n3"], (2, keys.spine, "s0"): ["t0", "t1", "t2"]},
                      "the first HyperNodes")
        first = names_by_domain(custom, keys)
        # n2 moves to t0 (t1 is left empty: deleted), n3 loses its tor (t2 deleted), the whole row to spine s1
        label_node(core_v1, n["n2"], {keys.tor: "t0"})
        label_node(core_v1, n["n3"], {keys.tor: None})
        for short in ("n0", "n1", "n2", "n3"):
            label_node(core_v1, n[short], {keys.spine: "s1"})
        wait_topology(custom, keys, {(1, keys.tor, "t0"): ["n0", "n1", "n2"], (2, keys.spine, "s1"): ["t0"]},
                      "HyperNodes after the relabels")
        assert names_by_domain(custom, keys)["t0"] == first["t0"]  # updated in place, not recreated
        # a malformed conf: the last good one stays (one log line), so a relabel is still followed
        put_conf(core_v1, namespace, keys, "networkTopologyDiscovery: [{source: label, enabled: maybe}]")
        wait_for(lambda: "keeping the conf read before" in ctl.text(), TIMEOUT, what="the bad conf logged")
        label_node(core_v1, n["n3"], {keys.tor: "t3"})
        wait_topology(custom, keys, {(1, keys.tor, "t0"): ["n0", "n1", "n2"], (1, keys.tor, "t3"): ["n3"],
                                     (2, keys.spine, "s1"): ["t0", "t3"]}, "the last good conf still followed")
        # the conf drops the spine tier: its HyperNodes go, the tors stay under their names
        put_conf(core_v1, namespace, keys, conf(keys, spine=False))
        wait_topology(custom, keys, {(1, keys.tor, "t0"): ["n0", "n1", "n2"], (1, keys.tor, "t3"): ["n3"]},
                      "HyperNodes after the conf change")
        assert names_by_domain(custom, keys)["t0"] == first["t0"]
        assert ctl.text().count("keeping the conf read before") == 1
        assert ctl.text().count("networkTopologyDiscovery source 'ufm'") == 1
        # every label removed: all of it deleted
        for short in ("n0", "n1", "n2", "n3"):
            label_node(core_v1, n[short], {keys.tor: None, keys.spine: None})
        wait_topology(custom, keys, {}, "no HyperNodes once no node carries the labels")


def test_a_standby_finishes_the_reconcile_of_a_leader_killed_halfway(
        control_plane, core_v1, custom, namespace, keys, tmp_path):
    """Two replicas on one Lease, the API rate limited so that a reconcile takes seconds; the leader is SIGKILLed
    once some of the HyperNodes exist: the standby takes the Lease and the final set is exactly what the labels
    describe, the HyperNodes the first leader made kept (not duplicated, not recreated)."""
    labels = {f"n{i}": {keys.tor: f"t{i // 2}", keys.spine: f"s{i // 8}"} for i in range(48)}
    want = {(1, keys.tor, f"t{t}"): [f"n{2 * t}", f"n{2 * t + 1}"] for t in range(24)}
    want.update({(2, keys.spine, f"s{s}"): sorted(f"t{t}" for t in range(4 * s, 4 * s + 4)) for s in range(6)})
    slow = ("--kube-api-qps=4", "--kube-api-burst=1")
    with nodes(core_v1, keys, labels), replica(control_plane, tmp_path, keys, namespace, "first", *slow) as first:
        second = Replica(control_plane, tmp_path / "second.log", keys, namespace, "second", *slow)
        try:
            wait_for(lambda: "waiting to acquire" in second.text(), TIMEOUT, what="the second replica waits")
            put_conf(core_v1, namespace, keys, conf(keys))
            wait_for(lambda: 3 <= len(made(custom, keys)) < len(want) - 5, TIMEOUT, interval=0.05,
                     what="the leader halfway through its reconcile")
            first.proc.kill()
            first.proc.wait()
            before = names_by_domain(custom, keys)
            assert "HyperNode discovery" not in second.text()  # the standby wrote nothing while it waited
            wait_for(second.leading, TIMEOUT, what="the standby takes the Lease")
            wait_topology(custom, keys, want, "the standby finishes the reconcile")
            after = names_by_domain(custom, keys)
            assert {d: after[d] for d in before} == before  # the first leader's HyperNodes kept
            assert "creating HyperNode" in second.text()
        finally:
            second.stop()
