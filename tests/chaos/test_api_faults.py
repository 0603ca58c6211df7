"""Faults on the scheduler's API calls, injected by a proxy between it and the apiserver (issue 22).

The scheduler runs as a process whose kubeconfig points to `fault_proxy.FaultProxy`, which forwards to the
harness's real apiserver and fails the calls each test names: a bind that gets 500 once, a bind whose response
(or request) is delayed past the scheduler's request timeout, a bind the apiserver refuses with 409 because its
pod was deleted and recreated meanwhile, PodGroup and pod status writes that fail for a while, and binds
throttled with 429 and Retry-After. Each test asserts that its fault fired (the proxy counts), then what must
hold: every gang whole (or given up with nothing left holding GPUs), no pod bound twice, no node over-committed,
statuses written once the fault clears, the scheduler alive.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from chaos_helpers import (
    GROUP,
    TIMEOUT,
    bound_pods,
    create_gangs,
    gang_counts,
    gang_pod,
    list_pods,
    make_nodes,
    podgroup,
    scheduled_events_per_pod,
    start_scheduler,
)
from controlplane import GPU_RESOURCE, assert_no_overcommit, wait_for
from fault_proxy import CutWatch, Delay, Hold, Respond, Rule

REQUEST_TIMEOUT = 2.0  # the scheduler's --request-timeout in the timeout test


class Scene:
    """One test's world: a namespace, nodes of its own, the scheduler through the proxy (started by `start`)."""

    def __init__(self, control_plane, core_v1, custom, namespace: str, proxied, log_dir):
        self.control_plane, self.core_v1, self.custom, self.namespace = control_plane, core_v1, custom, namespace
        self.proxy, self.kubeconfig = proxied
        self.proxy.clear()
        self.log_dir = log_dir
        self.tag = uuid.uuid4().hex[:6]
        self.nodes: list[str] = []
        self.scheduler = None

    def start(self, *args: str) -> None:
        self.scheduler = start_scheduler(self.control_plane, self.log_dir, *args, kubeconfig=self.kubeconfig)

    def bind_path(self, pod: str = "[^/]+") -> str:
        return rf"^/api/v1/namespaces/{self.namespace}/pods/{pod}/binding$"

    def binds(self, pod: str) -> list[int | None]:
        """Statuses of the binding requests of one pod the proxy saw, in the order they were answered."""
        return [s.status for s in self.proxy.requests("POST", self.bind_path(pod))]

    def wait_whole(self, gangs: dict[str, list[str]], what: str) -> dict[str, str]:
        whole = {g: len(p) for g, p in gangs.items()}
        wait_for(lambda: gang_counts(bound_pods(self.core_v1, self.namespace), gangs) == whole, TIMEOUT,
                 interval=0.2, what=what)
        return bound_pods(self.core_v1, self.namespace)

    def assert_bound_once(self, pods: list[str]) -> None:
        """Each pod has one binding the apiserver took (201) and one `Scheduled` event; nothing over-committed."""
        assert {p: self.binds(p).count(201) for p in pods} == dict.fromkeys(pods, 1)

        def scheduled() -> dict[str, int]:
            events = scheduled_events_per_pod(self.core_v1, self.namespace)
            return {p: sum(n for (name, _), n in events.items() if name == p) for p in pods}

        # Events are sent in the background, after the binds: wait for one per pod, then look for a second.
        wait_for(lambda: all(scheduled().values()), TIMEOUT, interval=0.2, what="a Scheduled event per pod")
        assert scheduled() == dict.fromkeys(pods, 1)
        assert_no_overcommit(self.core_v1)
        assert self.scheduler is not None and self.scheduler.alive(), self.scheduler.log()[-3000:]

    def close(self) -> None:
        """Stop the scheduler, and leave no pod behind: a pod still terminating would count in the default
        Queue's allocation and hold back the next test's gang."""
        self.proxy.clear()
        if self.scheduler is not None:
            self.scheduler.stop()
        self.core_v1.delete_collection_namespaced_pod(self.namespace, grace_period_seconds=0)
        wait_for(lambda: not list_pods(self.core_v1, self.namespace), TIMEOUT, interval=0.2,
                 what=f"the pods of {self.namespace} gone")
        for name in self.nodes:
            self.core_v1.delete_node(name)


