"""The automatic gang of a Kubeflow PyTorchJob whose training operator runs without its Volcano integration
(api/pytorch_gang.py, controllers/owner_gangs.py); the JobSet and LeaderWorkerSet ones are in
test_owner_gangs.py, whose helpers these share.

Seeded random specs are checked against the rule written out here by hand, the training operator's own
(pkg/controller.v1/common/job.go): one gang `pytorchjob-<name>` of all replicas (each replica type's `replicas`
defaulting to 1), or `runPolicy.schedulingPolicy.minAvailable`; minTaskMember the replicas per lower-cased
replica type (left out when minAvailable asks for fewer); minResources the first minMember pods' requests, Master
first; the queue and priority class from the scheduling policy, else the annotation and the first template.
Hostile specs get a typed reason and one log line, and no PodGroup.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from test_owner_gangs import (
    _JUNK,
    GPU,
    OPT_IN,
    SCHED,
    SEEDS,
    Api,
    container,
    expected_resources,
    podgroups,
    quantities,
)

from scheduler.api.owner_gang import OWNER_GANG_ANNOTATION, OwnerGangError, owner_group_name
from scheduler.api.pod import role_of
from scheduler.api.pytorch_gang import pytorchjob_gang
from scheduler.api.reasons import FieldInvalid
from scheduler.controllers.owner_gangs import PYTORCHJOB, OwnerGangController
from scheduler.controllers.podgroup import PodGroupController
from scheduler.sim.objects import pod_object
from scheduler.testing import cluster

OPERATOR = {"training.kubeflow.org/operator-name": "pytorchjob-controller"}


def replica(replicas: int | None, cpu_m: int, gpus: int, mem_mi: int, priority: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": SCHED, "containers": [container(cpu_m, gpus, mem_mi)]}
    if priority:
        spec["priorityClassName"] = priority
    out: dict[str, Any] = {"restartPolicy": "OnFailure", "template": {"spec": spec}}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def pytorchjob(name: str, replicas: dict[str, Any], *, policy: dict[str, Any] | None = None,
               annotations: dict[str, str] | None = None, namespace: str = "ns") -> dict[str, Any]:
    spec: dict[str, Any] = {"pytorchReplicaSpecs": replicas}
    if policy is not None:
        spec["runPolicy"] = {"schedulingPolicy": policy}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                         "annotations": annotations or {}}, "spec": spec}


# ---- the rule, on seeded random specs -------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_pytorchjobs_gang_is_all_its_replicas_or_its_min_available(seed: int) -> None:
    rng = random.Random(seed)
    master = (rng.choice([None, 1]), rng.randrange(0, 2000), rng.randrange(0, 3), rng.randrange(0, 1024))
    worker = (rng.choice([None, 0, 1, 2, 5]), rng.randrange(0, 2000), rng.randrange(0, 3), rng.randrange(0, 1024))
    has_master = rng.random() < 0.8
    priorities = [rng.choice([None, "low", "high"]) for _ in range(2)]
    specs = {"Master": replica(*master, priorities[0])} if has_master else {}
    specs["worker" if rng.random() < 0.3 else "Worker"] = replica(*worker, priorities[1])  # the operator camel-cases
    counts = [(1 if master[0] is None else master[0])] if has_master else []
    counts.append(1 if worker[0] is None else worker[0])
    total = sum(counts)
    if total == 0:
        return  # no pod at all: minAvailable has nothing to ask for
    policy: dict[str, Any] = {}
    min_available = rng.choice([None, rng.randint(1, total)])
    if min_available is not None:
        policy["minAvailable"] = min_available
    if rng.random() < 0.3:
        policy["queue"] = "from-policy"
    if rng.random() < 0.3:
        policy["priorityClass"] = "urgent"
    annotation = rng.choice([None, "from-annotation"])
    job = pytorchjob(f"pt{seed}", specs, policy=policy or None,
                     annotations={"scheduling.volcano.sh/queue-name": annotation} if annotation else {})
    pg = pytorchjob_gang(job).podgroup()
    spec = pg["spec"]
    want = total if min_available is None else min_available
    assert pg["metadata"]["name"] == f"pytorchjob-pt{seed}"
    assert spec["minMember"] == want
    types = [("master", counts[0], master)] if has_master else []
    types.append(("worker", counts[-1], worker))
    if want == total:
        assert spec.get("minTaskMember", {}) == {t: n for t, n, _ in types if n}
    else:
        assert "minTaskMember" not in spec
    parts, left = [], want  # Master's pods first, then Worker's, up to minMember
    for _, n, (_, cpu, gpus, mem) in types:
        parts.append((min(n, left), cpu, gpus, mem))
        left -= min(n, left)
    assert quantities(spec) == expected_resources(parts)
    assert spec["queue"] == ("from-policy" if "queue" in policy else annotation or "default")
    first = next((p for p, present in zip(priorities, (has_master, True), strict=True) if present and p), None)
    assert spec.get("priorityClassName") == ("urgent" if "priorityClass" in policy else first)
    assert pg["metadata"]["ownerReferences"][0] == {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": f"pt{seed}", "uid": f"uid-pt{seed}",
        "controller": True, "blockOwnerDeletion": False}


def test_the_policys_min_resources_stand_for_the_computed_ones() -> None:
    job = pytorchjob("p", {"Worker": replica(2, 100, 1, 64)}, policy={"minResources": {"cpu": "3", GPU: "7"}})
    assert pytorchjob_gang(job).podgroup()["spec"]["minResources"] == {"cpu": "3", GPU: "7"}


def test_empty_queue_and_priority_classes_are_unset_as_the_operator_reads_them() -> None:
    # Go strings with `omitempty`: "" is the zero value, which the operator reads as unset (`len(...) != 0`), and
    # a pod's `priorityClassName: ""` is a legal pod spec. The job keeps its gang; the next source applies.
    specs = {"Master": replica(1, 100, 0, 64, ""), "Worker": replica(2, 100, 0, 64, "low")}
    specs["Master"]["template"]["spec"]["priorityClassName"] = ""
    job = pytorchjob("p", specs, policy={"queue": "", "priorityClass": ""},
                     annotations={"scheduling.volcano.sh/queue-name": "from-annotation"})
    spec = pytorchjob_gang(job).podgroup()["spec"]
    assert (spec["minMember"], spec["queue"], spec["priorityClassName"]) == (3, "from-annotation", "low"), spec


@pytest.mark.parametrize("status", [{"runPolicy": {"suspend": True}}, {"status": {"conditions": [
    {"type": "Created", "status": "True"}, {"type": "Succeeded", "status": "True"}]}}], ids=["suspended", "done"])
def test_a_suspended_or_finished_pytorchjob_has_no_gang(status: dict[str, Any]) -> None:
    job = pytorchjob("p", {"Master": replica(1, 100, 0, 64), "Worker": replica(2, 100, 0, 64)})
    job["spec"].update(status.get("runPolicy") and {"runPolicy": status["runPolicy"]} or {})
    job.update({"status": status["status"]} if "status" in status else {})
    assert pytorchjob_gang(job).min_member == 0


def test_a_pytorchjob_pod_finds_its_gang_and_its_task_by_its_labels() -> None:
    labels = {**OPERATOR, "training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/replica-type": "worker"}
    assert owner_group_name(labels) == "pytorchjob-mnist"
    assert role_of({}, labels) == "worker"
    assert role_of({"volcano.sh/task-spec": "other"}, labels) == "other"  # the integration's annotation wins
    # Another training operator's pod (a TFJob's) carries the same job-name label: not a PyTorchJob's gang.
    tf = {**labels, "training.kubeflow.org/operator-name": "tfjob-controller"}
    assert owner_group_name(tf) is None and role_of({}, tf) == ""
    assert owner_group_name({**OPERATOR, "training.kubeflow.org/job-name": "x" * 64}) is None


# ---- hostile specs --------------------------------------------------------------------------------------------
HOSTILE = [
    ("negative replicas", {"Worker": replica(-1, 100, 0, 64)}, None, "spec.pytorchReplicaSpecs[Worker].replicas"),
    ("replicas as text", {"Worker": {**replica(1, 100, 0, 64), "replicas": "2"}}, None,
     "spec.pytorchReplicaSpecs[Worker].replicas"),
    ("a gang over the bound", {"Master": replica(1, 100, 0, 64), "Worker": replica(100_000, 100, 0, 64)}, None,
     "spec.pytorchReplicaSpecs"),
    ("an unknown replica type", {"Chief": replica(1, 100, 0, 64)}, None, "spec.pytorchReplicaSpecs[Chief]"),
    ("a type twice", {"Worker": replica(1, 100, 0, 64), "worker": replica(1, 100, 0, 64)}, None,
     "spec.pytorchReplicaSpecs[worker]"),
    ("no replica specs", {}, None, "spec.pytorchReplicaSpecs"),
    ("no template", {"Worker": {"replicas": 1}}, None, "spec.pytorchReplicaSpecs[Worker].template"),
    ("minAvailable over the job", {"Worker": replica(2, 100, 0, 64)}, {"minAvailable": 3},
     "spec.runPolicy.schedulingPolicy.minAvailable"),
    ("minAvailable zero", {"Worker": replica(2, 100, 0, 64)}, {"minAvailable": 0},
     "spec.runPolicy.schedulingPolicy.minAvailable"),
    ("minAvailable negative", {"Worker": replica(2, 100, 0, 64)}, {"minAvailable": -1},
     "spec.runPolicy.schedulingPolicy.minAvailable"),
    ("minAvailable a boolean", {"Worker": replica(2, 100, 0, 64)}, {"minAvailable": True},
     "spec.runPolicy.schedulingPolicy.minAvailable"),
    ("minAvailable huge", {"Worker": replica(2, 100, 0, 64)}, {"minAvailable": 10**30},
     "spec.runPolicy.schedulingPolicy.minAvailable"),
    ("replicas huge", {"Worker": replica(10**30, 100, 0, 64)}, None, "spec.pytorchReplicaSpecs[Worker].replicas"),
    ("replicas a float", {"Worker": {**replica(1, 100, 0, 64), "replicas": 2.0}}, None,
     "spec.pytorchReplicaSpecs[Worker].replicas"),
    ("a priority class that is no name", {"Worker": replica(2, 100, 0, 64)}, {"priorityClass": ["high"]},
     "spec.runPolicy.schedulingPolicy.priorityClass"),
    ("a queue that is no name", {"Worker": replica(2, 100, 0, 64)}, {"queue": 7},
     "spec.runPolicy.schedulingPolicy.queue"),
    ("minResources unreadable", {"Worker": replica(2, 100, 0, 64)}, {"minResources": {"cpu": "lots"}},
     "spec.runPolicy.schedulingPolicy.minResources"),
]


@pytest.mark.parametrize(("name", "specs", "policy", "path"), HOSTILE, ids=[c[0] for c in HOSTILE])
def test_a_hostile_pytorchjob_gets_a_typed_reason(name: str, specs: dict[str, Any], policy: dict[str, Any] | None,
                                                  path: str) -> None:
    with pytest.raises(OwnerGangError) as caught:
        pytorchjob_gang(pytorchjob("bad", specs, policy=policy))
    assert isinstance(caught.value.reason, FieldInvalid)
    assert (caught.value.reason.object_kind, caught.value.reason.name, caught.value.reason.path) == (
        "PyTorchJob", "ns/bad", path)


# ---- the controller -------------------------------------------------------------------------------------------
class PyTorchApi(Api):
    """test_owner_gangs' fake, also serving PyTorchJobs by name."""

    def get(self, path: str) -> Any:
        parts = path.split("?")[0].strip("/").split("/")
        if len(parts) > 2 and parts[-2] == "pytorchjobs":
            return self.objects.get(("PyTorchJob", parts[-3], parts[-1]))
        return super().get(path)


