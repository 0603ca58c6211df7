"""Volcano's NodeShard contract on a real control plane: `volcano-py scheduler --scheduler-sharding-mode
none|soft|hard` keeping to a NodeShard written by hand as Volcano's sharding controller writes it (spec.nodesDesired
only; the status is the schedulers'), the two-phase handoff beside another scheduler's NodeShard, and
`volcano-py controllers` running the sharding controller from Volcano's ConfigMap.

Every scheduler and controller here is a process (`python -m scheduler.cli`); each test has its own nodes (pods
select them), NodeShard names and Lease names.
"""

from __future__ import annotations

import json

import pytest
from controlplane import wait_for
from kubernetes import client
from processes import Process
from test_scheduler import GROUP, TIMEOUT, bound_pods, gang_pod, pg_status, podgroup

SHARD = ("shard.volcano.sh", "v1alpha1", "nodeshards")
CONF = (
    'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n'
    "- plugins:\n  - name: predicates\n  - name: proportion\n  - name: binpack\n"
)


@pytest.fixture
def processes(control_plane, tmp_path):
    started: list[Process] = []

    def start(command: str, name: str, *args: str) -> Process:
        if command == "scheduler":
            conf = tmp_path / "volcano-scheduler.conf"
            conf.write_text(CONF)
            args = ("--scheduler-conf", str(conf), "--schedule-period", "200ms", *args)
        p = Process(control_plane, tmp_path, name, command, "--log-level", "debug", *args)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()