@pytest.fixture
def scene(control_plane, core_v1, custom, new_namespace, proxied, tmp_path):
    s = Scene(control_plane, core_v1, custom, new_namespace("faults"), proxied, tmp_path)
    try:
        yield s
    finally:
        s.close()


def gang(name: str, size: int) -> dict[str, list[str]]:
    return {name: [f"{name}-{i}" for i in range(size)]}


def test_a_bind_answered_500_once_is_retried_and_the_gang_ends_whole(scene):
    scene.nodes = make_nodes(scene.core_v1, scene.tag, 1)
    gangs = gang("g", 4)
    rule = scene.proxy.add(Rule("POST", scene.bind_path("g-2"), Respond(500), times=1))
    create_gangs(scene.core_v1, scene.custom, scene.namespace, scene.tag, gangs)
    scene.start()
    scene.wait_whole(gangs, "the gang whole after one bind got 500")
    assert rule.fired == 1
    assert scene.binds("g-2") == [500, 201]
    scene.assert_bound_once(gangs["g"])


@pytest.mark.parametrize("late", ["response", "request"])
def test_a_bind_that_times_out_is_neither_sent_twice_nor_lost(scene, late):
    """`response`: the apiserver binds the pod at once, the client sees its timeout first; the scheduler must
    find it bound, not bind it again. `request`: the bind reaches the apiserver after the client gave up; the
    scheduler binds the pod again and the late request is refused (409), so the pod is bound once."""
    scene.nodes = make_nodes(scene.core_v1, scene.tag, 1)
    gangs = gang("g", 4)
    rule = scene.proxy.add(Rule("POST", scene.bind_path("g-1"), Delay(2 * REQUEST_TIMEOUT, after=late == "response"),
                                times=1))
    create_gangs(scene.core_v1, scene.custom, scene.namespace, scene.tag, gangs)
    scene.start(f"--request-timeout={REQUEST_TIMEOUT:g}s")
    scene.wait_whole(gangs, "the gang whole after a bind timed out")
    expected = [201] if late == "response" else [201, 409]
    wait_for(lambda: len(scene.binds("g-1")) == len(expected), TIMEOUT, what="the delayed bind answered")
    assert rule.fired == 1
    assert scene.binds("g-1") == expected
    scene.assert_bound_once(gangs["g"])


def owned_pod(name: str, group: str, tag: str, owner: dict) -> dict:
    """A gang pod with a controller ownerReference: the partial-gang rule evicts such pods when it gives up."""
    pod = gang_pod(name, group, tag)
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
                                           "uid": owner["metadata"]["uid"], "controller": True}]
    return pod


