"""The world changes while a gang binds (issue 31): its pod, its PodGroup or its node is deleted mid-bind.

The scheduler runs through the fault proxy (fault_proxy.py), whose `Hold` keeps the binding request of one pod
of a gang of 4 until the test has deleted something; the other three binds go through. Each test first asserts
that the fault struck mid-bind: when the delete happened, the proxy had answered some of the gang's binds (201)
and not the held one. Then what must hold: no partial gang left (the gang is completed or given up as
scheduler/adapter/partial.py says), no pod bound twice, no node over-committed, the scheduler alive.
"""

from __future__ import annotations

import json
import threading

import pytest
from chaos_helpers import (
    GROUP,
    TIMEOUT,
    bound_pods,
    gang_counts,
    gang_pod,
    list_pods,
    make_nodes,
    podgroup,
)
from controlplane import GPU_RESOURCE, assert_no_overcommit, create_gpu_node, node_is_ready, wait_for
from fault_proxy import Hold, Rule
from test_api_faults import Scene, gang, owned_pod


@pytest.fixture
def scene(control_plane, core_v1, custom, new_namespace, proxied, tmp_path):
    s = Scene(control_plane, core_v1, custom, new_namespace("mid-bind"), proxied, tmp_path)
    try:
        yield s
    finally:
        existing = {n.metadata.name for n in core_v1.list_node().items}
        s.nodes = [n for n in s.nodes if n in existing]  # a test may have deleted its node
        s.close()


def hold_bind(scene: Scene, pod: str) -> tuple[Rule, threading.Event]:
    release = threading.Event()
    return scene.proxy.add(Rule("POST", scene.bind_path(pod), Hold(release, timeout=TIMEOUT), times=1)), release


def others_answered(scene: Scene, gang_pods: list[str], held: str) -> bool:
    """Whether the proxy has recorded an answer to every bind of the gang but the held one. (The apiserver stores a
    bind before the proxy relays its answer, so a test that sees the pods bound may be ahead of the proxy's
    record: it waits for both.)"""
    return all(scene.binds(p) for p in gang_pods if p != held)


def assert_struck_mid_bind(scene: Scene, gang_pods: list[str], held: str) -> dict[str, list[int | None]]:
    """When called (just before the delete): the other pods' binds answered 201, the held one not answered."""
    answered = {p: scene.binds(p) for p in gang_pods}
    assert answered[held] == [], f"the held bind of {held} was answered before the fault: {answered}"
    done = [p for p in gang_pods if p != held and answered[p] == [201]]
    assert 0 < len(done) < len(gang_pods), f"not mid-bind: {answered}"
    return answered


def test_a_pod_deleted_while_its_bind_is_in_flight_is_dropped_and_its_replacement_completes_the_gang(scene):
    """g-3's bind is held while g-3 is deleted: released, it reaches the apiserver for a pod that is gone and is
    answered 404 (the binder's "deleted before its bind" path: the pod is dropped, not retried). Its controller
    (here the test) makes a new g-3; the gang, 3/4 bound, is completed first by allocate: 4 bound, each once."""
    core_v1, ns = scene.core_v1, scene.namespace
    scene.nodes = make_nodes(core_v1, scene.tag, 1, gpus=4)
    owner = json.loads(core_v1.create_namespaced_config_map(ns, {"metadata": {"name": "controller"}},
                                                            _preload_content=False).data)
    held, release = hold_bind(scene, "g-3")
    gangs = gang("g", 4)
    scene.custom.create_namespaced_custom_object(GROUP, "v1beta1", ns, "podgroups", podgroup("g", 4))
    for name in gangs["g"]:
        core_v1.create_namespaced_pod(ns, owned_pod(name, "g", scene.tag, owner))
    scene.start()
    try:
        wait_for(lambda: held.fired == 1 and len(bound_pods(core_v1, ns)) == 3
                 and others_answered(scene, gangs["g"], "g-3"), TIMEOUT, interval=0.1,
                 what="g-0..2 bound, the bind of g-3 held")
        assert_struck_mid_bind(scene, gangs["g"], "g-3")
        old_uid = core_v1.read_namespaced_pod("g-3", ns).metadata.uid
        core_v1.delete_namespaced_pod("g-3", ns, grace_period_seconds=0)
        wait_for(lambda: "g-3" not in {p["metadata"]["name"] for p in list_pods(core_v1, ns)}, TIMEOUT,
                 what="g-3 deleted")
    finally:
        release.set()
    wait_for(lambda: scene.binds("g-3"), TIMEOUT, what="the held bind answered")
    assert scene.binds("g-3") == [404]  # the bind named the deleted pod: refused, nothing bound in its place
    assert bound_pods(core_v1, ns).keys() == {"g-0", "g-1", "g-2"}
    core_v1.create_namespaced_pod(ns, owned_pod("g-3", "g", scene.tag, owner))  # what its controller does
    assert core_v1.read_namespaced_pod("g-3", ns).metadata.uid != old_uid
    scene.wait_whole(gangs, "the gang completed with the new g-3")
    assert scene.binds("g-3") == [404, 201]
    scene.assert_bound_once(gangs["g"])
    assert "was deleted before its bind: dropped" in scene.scheduler.log()


