"""KubeRay's ray-operator v1.4.0, the real operator, with its Volcano integration on: a RayJob makes a RayCluster,
the operator writes that cluster's PodGroup (`ray-<cluster>-pg`) and creates the head and the workers with
`schedulerName: volcano` and the group's annotation. volcano-py, claiming the name `volcano`, starts them as one
gang on a cluster with room, leaves them wholly unbound where only part fits or the RayJob's queue cannot hold
them, and binds the operator's replacement for a deleted pod into the running gang.

The operator is built by tools/build-operators.sh and started by tests/e2e/operators.py (webhooks off). The
RayJob applied is docs/integrations.md's. kwok runs no containers but marks bound pods Running and Ready, so
the RayCluster becomes `ready` and the RayJob goes on to create its submitter Job: the tests assert the
PodGroup, the binds and that step, never that Ray runs. Every wait is on the API (pods created, the gang's
Unschedulable condition, a count of scheduling cycles), never on time.

Without the integration (or with volcano-py not claiming `volcano`) the pods are never bound, and a scheduler
without the gang would bind the head and one worker where only part fits: the tests fail so.
"""

from __future__ import annotations

import copy
import uuid

import pytest
from controlplane import wait_for
from kubernetes import client
from operators import (
    KUBERAY,
    KUBERAY_CRDS,
    RAY_GROUP,
    bound_in_one_cycle,
    conditions,
    deleting_after,
    doc_manifest,
    explain,
    gang_scheduler,
    gpu_nodes,
    none_bound_for_five_cycles,
    operator_crds,
    phase,
    running_kuberay_operator,
)
from test_controllers import SCHED, podgroup

TIMEOUT = 90
GPU = "nvidia.com/gpu"
TAG = f"ray-{uuid.uuid4().hex[:6]}"
QUEUE_LABEL = "volcano.sh/queue-name"
GROUP_NAME = "scheduling.k8s.io/group-name"
NODE_TYPE = "ray.io/node-type"


@pytest.fixture(scope="module")
def crds(api_client):
    return operator_crds(api_client, KUBERAY, KUBERAY_CRDS)


@pytest.fixture(scope="module")
def scheduler(control_plane, crds, tmp_path_factory):
    # KubeRay writes `schedulerName: volcano` into every pod it makes: volcano-py claims that name too.
    with gang_scheduler(control_plane, tmp_path_factory, "volcano-py-scheduler-kuberay",
                        scheduler_names=("volcano-py", "volcano")) as running:
        yield running


@pytest.fixture(scope="module")
def operator(control_plane, scheduler, tmp_path_factory):
    with running_kuberay_operator(control_plane, tmp_path_factory.mktemp("kuberay")) as running:
        yield running
        print(running.log()[-4000:])


@pytest.fixture
def nodes(core_v1, namespace):
    with gpu_nodes(core_v1, "ray-e2e", TAG, namespace) as make:
        yield make


def rayjob(name: str, *, queue: str = "default") -> dict:
    """docs/integrations.md's RayJob, pinned to this module's nodes, with its name and queue set."""
    job = copy.deepcopy(doc_manifest("rayjob"))
    job["metadata"]["name"] = name
    assert QUEUE_LABEL in job["metadata"]["labels"], "the documented manifest names its queue"
    job["metadata"]["labels"][QUEUE_LABEL] = queue
    spec = job["spec"]["rayClusterSpec"]
    for group in (spec["headGroupSpec"], *spec["workerGroupSpecs"]):
        group["template"]["spec"]["nodeSelector"] = {"ray-e2e": TAG}
    return job


@pytest.fixture
def create(custom, core_v1):
    """Create a RayJob; afterwards delete it (the operator lets it go, its RayCluster and pods are collected)
    and wait until the namespace holds no Ray pod."""
    with deleting_after(custom, RAY_GROUP, "v1", "rayjobs", lambda ns, _: core_v1.list_namespaced_pod(
            ns, label_selector=NODE_TYPE).items) as make:
        yield make


def get_rayjob(custom, namespace: str, name: str) -> dict:
    return custom.get_namespaced_custom_object(RAY_GROUP, "v1", namespace, "rayjobs", name)


