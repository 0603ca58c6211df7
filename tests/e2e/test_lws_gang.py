"""LeaderWorkerSet v0.6.1, the real operator, with volcano-py's automatic gangs: a LeaderWorkerSet that opts in
gets one PodGroup per group (controllers/owner_gangs.py); a group's leader and workers, created by
kube-controller-manager's statefulset controller from LWS's StatefulSets, start as one gang, wait whole where
only part fits or their queue cannot hold them (the queue's reason in `explain`), are recreated and bound as one
gang when a pod is killed (RecreateGroupOnPodRestart), and the groups' PodGroups follow `replicas`.

The operator is built by tools/build-operators.sh and started by tests/e2e/operators.py with its mutating
webhooks registered by URL (its pod webhook writes each pod's group index, which both LWS and the owner gang
read). kwok runs no containers: the tests assert PodGroups and binds. Every wait is on the API (pods created,
the gang's Unschedulable condition, a count of scheduling cycles), never on time.
"""

from __future__ import annotations

import copy
import uuid

import pytest
from controlplane import wait_for
from kubernetes import client
from operators import (
    LWS,
    LWS_GROUP,
    bound_in_one_cycle,
    conditions,
    deleting_after,
    doc_manifest,
    explain,
    gang_scheduler,
    gpu_nodes,
    none_bound_for_five_cycles,
    operator_crds,
    owner_gang_controllers,
    phase,
    running_lws_operator,
)
from test_controllers import SCHED, podgroup

TIMEOUT = 90
GPU = "nvidia.com/gpu"
TAG = f"lws-{uuid.uuid4().hex[:6]}"
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
QUEUE_NAME = "scheduling.volcano.sh/queue-name"
HOLD = "volcano-py.test/hold"  # a finalizer of the tests'


@pytest.fixture(scope="module")
def crds(api_client):
    return operator_crds(api_client, LWS, ("leaderworkerset.x-k8s.io_leaderworkersets.yaml",))


@pytest.fixture(scope="module")
def scheduler(control_plane, crds, tmp_path_factory):
    with gang_scheduler(control_plane, tmp_path_factory, "volcano-py-scheduler-lws") as running:
        yield running


@pytest.fixture(scope="module")
def controllers(control_plane, custom, crds, scheduler, tmp_path_factory):
    with owner_gang_controllers(control_plane, custom, tmp_path_factory, "LeaderWorkerSets watched") as running:
        yield running


@pytest.fixture(scope="module")
def operator(control_plane, api_client, controllers, tmp_path_factory):
    with running_lws_operator(control_plane, api_client, tmp_path_factory.mktemp("lws")) as running:
        yield running
        print(running.log()[-4000:])


@pytest.fixture
def nodes(core_v1, namespace):
    with gpu_nodes(core_v1, "lws-e2e", TAG, namespace) as make:
        yield make


def lws(name: str, *, replicas: int = 1, queue: str | None = None) -> dict:
    """docs/integrations.md's LeaderWorkerSet, pinned to this module's nodes, with its name, replicas and (if
    given) queue set."""
    obj = copy.deepcopy(doc_manifest("lws"))
    obj["metadata"]["name"] = name
    obj["spec"]["replicas"] = replicas
    if queue is not None:
        obj["metadata"]["annotations"][QUEUE_NAME] = queue
    pod = obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    assert pod["schedulerName"] == "volcano-py", "the documented manifest names volcano-py"
    pod["nodeSelector"] = {"lws-e2e": TAG}
    return obj


@pytest.fixture
def create(custom, core_v1):
    """Create a LeaderWorkerSet; afterwards delete it and wait until its pods are gone."""
    with deleting_after(custom, LWS_GROUP, "v1", "leaderworkersets", lambda ns, n: core_v1.list_namespaced_pod(
            ns, label_selector=f"{NAME_LABEL}={n}").items) as make:
        yield make


