"""JobSet v0.8.0, the real operator, with volcano-py's automatic gang: a JobSet that opts in
(`scheduling.volcano-py.io/owner-gang`) gets one PodGroup from its spec (controllers/owner_gangs.py) and its
pods, created by kube-controller-manager's job controller for the JobSet's child Jobs, start as one gang, wait
whole where only part fits, keep to their queue, restart as one gang when a pod is killed (the JobSet's
failurePolicy), and the PodGroup follows the JobSet's replicas.

The operator is built by tools/build-operators.sh and started by tests/e2e/operators.py with its webhooks
unregistered (so docs/integrations.md's manifest writes out the webhook's defaults). The JobSet's templates
name `schedulerName: volcano-py`. kwok runs no containers: the tests assert PodGroups and binds.

Without the automatic gang each child Job's pods get a PodGroup of their own (a batch Job's, minMember 1) and
the JobSet binds piecemeal where only part fits: the tests of the fragmented cluster and of the queue fail so.
"""

from __future__ import annotations

import copy
import uuid

import pytest
from controlplane import wait_for
from kubernetes import client
from operators import (
    JOBSET,
    JOBSET_GROUP,
    bound_in_one_cycle,
    deleting_after,
    doc_manifest,
    explain,
    gang_scheduler,
    gpu_nodes,
    none_bound_for_five_cycles,
    operator_crds,
    owner_gang_controllers,
    phase,
    running_jobset_operator,
)
from test_controllers import SCHED, podgroup

TIMEOUT = 90
GPU = "nvidia.com/gpu"
TAG = f"js-{uuid.uuid4().hex[:6]}"
OWNER_GANG = "scheduling.volcano-py.io/owner-gang"
QUEUE_NAME = "scheduling.volcano.sh/queue-name"


@pytest.fixture(scope="module")
def crds(api_client):
    # Before the controllers start: they watch JobSets only if the CRD is there when they do.
    return operator_crds(api_client, JOBSET, ("jobset.x-k8s.io_jobsets.yaml",))


@pytest.fixture(scope="module")
def scheduler(control_plane, crds, tmp_path_factory):
    with gang_scheduler(control_plane, tmp_path_factory, "volcano-py-scheduler-jobset") as running:
        yield running


@pytest.fixture(scope="module")
def controllers(control_plane, custom, crds, scheduler, tmp_path_factory):
    with owner_gang_controllers(control_plane, custom, tmp_path_factory, "owner gangs: JobSets watched") as running:
        yield running


@pytest.fixture(scope="module")
def operator(control_plane, controllers, tmp_path_factory):
    with running_jobset_operator(control_plane, tmp_path_factory.mktemp("jobset")) as running:
        yield running
        print(running.log()[-4000:])


@pytest.fixture
def nodes(core_v1, namespace):
    with gpu_nodes(core_v1, "js-e2e", TAG, namespace) as make:
        yield make


def jobset(name: str, *, queue: str = "default", opt_in: bool = True) -> dict:
    """docs/integrations.md's JobSet, pinned to this module's nodes, with its name and queue set."""
    js = copy.deepcopy(doc_manifest("jobset"))
    js["metadata"]["name"] = name
    annotations = js["metadata"]["annotations"]
    assert annotations[OWNER_GANG] == "true", "the documented manifest opts in"
    annotations[QUEUE_NAME] = queue
    if not opt_in:
        del annotations[OWNER_GANG]
    for rjob in js["spec"]["replicatedJobs"]:
        pod = rjob["template"]["spec"]["template"]["spec"]
        assert pod["schedulerName"] == "volcano-py", "the documented manifest names volcano-py"
        pod["nodeSelector"] = {"js-e2e": TAG}
    return js


@pytest.fixture
def create(custom, core_v1):
    """Create a JobSet; afterwards delete it and wait until its pods are gone."""
    with deleting_after(custom, JOBSET_GROUP, "v1alpha2", "jobsets", lambda ns, n: pods_of(core_v1, ns, n)) as make:
        yield make