def controller(*objs: dict[str, Any]) -> tuple[OwnerGangController, PyTorchApi]:
    api = PyTorchApi()
    api.objects[("Namespace", "", "ns")] = {"metadata": {"name": "ns", "annotations": {}}}
    for obj in objs:
        api.put(obj["kind"], obj)
    return OwnerGangController(api, [SCHED]), api  # type: ignore[arg-type]


def pytorch_pod(job: str, rtype: str, index: int) -> dict[str, Any]:
    return {"metadata": {"name": f"{job}-{rtype}-{index}", "namespace": "ns", "uid": f"p-{rtype}-{index}",
                         "labels": {**OPERATOR, "training.kubeflow.org/job-name": job,
                                    "training.kubeflow.org/replica-type": rtype},
                         "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": job,
                                              "uid": f"uid-{job}", "controller": True}]},
            "spec": {"schedulerName": SCHED, "containers": [container(100, 0, 64)]}}


def test_an_opted_in_pytorchjob_gets_one_podgroup_that_follows_its_replicas_and_goes_when_it_is_done() -> None:
    job = pytorchjob("mnist", {"Master": replica(1, 100, 1, 64), "Worker": replica(2, 100, 1, 64)},
                     annotations=OPT_IN)
    ctl, api = controller(job)
    ctl.on_pytorchjob("ADDED", job)
    assert podgroups(api)["pytorchjob-mnist"]["minTaskMember"] == {"master": 1, "worker": 2}
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 4  # an elastic job's HPA, say
    ctl.on_pytorchjob("MODIFIED", job)
    spec = podgroups(api)["pytorchjob-mnist"]
    assert (spec["minMember"], spec["minTaskMember"], spec["minResources"][GPU]) == (5, {"master": 1, "worker": 4},
                                                                                     "5")
    job["status"] = {"conditions": [{"type": "Failed", "status": "True"}]}
    ctl.on_pytorchjob("MODIFIED", job)
    assert podgroups(api) == {}  # as the operator deletes its own PodGroup when the job ends