def cluster_of(custom, namespace: str, name: str) -> str:
    """The RayCluster the operator made for the RayJob (named in its status)."""
    return wait_for(lambda: (get_rayjob(custom, namespace, name).get("status") or {}).get("rayClusterName"),
                    TIMEOUT, what=f"RayJob {name}'s RayCluster")


def the_gang(custom, namespace: str, cluster: str) -> dict:
    pg = wait_for(lambda: podgroup(custom, namespace, f"ray-{cluster}-pg"), TIMEOUT, what="the operator's PodGroup")
    owner = pg["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("RayCluster", cluster), pg["metadata"]
    return pg


def ray_pods(core_v1, namespace: str, cluster: str) -> list:
    return core_v1.list_namespaced_pod(namespace, label_selector=f"ray.io/cluster={cluster}").items


@pytest.fixture
def batch_v1(api_client):
    return client.BatchV1Api(api_client)


def submitter(batch_v1, namespace: str, name: str) -> object | None:
    """The RayJob's submitter Job (named after the RayJob), or None."""
    try:
        return batch_v1.read_namespaced_job(name, namespace)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def whole_gang(scheduler, custom, core_v1, namespace: str, cluster: str) -> list:
    """The head and both workers bound, in one scheduling cycle, as the operator made them; the PodGroup Running."""
    bound = bound_in_one_cycle(scheduler, namespace, lambda: ray_pods(core_v1, namespace, cluster), cluster)
    assert sorted(p.metadata.labels[NODE_TYPE] for p in bound) == ["head", "worker", "worker"]
    for p in bound:
        assert p.spec.scheduler_name == "volcano", p.spec.scheduler_name  # the operator's, over the template's
        assert p.metadata.annotations[GROUP_NAME] == f"ray-{cluster}-pg", p.metadata.annotations
    wait_for(lambda: phase(custom, namespace, f"ray-{cluster}-pg") == "Running", TIMEOUT,
             what=f"PodGroup ray-{cluster}-pg Running")
    return bound


def none_bound(scheduler, core_v1, namespace: str, cluster: str) -> None:
    none_bound_for_five_cycles(scheduler, lambda: ray_pods(core_v1, namespace, cluster),
                               created="the operator created the head and both workers")


def test_rayjob_starts_as_one_gang_on_a_cluster_with_room(operator, scheduler, custom, core_v1, batch_v1, namespace,
                                                          nodes, create):
    nodes(2, gpus=2)
    create(namespace, rayjob("room"))
    cluster = cluster_of(custom, namespace, "room")
    pg = the_gang(custom, namespace, cluster)
    # The head and 2 workers; the workers' 2 x 2 GPUs, the head's 2 CPUs and the workers' 2 x 4.
    assert pg["spec"]["minMember"] == 3 and pg["spec"]["queue"] == "default", pg["spec"]
    assert (pg["spec"]["minResources"][GPU], pg["spec"]["minResources"]["cpu"]) == ("4", "10"), pg["spec"]
    whole_gang(scheduler, custom, core_v1, namespace, cluster)
    # The whole cluster up, the RayJob goes on: the RayCluster is ready and the submitter Job exists.
    wait_for(lambda: (custom.get_namespaced_custom_object(RAY_GROUP, "v1", namespace, "rayclusters", cluster)
                      .get("status") or {}).get("state") == "ready", TIMEOUT, what="the RayCluster ready")
    wait_for(lambda: submitter(batch_v1, namespace, "room"), TIMEOUT, what="the RayJob's submitter Job")
    status = wait_for(lambda: (s := get_rayjob(custom, namespace, "room").get("status") or {})
                      .get("jobDeploymentStatus") == "Running" and s, TIMEOUT, what="the RayJob Running")
    assert status["rayClusterName"] == cluster, status


def test_rayjob_waits_whole_where_only_part_of_it_fits(operator, scheduler, control_plane, custom, core_v1,
                                                       batch_v1, namespace, nodes, create):
    # 4 GPUs in all, as the workers ask, on a 3-GPU and a 1-GPU node: the head (CPU only) and one worker would
    # fit, the other worker not. None may be bound.
    nodes(1, gpus=3)
    nodes(1, gpus=1)
    create(namespace, rayjob("tight"))
    cluster = cluster_of(custom, namespace, "tight")
    pg_name = f"ray-{cluster}-pg"
    the_gang(custom, namespace, cluster)
    unschedulable = wait_for(lambda: conditions(podgroup(custom, namespace, pg_name)).get("Unschedulable"),
                             TIMEOUT, what="the gang reported Unschedulable")
    assert unschedulable["status"] == "True", unschedulable
    none_bound(scheduler, core_v1, namespace, cluster)
    out = explain(control_plane, namespace, pg_name)
    assert "gate:    gang fragmented: " in out and "free in total, but split across nodes" in out, out
    # The RayJob waits for its whole cluster: no submitter yet.
    assert submitter(batch_v1, namespace, "tight") is None
    assert get_rayjob(custom, namespace, "tight")["status"]["jobDeploymentStatus"] == "Initializing"

    nodes(1, gpus=2)  # now the second worker has a place: the cluster is bound whole, at once
    whole_gang(scheduler, custom, core_v1, namespace, cluster)
    wait_for(lambda: submitter(batch_v1, namespace, "tight"), TIMEOUT, what="the RayJob's submitter Job")


def test_rayjob_keeps_to_its_queue(operator, scheduler, control_plane, custom, core_v1, namespace, nodes, queues,
                                   create):
    nodes(2, gpus=2)
    capped = queues("ray", capability={GPU: "2"})
    create(namespace, rayjob("queued", queue=capped))
    cluster = cluster_of(custom, namespace, "queued")
    pg_name = f"ray-{cluster}-pg"
    pg = the_gang(custom, namespace, cluster)
    assert pg["spec"]["queue"] == capped, pg["spec"]  # the RayJob's label, by way of its RayCluster
    # The queue holds 2 GPUs and the workers need 4: the PodGroup stays Pending; the operator has made the pods
    # all the same (it does not wait for admission) and none is bound.
    none_bound(scheduler, core_v1, namespace, cluster)
    assert phase(custom, namespace, pg_name) in ("", "Pending")
    out = wait_for(lambda: (o := explain(control_plane, namespace, pg_name)) and "gate:    queue capability:" in o
                   and o, TIMEOUT, interval=0.5, what="explain names the queue capability")
    assert f"queue {capped} capability: 4 {GPU} would exceed 2 (short 2)" in out, out

    custom.patch_cluster_custom_object(SCHED, "v1beta1", "queues", capped, {"spec": {"capability": {GPU: "4"}}})
    whole_gang(scheduler, custom, core_v1, namespace, cluster)


def test_rayjob_is_whole_again_after_a_pod_is_deleted(operator, scheduler, custom, core_v1, namespace, nodes,
                                                      create):
    nodes(2, gpus=2)
    create(namespace, rayjob("regang"))
    cluster = cluster_of(custom, namespace, "regang")
    pg_name = f"ray-{cluster}-pg"
    first = {p.metadata.name: p for p in whole_gang(scheduler, custom, core_v1, namespace, cluster)}
    victim = next(n for n, p in sorted(first.items()) if p.metadata.labels[NODE_TYPE] == "worker")
    core_v1.delete_namespaced_pod(victim, namespace, body=client.V1DeleteOptions(grace_period_seconds=0))

    def replaced_and_bound():
        pods = {p.metadata.name: p for p in ray_pods(core_v1, namespace, cluster)}
        return (len(pods) == 3 and victim not in pods and all(p.spec.node_name for p in pods.values()) and pods)

    pods = wait_for(replaced_and_bound, TIMEOUT, what=f"{victim} replaced by the operator and bound")
    (new,) = set(pods) - set(first)
    assert pods[new].metadata.labels[NODE_TYPE] == "worker" and pods[new].metadata.annotations[GROUP_NAME] == pg_name
    assert {n: p.metadata.uid for n, p in pods.items() if n != new} == {
        n: p.metadata.uid for n, p in first.items() if n != victim}, "only the deleted pod was replaced"
    keys = {f"{namespace}/{n}" for n in (*pods, victim)}
    assert len(scheduler.bind_cycles(keys)) == 2, "the gang's first bind, then the replacement's: nothing else"
    wait_for(lambda: phase(custom, namespace, pg_name) == "Running", TIMEOUT, what="PodGroup Running again")
    pg = podgroup(custom, namespace, pg_name)
    assert pg["spec"]["minMember"] == 3, pg["spec"]