def pods_of(core_v1, namespace: str, name: str) -> list:
    return core_v1.list_namespaced_pod(namespace, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items


def the_gang(custom, namespace: str, name: str) -> dict:
    pg = wait_for(lambda: podgroup(custom, namespace, f"jobset-{name}"), TIMEOUT, what="the JobSet's PodGroup")
    assert pg["metadata"]["ownerReferences"][0]["kind"] == "JobSet", pg["metadata"]
    return pg


def whole_gang(scheduler, custom, core_v1, namespace: str, name: str) -> list:
    """All three pods bound, in one scheduling cycle; the PodGroup Running."""
    bound = bound_in_one_cycle(scheduler, namespace, lambda: pods_of(core_v1, namespace, name), name)
    assert sorted(p.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"] for p in bound) == [
        "driver", "workers", "workers"]
    wait_for(lambda: phase(custom, namespace, f"jobset-{name}") == "Running", TIMEOUT,
             what=f"PodGroup jobset-{name} Running")
    return bound


def test_jobset_starts_as_one_gang_on_a_cluster_with_room(operator, scheduler, custom, core_v1, namespace, nodes,
                                                          create):
    nodes(3, gpus=2)
    create(namespace, jobset("room"))
    pg = the_gang(custom, namespace, "room")
    assert pg["spec"]["minMember"] == 3 and pg["spec"]["queue"] == "default", pg["spec"]
    assert pg["spec"]["minTaskMember"] == {"driver": 1, "workers": 2}, pg["spec"]
    assert pg["spec"]["minResources"][GPU] == "6", pg["spec"]
    bound = whole_gang(scheduler, custom, core_v1, namespace, "room")
    assert len({p.spec.node_name for p in bound}) == 3, "each 2-GPU pod has a 2-GPU node of its own"
    # No per-Job PodGroup was made for the pods: the gang is the JobSet's alone.
    names = [pg["metadata"]["name"] for pg in custom.list_namespaced_custom_object(
        SCHED, "v1beta1", namespace, "podgroups")["items"]]
    assert names == ["jobset-room"], names


def test_jobset_waits_whole_where_only_part_of_it_fits(operator, scheduler, control_plane, custom, core_v1,
                                                       namespace, nodes, create):
    # 6 GPUs in all, as the JobSet asks, but each 3-GPU node holds one 2-GPU pod: two of the three would fit.
    nodes(2, gpus=3)
    create(namespace, jobset("tight"))
    the_gang(custom, namespace, "tight")
    none_bound_for_five_cycles(scheduler, lambda: pods_of(core_v1, namespace, "tight"))
    out = explain(control_plane, namespace, "jobset-tight")
    assert "gate:    gang fragmented: " in out, out

    nodes(1, gpus=2)  # now the third pod has a place: the gang is bound whole, at once
    whole_gang(scheduler, custom, core_v1, namespace, "tight")


def test_jobset_opted_in_by_its_namespace_keeps_to_its_queue(operator, scheduler, control_plane, custom, core_v1,
                                                             namespace, nodes, queues, create):
    core_v1.patch_namespace(namespace, {"metadata": {"annotations": {OWNER_GANG: "true"}}})
    nodes(3, gpus=2)
    capped = queues("train", capability={GPU: "4"})
    create(namespace, jobset("queued", queue=capped, opt_in=False))
    pg = the_gang(custom, namespace, "queued")
    assert pg["spec"]["queue"] == capped, pg["spec"]
    none_bound_for_five_cycles(scheduler, lambda: pods_of(core_v1, namespace, "queued"))
    out = wait_for(lambda: (o := explain(control_plane, namespace, "jobset-queued"))
                   and "gate:    queue capability:" in o and o, TIMEOUT, interval=0.5,
                   what="explain names the queue capability")
    assert f"queue {capped} capability: 6 {GPU} would exceed 4 (short 2)" in out, out

    custom.patch_cluster_custom_object(SCHED, "v1beta1", "queues", capped, {"spec": {"capability": {GPU: "6"}}})
    whole_gang(scheduler, custom, core_v1, namespace, "queued")


def test_jobset_not_opted_in_keeps_a_podgroup_per_child_job(operator, scheduler, custom, core_v1, namespace,
                                                            nodes, create):
    nodes(3, gpus=2)
    create(namespace, jobset("plain", opt_in=False))
    wait_for(lambda: len(pods_of(core_v1, namespace, "plain")) == 3, TIMEOUT, what="the 3 pods created")

    def per_job() -> list[str] | None:
        items = custom.list_namespaced_custom_object(SCHED, "v1beta1", namespace, "podgroups")["items"]
        names = sorted(pg["metadata"]["name"] for pg in items)
        return names if len(names) == 2 else None

    names = wait_for(per_job, TIMEOUT, what="one PodGroup per child Job")
    assert all(n.startswith("podgroup-") for n in names), names
    assert podgroup(custom, namespace, "jobset-plain") is None


def test_jobset_podgroup_follows_its_replicas(operator, scheduler, custom, core_v1, namespace, nodes, create):
    nodes(5, gpus=2)
    create(namespace, jobset("grow"))
    whole_gang(scheduler, custom, core_v1, namespace, "grow")
    js = custom.get_namespaced_custom_object(JOBSET_GROUP, "v1alpha2", namespace, "jobsets", "grow")
    # JobSet's validating webhook keeps replicatedJobs immutable; unregistered here (and in any cluster that runs
    # JobSet without it), the CRD lets the replicas change, and the JobSet controller creates the new Jobs.
    js["spec"]["replicatedJobs"][1]["replicas"] = 2  # two worker Jobs of two pods each
    try:
        custom.replace_namespaced_custom_object(JOBSET_GROUP, "v1alpha2", namespace, "jobsets", "grow", js)
    except client.ApiException as exc:
        pytest.fail(f"the JobSet CRD refused the new replicas: {exc.body}")
    pg = wait_for(lambda: (p := podgroup(custom, namespace, "jobset-grow")) and p["spec"]["minMember"] == 5 and p,
                  TIMEOUT, what="the PodGroup's minMember follows the replicas")
    assert pg["spec"]["minTaskMember"] == {"driver": 1, "workers": 4}, pg["spec"]
    assert pg["spec"]["minResources"][GPU] == "10", pg["spec"]


def test_jobset_restarts_as_one_gang_when_a_pod_is_killed(operator, scheduler, custom, core_v1, namespace, nodes,
                                                          create):
    # The documented failurePolicy (maxRestarts) makes a killed pod restart the whole JobSet: its child Jobs are
    # deleted with their pods and made again. The gang (the JobSet's PodGroup, which outlives the restart) must
    # bind the new pods together, never some of them beside the old ones that are going.
    nodes(3, gpus=2)
    create(namespace, jobset("restart"))
    first = {p.metadata.uid for p in whole_gang(scheduler, custom, core_v1, namespace, "restart")}
    victim = next(p for p in pods_of(core_v1, namespace, "restart")
                  if p.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"] == "workers")
    core_v1.delete_namespaced_pod(victim.metadata.name, namespace, body=client.V1DeleteOptions(grace_period_seconds=0))

    def restarted() -> list | None:
        pods = pods_of(core_v1, namespace, "restart")
        fresh = [p for p in pods if p.metadata.labels.get("jobset.sigs.k8s.io/restart-attempt") == "1"]
        return fresh if len(pods) == 3 and len(fresh) == 3 and all(p.spec.node_name for p in fresh) else None

    fresh = wait_for(restarted, TIMEOUT, what="the JobSet restarted (attempt 1) and its 3 new pods bound")
    assert not {p.metadata.uid for p in fresh} & first, "every pod is new"
    js = custom.get_namespaced_custom_object(JOBSET_GROUP, "v1alpha2", namespace, "jobsets", "restart")
    assert (js.get("status") or {}).get("restarts") == 1, js.get("status")
    keys = {f"{namespace}/{p.metadata.name}" for p in fresh}
    assert len(scheduler.bind_cycles(keys)) == 1, "the restarted gang was bound across several cycles"
    assert podgroup(custom, namespace, "jobset-restart")["spec"]["minMember"] == 3
    wait_for(lambda: phase(custom, namespace, "jobset-restart") == "Running", TIMEOUT,
             what="PodGroup jobset-restart Running again")