def test_a_podgroup_deleted_while_its_gang_binds_leaves_the_gang_whole_and_its_gpus_counted(scene):
    """g-3's bind is held while the gang's PodGroup is deleted. The cycle had decided for the whole gang, so the
    held bind lands (the pod still exists, its UID unchanged): the gang ends whole, not 3/4. Its pods, now of no
    PodGroup, still hold their GPUs for the scheduler: a gang of 5 that would fit only if they were forgotten is
    found unschedulable and none of it is bound. The deleted PodGroup is not recreated by a status write."""
    core_v1, custom, ns = scene.core_v1, scene.custom, scene.namespace
    scene.nodes = make_nodes(core_v1, scene.tag, 1, gpus=8)
    held, release = hold_bind(scene, "g-3")
    gangs = gang("g", 4)
    custom.create_namespaced_custom_object(GROUP, "v1beta1", ns, "podgroups", podgroup("g", 4))
    for name in gangs["g"]:
        core_v1.create_namespaced_pod(ns, gang_pod(name, "g", scene.tag))
    scene.start()

    def podgroups() -> set[str]:
        return {g["metadata"]["name"] for g in
                custom.list_namespaced_custom_object(GROUP, "v1beta1", ns, "podgroups")["items"]}

    try:
        wait_for(lambda: held.fired == 1 and len(bound_pods(core_v1, ns)) == 3
                 and others_answered(scene, gangs["g"], "g-3"), TIMEOUT, interval=0.1,
                 what="g-0..2 bound, the bind of g-3 held")
        assert_struck_mid_bind(scene, gangs["g"], "g-3")
        custom.delete_namespaced_custom_object(GROUP, "v1beta1", ns, "podgroups", "g")
        wait_for(lambda: "g" not in podgroups(), TIMEOUT, what="the PodGroup deleted")
    finally:
        release.set()
    wait_for(lambda: scene.binds("g-3"), TIMEOUT, what="the held bind answered")
    assert scene.binds("g-3") == [201]
    assert gang_counts(scene.wait_whole(gangs, "the gang whole"), gangs) == {"g": 4}
    scene.assert_bound_once(gangs["g"])

    big = gang("h", 5)  # 5 GPUs: fits the node's 8 only if g's 4 were forgotten
    custom.create_namespaced_custom_object(GROUP, "v1beta1", ns, "podgroups", podgroup("h", 5))
    for name in big["h"]:
        core_v1.create_namespaced_pod(ns, gang_pod(name, "h", scene.tag))

    def unschedulable(group: str) -> bool:
        obj = custom.get_namespaced_custom_object(GROUP, "v1beta1", ns, "podgroups", group)
        return any(c.get("type") == "Unschedulable" and c.get("status") == "True"
                   for c in (obj.get("status") or {}).get("conditions") or ())

    # Decided either way: h found unschedulable (right), or some of h bound (its GPUs counted twice).
    wait_for(lambda: unschedulable("h") or gang_counts(bound_pods(core_v1, ns), big)["h"], TIMEOUT, interval=0.2,
             what="gang h decided")
    assert gang_counts(bound_pods(core_v1, ns), {**gangs, **big}) == {"g": 4, "h": 0}
    assert podgroups() == {"h"}  # g was not recreated by a status write of the scheduler
    usage = assert_no_overcommit(core_v1)
    assert usage[scene.nodes[0]][1].get(GPU_RESOURCE, 0) == 4
    assert scene.scheduler.alive(), scene.scheduler.log()[-3000:]


SLOT = "volcano-py.test/slot"