@pytest.fixture
def shards(custom):
    """NodeShards made by a test (`shards(name, desired)`, as Volcano's controller creates them), deleted after."""
    made: list[str] = []

    def make(name: str, desired: list[str]) -> str:
        custom.create_cluster_custom_object(*SHARD, {
            "apiVersion": "shard.volcano.sh/v1alpha1", "kind": "NodeShard", "metadata": {"name": name},
            "spec": {"nodesDesired": desired}})
        made.append(name)
        return name

    yield make
    for name in made:
        try:
            custom.delete_cluster_custom_object(*SHARD, name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise


def shard(custom, name: str) -> dict:
    try:
        return custom.get_cluster_custom_object(*SHARD, name)
    except client.ApiException as exc:
        if exc.status == 404:
            return {}
        raise


def status(custom, name: str) -> dict[str, list[str]]:
    st = shard(custom, name).get("status") or {}
    return {k: sorted(st.get(k) or ()) for k in ("nodesInUse", "nodesToAdd", "nodesToRemove")}


def set_desired(custom, name: str, desired: list[str]) -> None:
    """As Volcano's controller updates a NodeShard: the spec (an Update with the resourceVersion read)."""
    obj = custom.get_cluster_custom_object(*SHARD, name)
    obj["spec"]["nodesDesired"] = desired
    custom.replace_cluster_custom_object(*SHARD, name, obj)


def set_in_use(custom, name: str, in_use: list[str]) -> None:
    """As another scheduler (Volcano's agent scheduler) publishes its shard's status."""
    obj = custom.get_cluster_custom_object(*SHARD, name)
    desired = set(obj["spec"]["nodesDesired"])
    obj["status"] = {"nodesInUse": in_use, "nodesToAdd": sorted(desired - set(in_use)),
                     "nodesToRemove": sorted(set(in_use) - desired)}
    custom.replace_cluster_custom_object_status(*SHARD, name, obj)


def create_gang(core_v1, custom, namespace: str, name: str, size: int, tag: str) -> list[str]:
    custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", podgroup(name, size))
    for i in range(size):
        core_v1.create_namespaced_pod(namespace, gang_pod(f"{name}-{i}", name, tag, gpus=1))
    return [f"{name}-{i}" for i in range(size)]


def why_pending(core_v1, custom, namespace: str, group: str) -> str:
    """The PodGroup's Unschedulable message and its pods' PodScheduled messages, together."""
    texts = [c.get("message") or "" for c in pg_status(custom, namespace, group).get("conditions") or ()]
    pods = json.loads(core_v1.list_namespaced_pod(namespace, _preload_content=False).data)["items"]
    for p in pods:
        texts += [c.get("message") or "" for c in (p.get("status") or {}).get("conditions") or ()]
    return "\n".join(texts)


def test_hard_mode_keeps_to_the_shard_and_publishes_its_status(processes, core_v1, custom, namespace, node_set,
                                                               shards):
    nodes = [node_set(gpus=1) for _ in range(3)]
    tag = node_set.tag
    name = shards(f"hard-{tag}", nodes[:2])
    processes("scheduler", f"hard-{tag}", "--scheduler-sharding-mode=hard", f"--scheduler-sharding-name={name}")
    wait_for(lambda: status(custom, name) == {"nodesInUse": sorted(nodes[:2]), "nodesToAdd": [],
                                              "nodesToRemove": []}, TIMEOUT, what="the shard's status published")
    create_gang(core_v1, custom, namespace, "three", 3, tag)  # fits the three nodes, not the shard's two
    wait_for(lambda: "node isn't in scheduler node shard" in why_pending(core_v1, custom, namespace, "three"),
             TIMEOUT, what="Volcano's reason for the node outside the shard")
    create_gang(core_v1, custom, namespace, "two", 2, tag)
    wait_for(lambda: len([p for p in bound_pods(core_v1, namespace) if p.startswith("two-")]) == 2, TIMEOUT,
             what="the gang of two bound")
    placed = bound_pods(core_v1, namespace)
    assert sorted(placed.values()) == sorted(nodes[:2]) and not [p for p in placed if p.startswith("three-")]


def test_soft_mode_takes_the_shards_nodes_first_then_the_others(processes, core_v1, custom, namespace, node_set,
                                                                shards):
    nodes = [node_set(gpus=2) for _ in range(2)]  # binpack alone would fill nodes[0] first (name order)
    tag = node_set.tag
    name = shards(f"soft-{tag}", [nodes[1]])
    processes("scheduler", f"soft-{tag}", "--scheduler-sharding-mode=soft", f"--scheduler-sharding-name={name}")
    wait_for(lambda: status(custom, name)["nodesInUse"] == [nodes[1]], TIMEOUT, what="the shard's status published")
    create_gang(core_v1, custom, namespace, "first", 2, tag)
    wait_for(lambda: len(bound_pods(core_v1, namespace)) == 2, TIMEOUT, what="the first gang bound")
    assert set(bound_pods(core_v1, namespace).values()) == {nodes[1]}  # both GPUs of the shard's node
    create_gang(core_v1, custom, namespace, "second", 1, tag)  # the shard is full: a node outside
    wait_for(lambda: len(bound_pods(core_v1, namespace)) == 3, TIMEOUT, what="the second gang bound")
    assert bound_pods(core_v1, namespace)["second-0"] == nodes[0]


def test_beside_another_schedulers_shard_a_node_moves_in_two_phases(processes, core_v1, custom, namespace, node_set,
                                                                    shards):
    """The other NodeShard stands for Volcano's agent scheduler: written by hand, its status too."""
    n0, n1, n2 = (node_set(gpus=1) for _ in range(3))
    tag = node_set.tag
    ours, agent = shards(f"ours-{tag}", [n0, n1]), shards(f"agent-{tag}", [n2])
    set_in_use(custom, agent, [n2])
    processes("scheduler", f"ours-{tag}", "--scheduler-sharding-mode=hard", f"--scheduler-sharding-name={ours}")
    wait_for(lambda: status(custom, ours)["nodesInUse"] == sorted([n0, n1]), TIMEOUT, what="ours in use")
    # The controller moves n1 to the agent: ours lets it go at its next session's end, and says so.
    set_desired(custom, ours, [n0])
    set_desired(custom, agent, [n1, n2])
    wait_for(lambda: status(custom, ours) == {"nodesInUse": [n0], "nodesToAdd": [], "nodesToRemove": []}, TIMEOUT,
             what="ours released n1")
    set_in_use(custom, agent, [n1, n2])  # the agent takes it only now
    # The controller moves n2 to ours while the agent still uses it: ours waits, naming it to add.
    set_desired(custom, agent, [n1])
    set_desired(custom, ours, [n0, n2])
    wait_for(lambda: status(custom, ours) == {"nodesInUse": [n0], "nodesToAdd": [n2], "nodesToRemove": []},
             TIMEOUT, what="ours waits for n2")
    create_gang(core_v1, custom, namespace, "pair", 2, tag)  # needs n0 and n2
    wait_for(lambda: "node isn't in scheduler node shard" in why_pending(core_v1, custom, namespace, "pair"),
             TIMEOUT, what="the pair waits while n2 is the agent's")
    assert bound_pods(core_v1, namespace) == {}
    set_in_use(custom, agent, [n1])  # the agent lets n2 go
    wait_for(lambda: len(bound_pods(core_v1, namespace)) == 2, TIMEOUT, what="the pair bound on n0 and n2")
    assert sorted(bound_pods(core_v1, namespace).values()) == sorted([n0, n2])
    assert status(custom, ours) == {"nodesInUse": sorted([n0, n2]), "nodesToAdd": [], "nodesToRemove": []}
    assert not set(status(custom, ours)["nodesInUse"]) & set(status(custom, agent)["nodesInUse"])


def test_mode_none_reads_no_nodeshard_and_places_anywhere(processes, core_v1, custom, namespace, node_set, shards):
    nodes = [node_set(gpus=1) for _ in range(2)]
    tag = node_set.tag
    name = shards(f"none-{tag}", [nodes[0]])
    sched = processes("scheduler", f"none-{tag}", f"--scheduler-sharding-name={name}")  # mode none: the default
    create_gang(core_v1, custom, namespace, "two", 2, tag)
    wait_for(lambda: len(bound_pods(core_v1, namespace)) == 2, TIMEOUT, what="bound on both nodes")
    assert sorted(bound_pods(core_v1, namespace).values()) == sorted(nodes)
    assert shard(custom, name).get("status") in (None, {})  # nobody wrote it
    assert "NodeShard" not in sched.log()  # never listed, watched or named


def test_sharding_controller_writes_nodeshards_from_volcanos_configmap(processes, core_v1, custom, namespace,
                                                                       node_set, shards):
    idle, busy = node_set(gpus=1), node_set(gpus=1)
    tag = node_set.tag
    load = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "load"},
            "spec": {"nodeName": busy, "containers": [{"name": "main", "image": "busybox",
                                                         "resources": {"requests": {"cpu": "48"}}}]}}
    core_v1.create_namespaced_pod(namespace, load)  # 48 of the node's 64 CPUs requested: 0.75
    low, high = f"low-{tag}", f"high-{tag}"
    shards(low, [])  # so that the fixture deletes them; the controller updates them
    shards(high, [])

    def conf(low_max: float) -> str:
        return (f"schedulerConfigs:\n"
                f"- name: {low}\n  type: volcano\n  policies:\n  - name: allocation-rate\n"
                f"    arguments: {{minCPUUtil: 0.0, maxCPUUtil: {low_max}}}\n"
                f"- name: {high}\n  type: agent\n  policies:\n  - name: allocation-rate\n"
                f"    arguments: {{minCPUUtil: 0.5, maxCPUUtil: 1.0}}\nshardSyncPeriod: 1s\n")

    cm = "volcano-sharding-configmap"
    core_v1.create_namespaced_config_map(namespace, {"metadata": {"name": cm}, "data": {"sharding.yaml": conf(0.5)}})
    ctl = processes("controllers", f"sharding-{tag}", "--controllers=*,+sharding-controller",
                    f"--sharding-configmap-namespace={namespace}", f"--leader-elect-lease-name=sharding-{tag}")

    def desired(name: str) -> list[str]:
        return (shard(custom, name).get("spec") or {}).get("nodesDesired") or []

    wait_for(lambda: idle in desired(low) and busy in desired(high), TIMEOUT, what="idle -> low, busy -> high")
    assert busy not in desired(low) and idle not in desired(high)
    # high's scheduler keeps to its shard and uses the busy node
    processes("scheduler", f"high-{tag}", "--scheduler-sharding-mode=hard", f"--scheduler-sharding-name={high}")
    wait_for(lambda: busy in status(custom, high)["nodesInUse"], TIMEOUT, what="high uses the busy node")
    # The ConfigMap changes (hot reload): low now takes nodes up to 0.8, so the busy node is low's.
    cmap = core_v1.read_namespaced_config_map(cm, namespace)
    cmap.data = {"sharding.yaml": conf(0.8)}
    core_v1.replace_namespaced_config_map(cm, namespace, cmap)
    wait_for(lambda: busy in desired(low) and busy not in desired(high), TIMEOUT, what="busy moved to low")
    wait_for(lambda: busy not in status(custom, high)["nodesInUse"], TIMEOUT, what="high released the busy node")
    # A malformed ConfigMap keeps the last good configuration, with one log line.
    cmap = core_v1.read_namespaced_config_map(cm, namespace)
    cmap.data = {"sharding.yaml": "schedulerConfigs: [{name: x, policies: [{name: nope}]}]"}
    core_v1.replace_namespaced_config_map(cm, namespace, cmap)
    syncs = ctl.log().count("nodes; desired: ")
    wait_for(lambda: ctl.log().count("nodes; desired: ") >= syncs + 3, TIMEOUT, what="three syncs after it")
    assert ctl.log().count("keeping the configuration read before") == 1
    assert busy in desired(low) and idle in desired(low) and busy not in desired(high)
    assert shard(custom, "x") == {}