@pytest.mark.parametrize("opted_in", [True, False])
def test_a_pytorchjob_pod_gets_a_plain_podgroup_only_when_its_job_has_no_gang(opted_in: bool) -> None:
    job = pytorchjob("mnist", {"Worker": replica(2, 100, 0, 64)},
                     annotations={OWNER_GANG_ANNOTATION: "true" if opted_in else "false"})
    ctl, api = controller(job)
    PodGroupController(api, [SCHED], owner_claims=ctl.claims).on_pod(  # type: ignore[arg-type]
        "ADDED", pytorch_pod("mnist", "worker", 0))
    assert list(podgroups(api)) == (["pytorchjob-mnist"] if opted_in else ["podgroup-uid-mnist"])


def test_a_hostile_pytorchjob_gets_one_log_line_and_no_podgroup(caplog: pytest.LogCaptureFixture) -> None:
    bad = pytorchjob("bad", {"Worker": replica(-3, 100, 0, 64)}, annotations=OPT_IN)
    ctl, api = controller(bad)
    with caplog.at_level(logging.INFO, "volcano_py.controllers.owner_gangs"):
        for _ in range(3):
            ctl.on_pytorchjob("MODIFIED", bad)
    lines = [r for r in caplog.records if r.name == "volcano_py.controllers.owner_gangs"]
    assert len(lines) == 1 and "spec.pytorchReplicaSpecs[Worker].replicas" in lines[0].getMessage()
    assert podgroups(api) == {}


