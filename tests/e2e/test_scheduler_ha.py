"""The scheduler as processes (issue 4, the rest): leader election, partly bound gangs, restarts, enqueue gates.

Every scheduler here is a `volcano-py scheduler` process, so SIGKILL is a real crash. Each test has its own
namespace and nodes (pods select them), and its own Lease name, so tests never compete.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from controlplane import GPU_RESOURCE, assert_no_overcommit, bind_pod, wait_for
from kubernetes import client
from processes import Process
from test_scheduler import GROUP, TIMEOUT, bound_pods, gang_pod, pg_status, podgroup

REPO = Path(__file__).resolve().parents[2]
CONF = (
    'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n'
    "- plugins:\n  - name: predicates\n  - name: proportion\n"
)
LEASE_NS = "volcano-py-system"


def scheduler_process(control_plane, tmp_path: Path, name: str, *args: str) -> Process:
    """`python -m scheduler.cli scheduler ...` as a replica named `name`, with its log in a file."""
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(CONF)
    return Process(control_plane, tmp_path, name, "scheduler", "--scheduler-conf", str(conf),
                   "--schedule-period", "200ms", "--log-level", "debug", "--leader-elect-identity", name, *args)


@pytest.fixture
def schedulers(control_plane, tmp_path):
    started: list[Process] = []

    def start(name: str, *args: str) -> Process:
        s = scheduler_process(control_plane, tmp_path, name, *args)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


@pytest.fixture
def coordination(api_client):
    return client.CoordinationV1Api(api_client)


def lease_spec(coordination, name: str) -> dict:
    try:
        lease = coordination.read_namespaced_lease(name, LEASE_NS)
    except client.ApiException as exc:
        if exc.status == 404:
            return {}
        raise
    return {"holder": lease.spec.holder_identity, "transitions": lease.spec.lease_transitions}


def scheduled_events(core_v1, namespace: str) -> dict[str, str]:
    """pod name -> reportingInstance of its Scheduled event."""
    raw = json.loads(core_v1.list_namespaced_event(namespace, _preload_content=False).data)["items"]
    return {
        e["involvedObject"]["name"]: e.get("reportingInstance", "")
        for e in raw
        if e.get("reason") == "Scheduled" and e["involvedObject"].get("kind") == "Pod"
    }


def create_gang(core_v1, custom, namespace: str, name: str, size: int, tag: str, *, gpus: int = 1,
                owner: dict | None = None, node_selector: dict | None = None) -> list[str]:
    custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", podgroup(name, size))
    names = []
    for i in range(size):
        pod = gang_pod(f"{name}-{i}", name, tag, gpus=gpus)
        if owner:
            pod["metadata"]["ownerReferences"] = [owner]
        if node_selector:
            pod["spec"]["nodeSelector"] = node_selector
        core_v1.create_namespaced_pod(namespace, pod)
        names.append(f"{name}-{i}")
    return names


def configmap_owner(core_v1, namespace: str, name: str) -> dict:
    """A controller ownerReference (a ConfigMap stands in for a Job: nothing here recreates the pods)."""
    cm = core_v1.create_namespaced_config_map(namespace, {"metadata": {"name": name}})
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": cm.metadata.uid, "controller": True}


LEASE = 4.0  # --leader-elect-lease-duration of the HA test; renew deadline 3s, retry period 0.5s


def test_only_the_leader_binds_and_a_standby_takes_over_after_kill_9(
    schedulers, core_v1, custom, coordination, namespace, node_set
):
    node_set(gpus=8)
    lease = f"ha-{uuid.uuid4().hex[:8]}"
    args = ("--leader-elect", "--leader-elect-lease-name", lease, "--leader-elect-lease-duration", f"{LEASE}s",
            "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms")
    a = schedulers(f"a-{lease}", *args)
    wait_for(lambda: lease_spec(coordination, lease).get("holder") == a.name, TIMEOUT, what="a holds the Lease")
    b = schedulers(f"b-{lease}", *args)
    wait_for(lambda: "is a candidate" in b.log(), TIMEOUT, what="b running as a candidate")

    first = create_gang(core_v1, custom, namespace, "first", 4, node_set.tag)
    wait_for(lambda: len(bound_pods(core_v1, namespace)) == 4, TIMEOUT, what="first gang bound")
    events = wait_for(lambda: (e := scheduled_events(core_v1, namespace)) and len(e) == 4 and e, TIMEOUT,
                      what="4 Scheduled events")
    assert set(events.values()) == {a.name}, events
    assert lease_spec(coordination, lease)["holder"] == a.name
    assert "bound" not in b.log(), "the standby ran a scheduling cycle"

    a.kill()
    killed = time.monotonic()
    wait_for(lambda: lease_spec(coordination, lease).get("holder") == b.name, TIMEOUT, what="b takes over")
    takeover = time.monotonic() - killed
    # b waits one lease duration from the last change it saw (at most one retry period before the kill), and
    # notices at its next retry (up to 1.2 retry periods later); 2 s of slack for a loaded 2-core machine.
    assert takeover <= LEASE + 2 * 0.5 * 1.2 + 2.0, f"takeover took {takeover:.1f}s"
    print(f"takeover {takeover:.2f}s after kill -9 (lease duration {LEASE}s)")
    assert lease_spec(coordination, lease)["transitions"] >= 1

    create_gang(core_v1, custom, namespace, "second", 4, node_set.tag)
    wait_for(lambda: len(bound_pods(core_v1, namespace)) == 8, TIMEOUT, what="second gang bound by b")
    events = wait_for(lambda: (e := scheduled_events(core_v1, namespace)) and len(e) == 8 and e, TIMEOUT,
                      what="8 Scheduled events")
    assert {events[f"second-{i}"] for i in range(4)} == {b.name}, events
    assert {events[n] for n in first} == {a.name}, "a pod was bound twice"
    failed = [line for line in b.log().splitlines() if "failed" in line and "bind" in line]
    assert not failed, "\n".join(failed)
    assert_no_overcommit(core_v1)


def test_a_gang_left_partly_bound_by_a_crash_is_completed(schedulers, core_v1, custom, namespace, node_set):
    node = node_set(gpus=8)
    names = create_gang(core_v1, custom, namespace, "crashed", 4, node_set.tag)
    for name in names[:2]:  # the crash: two binds went out, two did not
        bind_pod(core_v1, namespace, name, node)
    schedulers(f"s-{uuid.uuid4().hex[:6]}")
    bound = wait_for(lambda: (b := bound_pods(core_v1, namespace)) and len(b) == 4 and b, TIMEOUT,
                     what="the partly bound gang completed")
    assert set(bound.values()) == {node}
    wait_for(lambda: pg_status(custom, namespace, "crashed").get("phase") == "Running", TIMEOUT,
             what="PodGroup Running")
    assert_no_overcommit(core_v1)


def test_a_partly_bound_gang_that_cannot_complete_is_given_up_after_the_timeout(
    schedulers, core_v1, custom, namespace, node_set
):
    """3-GPU nodes, gangs of 4 one-GPU pods with 2 bound: never completes. After --partial-gang-timeout the
    controller-owned pods are evicted; a gang of bare pods keeps them and its PodGroup goes Unknown."""
    owned_node, bare_node = node_set(gpus=3), node_set(gpus=3)
    owner = configmap_owner(core_v1, namespace, "owner")
    owned = create_gang(core_v1, custom, namespace, "owned", 4, node_set.tag, owner=owner,
                        node_selector={"kubernetes.io/hostname": owned_node})
    bare = create_gang(core_v1, custom, namespace, "bare", 4, node_set.tag,
                       node_selector={"kubernetes.io/hostname": bare_node})
    for name in owned[:2]:
        bind_pod(core_v1, namespace, name, owned_node)
    for name in bare[:2]:
        bind_pod(core_v1, namespace, name, bare_node)
    bound_at = time.monotonic()
    timeout = 4.0
    s = schedulers(f"s-{uuid.uuid4().hex[:6]}", "--partial-gang-timeout", f"{timeout}s")

    def owned_evicted():
        pods = {p.metadata.name for p in core_v1.list_namespaced_pod(namespace).items}
        return not (set(owned[:2]) & pods)

    wait_for(owned_evicted, TIMEOUT, what="the owned gang's bound pods evicted")
    assert time.monotonic() - bound_at >= timeout - 0.5, "evicted before the timeout"
    assert set(owned[2:]) <= {p.metadata.name for p in core_v1.list_namespaced_pod(namespace).items}

    def bare_unknown():
        st = pg_status(custom, namespace, "bare")
        cond = [c for c in st.get("conditions") or () if c.get("reason") == "PartialGangTimeout"]
        return st.get("phase") == "Unknown" and cond and cond[0]

    condition = wait_for(bare_unknown, TIMEOUT, what="bare PodGroup Unknown with a PartialGangTimeout condition")
    assert "no controller" in condition["message"], condition
    assert set(bound_pods(core_v1, namespace)) == set(bare[:2]), "bare pods must not be evicted"
    wait_for(
        lambda: {("owned", "PartialGangTimeout"), ("bare", "PartialGangTimeout")}
        <= {(e.involved_object.name, e.reason) for e in core_v1.list_namespaced_event(namespace).items},
        TIMEOUT,
        what="PartialGangTimeout events on both PodGroups",
    )
    assert "giving it up" in s.log()
    assert_no_overcommit(core_v1)


def test_a_scheduler_killed_while_binding_leaves_no_gang_partly_bound(
    schedulers, core_v1, custom, namespace, node_set
):
    """10 gangs of 8 one-GPU pods on 4x8 GPUs: 4 fit. SIGKILL at the first bind, restart: every gang ends
    whole or empty, nothing is lost, and a waiting gang is placed when a running one's pods are deleted."""
    for _ in range(4):
        node_set(gpus=8)
    first = schedulers(f"s1-{uuid.uuid4().hex[:6]}")
    wait_for(lambda: "starting" in first.log(), TIMEOUT, what="first scheduler started")
    gangs = {f"g{i}": [f"g{i}-{j}" for j in range(8)] for i in range(10)}
    creating = threading.Thread(
        target=lambda: [create_gang(core_v1, custom, namespace, g, 8, node_set.tag) for g in gangs], daemon=True
    )
    creating.start()
    wait_for(lambda: bound_pods(core_v1, namespace), TIMEOUT, interval=0.02, what="the first bind")
    first.kill()
    creating.join(TIMEOUT)
    at_kill = bound_pods(core_v1, namespace)
    print(f"bound when killed: {len(at_kill)} pods")

    schedulers(f"s2-{uuid.uuid4().hex[:6]}", "--partial-gang-timeout", "30s")

    def whole_or_empty():
        bound = bound_pods(core_v1, namespace)
        counts = {g: sum(n in bound for n in pods) for g, pods in gangs.items()}
        return sorted(counts.values()) == [0] * 6 + [8] * 4 and counts

    counts = wait_for(whole_or_empty, TIMEOUT, what="4 whole gangs bound, 6 empty")
    pods = {p.metadata.name for p in core_v1.list_namespaced_pod(namespace).items}
    assert pods == {n for names in gangs.values() for n in names}, "pods were lost"
    assert_no_overcommit(core_v1)

    running = next(g for g, c in counts.items() if c == 8)
    for name in gangs[running]:
        core_v1.delete_namespaced_pod(name, namespace, grace_period_seconds=0)

    def another_placed():
        bound = bound_pods(core_v1, namespace)
        now = {g: sum(n in bound for n in pods) for g, pods in gangs.items() if g != running}
        return sorted(now.values()) == [0] * 5 + [8] * 4 and now

    wait_for(another_placed, TIMEOUT, what="a waiting gang placed in the freed capacity")
    assert_no_overcommit(core_v1)