def test_a_bind_refused_409_for_a_recreated_pod_gives_the_gang_up_and_frees_its_gpus(scene):
    """The bind of g-3 is held in the proxy while its pod is deleted and recreated under the same name (what a
    controller does), and a pod of another scheduler takes the GPU it left free. The held bind then reaches the
    apiserver for a pod that no longer exists: it must be refused (409, as Volcano's binds carry the pod's UID), not
    bind the new pod onto a full node. The gang is left 3/4 with a pod that cannot fit, so after the partial-gang
    timeout it is given up: its bound pods, owned by a controller, are evicted, and hold no GPU any more."""
    core_v1, ns = scene.core_v1, scene.namespace
    scene.nodes = make_nodes(core_v1, scene.tag, 1, gpus=4)
    node = scene.nodes[0]
    owner = json.loads(core_v1.create_namespaced_config_map(ns, {"metadata": {"name": "controller"}},
                                                            _preload_content=False).data)
    release = threading.Event()
    held = scene.proxy.add(Rule("POST", scene.bind_path("g-3"), Hold(release), times=1))
    scene.custom.create_namespaced_custom_object(GROUP, "v1beta1", ns, "podgroups", podgroup("g", 4))
    for i in range(4):
        core_v1.create_namespaced_pod(ns, owned_pod(f"g-{i}", "g", scene.tag, owner))
    scene.start("--partial-gang-timeout=3s")
    try:
        wait_for(lambda: held.fired == 1 and len(bound_pods(core_v1, ns)) == 3, TIMEOUT, interval=0.1,
                 what="g-0..2 bound, the bind of g-3 held")
        old_uid = core_v1.read_namespaced_pod("g-3", ns).metadata.uid
        core_v1.delete_namespaced_pod("g-3", ns, grace_period_seconds=0)
        wait_for(lambda: "g-3" not in {p["metadata"]["name"] for p in list_pods(core_v1, ns)}, TIMEOUT,
                 what="g-3 deleted")
        squatter = gang_pod("squatter", "none", scene.tag)
        squatter["spec"].update(schedulerName="another-scheduler", nodeName=node)
        core_v1.create_namespaced_pod(ns, squatter)
        core_v1.create_namespaced_pod(ns, owned_pod("g-3", "g", scene.tag, owner))
        assert core_v1.read_namespaced_pod("g-3", ns).metadata.uid != old_uid
    finally:
        release.set()
    wait_for(lambda: scene.binds("g-3"), TIMEOUT, what="the held bind answered")
    assert scene.binds("g-3")[0] == 409
    given_up = time.monotonic()

    def gang_holds_nothing() -> bool:
        pods = {p["metadata"]["name"]: p for p in list_pods(core_v1, ns)}
        return set(pods) == {"g-3", "squatter"} and not pods["g-3"]["spec"].get("nodeName")

    wait_for(gang_holds_nothing, TIMEOUT, interval=0.2, what="the gang's bound pods evicted, g-3 never bound")
    freed_after = time.monotonic() - given_up
    usage = assert_no_overcommit(core_v1)
    assert usage[node][1].get(GPU_RESOURCE, 0) == 1  # the squatter's GPU, and nothing of the gang
    raw = json.loads(core_v1.list_namespaced_event(ns, _preload_content=False).data)["items"]
    reasons = {(e["involvedObject"]["kind"], e["reason"]) for e in raw}
    assert ("PodGroup", "PartialGangTimeout") in reasons
    assert scene.scheduler.alive()
    print(f"\n409 on the held bind of the recreated g-3; the gang given up, its GPUs free {freed_after:.1f}s later")