_W = ("spec", "pytorchReplicaSpecs", "Worker")
_SPOTS = [("spec",), ("spec", "pytorchReplicaSpecs"), _W, (*_W, "replicas"), (*_W, "template"),
          (*_W, "template", "spec"), (*_W, "template", "spec", "schedulerName"),
          (*_W, "template", "spec", "containers"), ("spec", "runPolicy"), ("spec", "runPolicy", "schedulingPolicy"),
          ("spec", "runPolicy", "schedulingPolicy", "minAvailable"), ("spec", "runPolicy", "schedulingPolicy", "queue"),
          ("spec", "runPolicy", "schedulingPolicy", "minResources"), ("status",), ("metadata", "annotations")]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.data())
def test_a_pytorchjob_with_junk_anywhere_never_raises_out_of_the_controller(data: Any) -> None:
    job = pytorchjob("x", {"Worker": replica(2, 100, 0, 64)}, policy={"queue": "q"}, annotations=dict(OPT_IN))
    spot = data.draw(st.sampled_from(_SPOTS))
    parent = job
    for step in spot[:-1]:
        parent = parent.setdefault(step, {}) if step == "status" else parent[step]
    parent[spot[-1]] = data.draw(_JUNK)
    ctl, api = controller(job)
    gangs = ctl.sync(job, PYTORCHJOB)
    assert sorted(podgroups(api)) == sorted(g.name for g in gangs or () if g.min_member > 0)


# ---- the scheduler --------------------------------------------------------------------------------------------
def scheduled_pod(rtype: str, index: int) -> dict[str, Any]:
    pod = pod_object(f"mnist-{rtype}-{index}", gpu=2, cpu=None, memory=None)
    pod["metadata"]["labels"] = {**OPERATOR, "training.kubeflow.org/job-name": "mnist",
                                 "training.kubeflow.org/replica-type": rtype}
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "mnist",
                                           "uid": "uid-mnist", "controller": True}]
    return pod


@pytest.mark.parametrize("nodes", [3, 2])
def test_a_pytorchjob_gang_binds_whole_or_not_at_all(nodes: int) -> None:
    c = cluster().nodes("n", nodes, gpu=2)
    for rtype, index in (("master", 0), ("worker", 0), ("worker", 1)):
        c.sim.add_pod(scheduled_pod(rtype, index))
    c.cycle()
    assert not any(p.manifest["spec"].get("nodeName") for p in c.sim.pods.values())  # none before its gang
    job = pytorchjob("mnist", {"Master": replica(1, 0, 2, 0), "Worker": replica(2, 0, 2, 0)}, namespace="default")
    c.sim.add_podgroup(pytorchjob_gang(job).podgroup())
    for _ in range(3):
        c.cycle()
    bound = [bool(p.manifest["spec"].get("nodeName")) for p in c.sim.pods.values()]
    assert bound == [nodes == 3] * 3, bound