def test_a_podgroup_held_at_enqueue_says_which_gate_and_by_how_much(
    schedulers, core_v1, custom, namespace
):
    queue = f"cap-{uuid.uuid4().hex[:6]}"
    custom.create_cluster_custom_object(GROUP, "v1beta1", "queues", {
        "apiVersion": f"{GROUP}/v1beta1", "kind": "Queue", "metadata": {"name": queue},
        "spec": {"weight": 1, "capability": {GPU_RESOURCE: 4}},
    })
    try:
        pg = podgroup("big", 8)
        pg["spec"].update({"queue": queue, "minResources": {GPU_RESOURCE: 8}})
        custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", pg)
        schedulers(f"s-{uuid.uuid4().hex[:6]}")

        def held():
            st = pg_status(custom, namespace, "big")
            cond = [c for c in st.get("conditions") or () if c.get("type") == "Unschedulable"]
            return cond and cond[0]

        condition = wait_for(held, TIMEOUT, what="the PodGroup's Unschedulable condition")
        message = condition["message"]
        assert condition["reason"] == "NotEnqueued", condition
        assert f"queue {queue} capability {GPU_RESOURCE} 4" in message, message
        assert f"short {GPU_RESOURCE} 4" in message, message
        assert pg_status(custom, namespace, "big").get("phase") in (None, "Pending")

        def event():
            for e in core_v1.list_namespaced_event(namespace).items:
                if e.involved_object.kind == "PodGroup" and e.reason == "Unschedulable":  # Volcano's event reason
                    return e
            return None

        ev = wait_for(event, TIMEOUT, what="an Unschedulable event on the PodGroup")
        assert "capability" in ev.message and f"short {GPU_RESOURCE} 4" in ev.message, ev.message
    finally:
        custom.delete_cluster_custom_object(GROUP, "v1beta1", "queues", queue)


def test_leader_election_flags_are_checked(control_plane):
    out = subprocess.run(
        [sys.executable, "-m", "scheduler.cli", "scheduler", "--kubeconfig", str(control_plane.kubeconfig),
         "--leader-elect", "--leader-elect-lease-duration", "5s", "--leader-elect-renew-deadline", "10s"],
        capture_output=True, text=True, timeout=TIMEOUT, cwd=REPO,
    )
    assert out.returncode == 2 and "renew deadline" in out.stderr, out.stderr