def test_failing_status_writes_lose_no_decision_and_are_written_once_they_work(scene):
    """PodGroup status writes fail (500) while gang a is bound and gang b arrives; then only pod status writes
    fail while gang c, which can never fit, is told so; then nothing fails. Both gangs are bound meanwhile,
    and every status is written once its writes work again."""
    core_v1, ns = scene.core_v1, scene.namespace
    scene.nodes = make_nodes(core_v1, scene.tag, 1)
    pg_path = rf"^/apis/{GROUP}/v1beta1/namespaces/{ns}/podgroups/[^/]+(/status)?$"
    pg_rules = [scene.proxy.add(Rule(verb, pg_path, Respond(500))) for verb in ("PATCH", "PUT")]
    pod_rule = scene.proxy.add(Rule("PATCH", rf"^/api/v1/namespaces/{ns}/pods/[^/]+/status$", Respond(500)))
    create_gangs(core_v1, scene.custom, ns, scene.tag, gang("a", 4))
    scene.start()
    scene.wait_whole(gang("a", 4), "gang a bound while its status cannot be written")
    create_gangs(core_v1, scene.custom, ns, scene.tag, gang("b", 4))
    scene.wait_whole({**gang("a", 4), **gang("b", 4)}, "gang b bound too")
    create_gangs(core_v1, scene.custom, ns, scene.tag, gang("c", 2), gpus=8)  # 16 GPUs: never fits
    wait_for(lambda: pg_rules[0].fired >= 3, TIMEOUT, what="status writes of a, b and c refused")

    def phase(group: str) -> str | None:
        obj = scene.custom.get_namespaced_custom_object(GROUP, "v1beta1", ns, "podgroups", group)
        return (obj.get("status") or {}).get("phase")

    def unschedulable(group: str) -> bool:
        obj = scene.custom.get_namespaced_custom_object(GROUP, "v1beta1", ns, "podgroups", group)
        return any(c.get("type") == "Unschedulable" and c.get("status") == "True"
                   for c in (obj.get("status") or {}).get("conditions") or ())

    assert phase("a") != "Running" and not unschedulable("c")  # the fault held: nothing written yet
    for rule in pg_rules:
        scene.proxy.remove(rule)
    wait_for(lambda: phase("a") == "Running" and phase("b") == "Running" and unschedulable("c"), TIMEOUT,
             interval=0.2, what="the PodGroup statuses written once their writes work")
    wait_for(lambda: pod_rule.fired >= 2, TIMEOUT, what="c's pod conditions refused")

    def pod_conditions_written() -> bool:
        pods = [p for p in list_pods(core_v1, ns) if p["metadata"]["name"].startswith("c-")]
        return len(pods) == 2 and all(
            any(c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
                for c in p["status"].get("conditions") or ()) for p in pods)

    assert not pod_conditions_written()
    scene.proxy.remove(pod_rule)
    wait_for(pod_conditions_written, TIMEOUT, interval=0.2, what="c's pods say Unschedulable once writes work")
    scene.assert_bound_once(gang("a", 4)["a"] + gang("b", 4)["b"])


def test_binds_throttled_with_429_wait_their_retry_after_and_complete_without_errors(scene):
    core_v1, ns = scene.core_v1, scene.namespace
    scene.nodes = make_nodes(core_v1, scene.tag, 1)
    gangs = gang("g", 8)
    rule = scene.proxy.add(Rule("POST", scene.bind_path(), Respond(429, "throttled", retry_after=1), times=6))
    create_gangs(core_v1, scene.custom, ns, scene.tag, gangs)
    scene.start()
    scene.wait_whole(gangs, "the throttled gang whole")
    assert rule.fired == 6
    scene.assert_bound_once(gangs["g"])
    raw = json.loads(core_v1.list_namespaced_event(ns, _preload_content=False).data)["items"]
    assert [(e["involvedObject"]["name"], e["reason"], e["message"]) for e in raw if e.get("type") == "Warning"] == []
    assert [p["metadata"]["name"] for p in list_pods(core_v1, ns) if p["status"].get("phase") == "Failed"] == []
    levels = [line.split(" ", 3)[2] for line in scene.scheduler.log().splitlines() if line[:2] == "20"]
    assert levels and [lv for lv in levels if lv in ("WARNING", "ERROR", "CRITICAL")] == []



def test_pod_watches_cut_inside_an_event_resume_and_the_gang_is_bound_whole(scene):
    """The scheduler's pod watch is cut in the middle of its second event, three times, while a gang's pods
    arrive one by one: each time the cache reconnects from the last event it read whole, and misses none."""
    core_v1, ns = scene.core_v1, scene.namespace
    scene.nodes = make_nodes(core_v1, scene.tag, 1)
    rule = scene.proxy.add(Rule("GET", r"^/api/v1/pods$", CutWatch(1), query=r"(^|&)watch=1", times=3))
    scene.start()
    gangs = gang("g", 6)
    scene.custom.create_namespaced_custom_object(GROUP, "v1beta1", ns, "podgroups", podgroup("g", 6))
    for name in gangs["g"]:
        core_v1.create_namespaced_pod(ns, gang_pod(name, "g", scene.tag))
    wait_for(lambda: scene.proxy.cuts == 3, TIMEOUT, interval=0.1, what="three pod watches cut")
    scene.wait_whole(gangs, "the gang whole after its watch was cut")
    assert rule.fired == 3
    scene.assert_bound_once(gangs["g"])