def group_pods(core_v1, namespace: str, name: str, group: int) -> list:
    return core_v1.list_namespaced_pod(namespace, label_selector=f"{NAME_LABEL}={name},{GROUP_LABEL}={group}").items


def gang_names(custom, namespace: str) -> list[str]:
    items = custom.list_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups")["items"]
    return sorted(pg["metadata"]["name"] for pg in items)


def release(core_v1, namespace: str, name: str) -> None:
    """Take the test's finalizer off a pod (gone already: nothing to do)."""
    try:
        core_v1.patch_namespaced_pod(name, namespace, {"metadata": {"finalizers": None}})
    except client.ApiException as exc:
        if exc.status != 404:
            raise


def whole_group(scheduler, core_v1, namespace: str, name: str, group: int) -> list:
    return bound_in_one_cycle(scheduler, namespace, lambda: group_pods(core_v1, namespace, name, group),
                              f"group {group}", gang="the group")


def test_lws_group_starts_as_one_gang_on_a_cluster_with_room(operator, scheduler, custom, core_v1, namespace,
                                                             nodes, create):
    nodes(3, gpus=2)
    create(namespace, lws("room"))
    pg = wait_for(lambda: podgroup(custom, namespace, "lws-room-0"), TIMEOUT, what="the group's PodGroup")
    assert pg["spec"]["minMember"] == 3 and pg["spec"]["minResources"][GPU] == "6", pg["spec"]
    assert pg["metadata"]["ownerReferences"][0]["kind"] == "LeaderWorkerSet", pg["metadata"]
    whole_group(scheduler, core_v1, namespace, "room", 0)
    assert gang_names(custom, namespace) == ["lws-room-0"], "no per-StatefulSet PodGroup for an owner gang's pods"


def test_lws_group_waits_whole_where_only_part_of_it_fits(operator, scheduler, custom, core_v1, namespace, nodes,
                                                          create):
    nodes(2, gpus=3)  # 6 GPUs, as the group asks, but each node holds one 2-GPU pod
    create(namespace, lws("tight"))
    wait_for(lambda: len(group_pods(core_v1, namespace, "tight", 0)) == 3, TIMEOUT,
             what="the leader and both workers created")
    wait_for(lambda: (conditions(podgroup(custom, namespace, "lws-tight-0")).get("Unschedulable") or {}).get(
        "status") == "True", TIMEOUT, what="the group's gang reported Unschedulable")
    none_bound_for_five_cycles(scheduler, lambda: group_pods(core_v1, namespace, "tight", 0))

    nodes(1, gpus=2)
    whole_group(scheduler, core_v1, namespace, "tight", 0)


def test_lws_groups_podgroups_follow_its_replicas(operator, scheduler, custom, core_v1, namespace, nodes, create):
    nodes(6, gpus=2)
    create(namespace, lws("scale"))
    wait_for(lambda: gang_names(custom, namespace) == ["lws-scale-0"], TIMEOUT, what="one group's PodGroup")
    custom.patch_namespaced_custom_object(LWS_GROUP, "v1", namespace, "leaderworkersets", "scale",
                                          {"spec": {"replicas": 2}})
    wait_for(lambda: gang_names(custom, namespace) == ["lws-scale-0", "lws-scale-1"], TIMEOUT,
             what="the second group's PodGroup")
    whole_group(scheduler, core_v1, namespace, "scale", 1)
    custom.patch_namespaced_custom_object(LWS_GROUP, "v1", namespace, "leaderworkersets", "scale",
                                          {"spec": {"replicas": 1}})
    wait_for(lambda: gang_names(custom, namespace) == ["lws-scale-0"], TIMEOUT,
             what="the second group's PodGroup deleted")