def test_a_node_deleted_while_its_gang_binds_ends_with_nothing_of_the_gang_bound(scene):
    """A gang of 4 is spread over nodes a and b (2 pods each, by nodeSelector); the bind of g-3 to b is held
    while b is deleted. The apiserver does not check that a Binding's node exists, so the held bind lands on a
    node that is gone (the scheduler decided before the delete; it cannot call the bind back). Then what the
    cluster does: the pod GC controller deletes the pods bound to the missing node (after its 40 s quarantine;
    done here by the test, at once) and their controller (the test) makes them again. They fit nowhere, so the
    gang is partly bound on a, and the partial-gang rule (3 s here) gives it up: its pods on a, owned by a
    controller, are evicted. The invariant: nothing of the gang on the missing node, the gang not left partly
    bound (it holds nothing), no over-commit, the scheduler alive."""
    core_v1, custom, ns = scene.core_v1, scene.custom, scene.namespace
    names = {slot: f"chaos-{scene.tag}-{slot}" for slot in ("a", "b")}
    for slot, name in names.items():
        create_gpu_node(core_v1, name, gpus=2, labels={"volcano-py.test/node-set": scene.tag, SLOT: slot})
        scene.nodes.append(name)
    for name in names.values():
        wait_for(lambda n=name: node_is_ready(core_v1, n), TIMEOUT, what=f"node {name} Ready")
    owner = json.loads(core_v1.create_namespaced_config_map(ns, {"metadata": {"name": "controller"}},
                                                            _preload_content=False).data)

    def pod(i: int) -> dict:
        manifest = owned_pod(f"g-{i}", "g", scene.tag, owner)
        manifest["spec"]["nodeSelector"][SLOT] = "a" if i < 2 else "b"
        return manifest

    held, release = hold_bind(scene, "g-3")
    gangs = gang("g", 4)
    custom.create_namespaced_custom_object(GROUP, "v1beta1", ns, "podgroups", podgroup("g", 4))
    for i in range(4):
        core_v1.create_namespaced_pod(ns, pod(i))
    scene.start("--partial-gang-timeout=3s")
    try:
        wait_for(lambda: held.fired == 1 and len(bound_pods(core_v1, ns)) == 3
                 and others_answered(scene, gangs["g"], "g-3"), TIMEOUT, interval=0.1,
                 what="g-0..2 bound, the bind of g-3 held")
        assert_struck_mid_bind(scene, gangs["g"], "g-3")
        assert bound_pods(core_v1, ns)["g-2"] == names["b"]
        core_v1.delete_node(names["b"])
        wait_for(lambda: names["b"] not in {n.metadata.name for n in core_v1.list_node().items}, TIMEOUT,
                 what="node b deleted")
    finally:
        release.set()
    wait_for(lambda: scene.binds("g-3"), TIMEOUT, what="the held bind answered")
    assert scene.binds("g-3") == [201]  # the apiserver took a bind to a node that no longer exists
    assert bound_pods(core_v1, ns) == {"g-0": names["a"], "g-1": names["a"], "g-2": names["b"], "g-3": names["b"]}

    for i in (2, 3):  # the pod GC controller's part, then the controller's
        core_v1.delete_namespaced_pod(f"g-{i}", ns, grace_period_seconds=0)
    wait_for(lambda: not {"g-2", "g-3"} & {p["metadata"]["name"] for p in list_pods(core_v1, ns)}, TIMEOUT,
             what="the orphaned pods deleted")
    for i in (2, 3):
        core_v1.create_namespaced_pod(ns, pod(i))

    def gang_holds_nothing() -> bool:
        pods = {p["metadata"]["name"]: p for p in list_pods(core_v1, ns)}
        return set(pods) == {"g-2", "g-3"} and not any(p["spec"].get("nodeName") for p in pods.values())

    wait_for(gang_holds_nothing, TIMEOUT, interval=0.2, what="g-0, g-1 evicted from a; g-2, g-3 never bound")
    usage = assert_no_overcommit(core_v1)
    assert usage[names["a"]][1].get(GPU_RESOURCE, 0) == 0
    raw = json.loads(core_v1.list_namespaced_event(ns, _preload_content=False).data)["items"]
    assert ("PodGroup", "PartialGangTimeout") in {(e["involvedObject"]["kind"], e["reason"]) for e in raw}
    assert scene.scheduler.alive(), scene.scheduler.log()[-3000:]