def test_lws_group_keeps_to_its_queue(operator, scheduler, control_plane, custom, core_v1, namespace, nodes, queues,
                                      create):
    nodes(3, gpus=2)
    capped = queues("serve", capability={GPU: "4"})
    create(namespace, lws("queued", queue=capped))
    pg = wait_for(lambda: podgroup(custom, namespace, "lws-queued-0"), TIMEOUT, what="the group's PodGroup")
    assert pg["spec"]["queue"] == capped, pg["spec"]
    # The queue holds 4 GPUs and the group needs 6: the PodGroup stays Pending and none of the group is bound.
    none_bound_for_five_cycles(scheduler, lambda: group_pods(core_v1, namespace, "queued", 0),
                               created="the leader and both workers created")
    assert phase(custom, namespace, "lws-queued-0") in ("", "Pending")
    out = wait_for(lambda: (o := explain(control_plane, namespace, "lws-queued-0"))
                   and "gate:    queue capability:" in o and o, TIMEOUT, interval=0.5,
                   what="explain names the queue capability")
    assert f"queue {capped} capability: 6 {GPU} would exceed 4 (short 2)" in out, out

    custom.patch_cluster_custom_object(SCHED, "v1beta1", "queues", capped, {"spec": {"capability": {GPU: "6"}}})
    whole_group(scheduler, core_v1, namespace, "queued", 0)


def test_lws_group_is_recreated_as_one_gang_when_a_pod_is_killed(operator, scheduler, custom, core_v1, namespace,
                                                                 nodes, create):
    # The documented restartPolicy (RecreateGroupOnPodRestart, LWS's default): a deleted worker makes LWS delete
    # the group's leader, and with it the group's workers; the leader's StatefulSet makes it again and LWS its
    # workers. The pods' names come back, their uids are new; the group's PodGroup stays and must bind the new
    # group together.
    nodes(3, gpus=2)
    create(namespace, lws("restart"))
    group = whole_group(scheduler, core_v1, namespace, "restart", 0)
    first = {p.metadata.uid for p in group}
    leader_uid = next(p.metadata.uid for p in group if p.metadata.name == "restart-0")
    start = len(scheduler.results)
    # LWS's pod controller acts on a pod it sees being deleted (its deletionTimestamp set). A kubelet takes the
    # grace period to stop the containers; kwok removes a deleted pod at once, sometimes before LWS has looked
    # (1 run in 6 here). A finalizer of the test's stands for that grace period: the worker stays Terminating
    # until LWS has deleted the group's leader, then the test lets it go.
    core_v1.patch_namespaced_pod("restart-0-1", namespace, {"metadata": {"finalizers": [HOLD]}})
    try:
        core_v1.delete_namespaced_pod("restart-0-1", namespace)

        def leader_going() -> bool:
            leader = [p for p in group_pods(core_v1, namespace, "restart", 0) if p.metadata.name == "restart-0"]
            return not leader or leader[0].metadata.uid != leader_uid or bool(leader[0].metadata.deletion_timestamp)

        wait_for(leader_going, TIMEOUT, what="LWS deleting the group's leader")
    finally:
        release(core_v1, namespace, "restart-0-1")

    def recreated() -> list | None:
        pods = group_pods(core_v1, namespace, "restart", 0)
        return (pods if len(pods) == 3 and not {p.metadata.uid for p in pods} & first
                and all(p.spec.node_name for p in pods) else None)

    pods = wait_for(recreated, TIMEOUT, what="the whole group recreated (new leader and workers) and bound")
    # The cycle that last bound each of the new pods (a name may have been bound before in this window, to a pod
    # since deleted): one and the same for all three.
    last: dict[str, int] = {}
    for i, result in enumerate(scheduler.results[start:], start):
        for gang in result.binds:
            for task, _ in gang.binds:
                last[task] = i
    keys = {f"{namespace}/{p.metadata.name}" for p in pods}
    assert keys <= set(last), (keys, last)
    assert len({last[k] for k in keys}) == 1, f"the recreated group was bound across cycles: {last}"
    assert gang_names(custom, namespace) == ["lws-restart-0"]
    wait_for(lambda: phase(custom, namespace, "lws-restart-0") == "Running", TIMEOUT,
             what="the group's PodGroup Running again")
