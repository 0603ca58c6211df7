"""Automatic gangs for JobSets and LeaderWorkerSets (api/owner_gang.py, controllers/owner_gangs.py).

Seeded random specs are checked against the rule written out here by hand: a JobSet is one gang of the sum over
its replicated jobs of replicas x min(parallelism, completions) pods, counted per replicated job in
minTaskMember, with those pods' requests summed; a LeaderWorkerSet is `replicas` gangs of `size` pods (the
leader and size-1 workers). Hostile specs get a typed reason and one log line, and no PodGroup. The controller
keeps the PodGroups in step with the workload, and the scheduler never starts a pod of an owner gang alone.
"""

from __future__ import annotations

import logging
import random
from decimal import Decimal
from typing import Any
from urllib.parse import unquote

import pytest
from fake_api import FakeApi
from hypothesis import given, settings, strategies as st

from scheduler.api.owner_gang import (
    OWNER_GANG_ANNOTATION,
    OwnerGangError,
    jobset_gang,
    lws_gangs,
    owner_group_name,
)
from scheduler.api.reasons import FieldInvalid
from scheduler.api.resources import parse_quantity
from scheduler.controllers.owner_gangs import OwnerGangController
from scheduler.controllers.podgroup import PodGroupController
from scheduler.sim.objects import pod_object
from scheduler.testing import cluster

GPU = "nvidia.com/gpu"
SCHED = "volcano-py"
SEEDS = range(150)


def container(cpu_m: int, gpus: int, mem_mi: int) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": f"{cpu_m}m", "memory": f"{mem_mi}Mi"}
    limits = {GPU: str(gpus)} if gpus else {}
    return {"name": "c", "image": "x", "resources": {"requests": requests, "limits": limits}}


def jobset(name: str, rjobs: list[dict[str, Any]], *, annotations: dict[str, str] | None = None,
           labels: dict[str, str] | None = None, namespace: str = "ns") -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                         "annotations": annotations or {}, "labels": labels or {}},
            "spec": {"replicatedJobs": rjobs}}


def rjob(name: str, replicas: int | None, parallelism: int | None, completions: int | None,
         cpu_m: int, gpus: int, mem_mi: int, priority: str | None = None) -> dict[str, Any]:
    job_spec: dict[str, Any] = {"template": {"spec": {"schedulerName": SCHED,
                                                      "containers": [container(cpu_m, gpus, mem_mi)]}}}
    if priority:
        job_spec["template"]["spec"]["priorityClassName"] = priority
    if parallelism is not None:
        job_spec["parallelism"] = parallelism
    if completions is not None:
        job_spec["completions"] = completions
    out: dict[str, Any] = {"name": name, "template": {"spec": job_spec}}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def lws(name: str, replicas: int | None, size: int | None, worker: tuple[int, int, int],
        leader: tuple[int, int, int] | None, *, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    template: dict[str, Any] = {"workerTemplate": {"spec": {"schedulerName": SCHED,
                                                            "containers": [container(*worker)]}}}
    if leader is not None:
        template["leaderTemplate"] = {"spec": {"schedulerName": SCHED, "containers": [container(*leader)]}}
    if size is not None:
        template["size"] = size
    spec: dict[str, Any] = {"leaderWorkerTemplate": template}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "annotations": annotations or {}},
            "spec": spec}


def quantities(spec: dict[str, Any]) -> dict[str, Decimal]:
    return {k: parse_quantity(v) for k, v in (spec.get("minResources") or {}).items()}


def expected_resources(parts: list[tuple[int, int, int, int]]) -> dict[str, Decimal]:
    """(pods, cpu millicores, GPUs, MiB) per part -> minResources as numbers (cpu in cores, memory in bytes)."""
    cpu = sum(Decimal(n * c) / 1000 for n, c, _, _ in parts)
    gpus = sum(n * g for n, _, g, _ in parts)
    mem = sum(n * m for n, _, _, m in parts) * 2**20
    out = {"cpu": cpu, "memory": Decimal(mem)}
    if gpus:
        out[GPU] = Decimal(gpus)
    return {k: v for k, v in out.items() if v}


# ---- the rule, on seeded random specs -------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_jobsets_gang_is_the_sum_of_its_replicated_jobs(seed: int) -> None:
    rng = random.Random(seed)
    rjobs, parts, tasks = [], [], {}
    for i in range(rng.randint(1, 4)):
        replicas = rng.choice([None, 0, 1, 2, 3, 5])
        parallelism = rng.choice([None, 1, 2, 4, 8])
        completions = rng.choice([None, 1, 3, 16])
        cpu_m, gpus, mem = rng.choice([100, 250, 1000, 3500]), rng.choice([0, 1, 2, 8]), rng.choice([64, 512, 4096])
        rjobs.append(rjob(f"r{i}", replicas, parallelism, completions, cpu_m, gpus, mem))
        # By hand: a Job runs min(parallelism, completions) pods at once, each defaulting to 1 (completions to
        # parallelism), and a replicated job has `replicas` Jobs (default 1).
        p = 1 if parallelism is None else parallelism
        running = p if completions is None else min(p, completions)
        pods = (1 if replicas is None else replicas) * running
        parts.append((pods, cpu_m, gpus, mem))
        if pods:
            tasks[f"r{i}"] = pods
    queue = rng.choice([None, "team-a"])
    js = jobset(f"js{seed}", rjobs, annotations={"scheduling.volcano.sh/queue-name": queue} if queue else {})
    pg = jobset_gang(js).podgroup()
    assert pg["metadata"]["name"] == f"jobset-js{seed}"
    assert pg["spec"]["minMember"] == sum(n for n, *_ in parts)
    assert pg["spec"].get("minTaskMember", {}) == tasks
    assert quantities(pg["spec"]) == expected_resources(parts)
    assert pg["spec"]["queue"] == (queue or "default")
    assert pg["metadata"]["ownerReferences"][0]["uid"] == f"uid-js{seed}"


@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_leaderworkersets_groups_are_one_gang_each_of_its_size(seed: int) -> None:
    rng = random.Random(seed)
    replicas, size = rng.choice([None, 0, 1, 2, 4, 7]), rng.choice([None, 1, 2, 3, 8])
    worker = (rng.choice([100, 2000]), rng.choice([0, 1, 4]), rng.choice([128, 1024]))
    leader = rng.choice([None, (500, 0, 256), (1000, 2, 2048)])
    gangs = lws_gangs(lws(f"l{seed}", replicas, size, worker, leader))
    n, s = (1 if replicas is None else replicas), (1 if size is None else size)
    assert [g.name for g in gangs] == [f"lws-l{seed}-{i}" for i in range(n)]
    lead = leader or worker
    for gang in gangs:
        spec = gang.podgroup()["spec"]
        assert spec["minMember"] == s
        assert quantities(spec) == expected_resources([(1, *lead), (s - 1, *worker)])


def test_a_pod_finds_its_owner_gang_by_its_labels() -> None:
    assert owner_group_name({"jobset.sigs.k8s.io/jobset-name": "train"}) == "jobset-train"
    assert owner_group_name({"leaderworkerset.sigs.k8s.io/name": "serve",
                             "leaderworkerset.sigs.k8s.io/group-index": "3"}) == "lws-serve-3"
    assert owner_group_name({"leaderworkerset.sigs.k8s.io/name": "serve"}) is None  # no group yet
    assert owner_group_name({"leaderworkerset.sigs.k8s.io/name": "serve",
                             "leaderworkerset.sigs.k8s.io/group-index": "-1"}) is None
    assert owner_group_name({"app": "web"}) is None


# ---- hostile specs --------------------------------------------------------------------------------------------
HOSTILE_JOBSETS = [
    ("negative replicas", [rjob("w", -1, 1, None, 100, 0, 64)], "spec.replicatedJobs[0].replicas"),
    ("huge parallelism", [rjob("w", 1, 10**9, None, 100, 0, 64)], "spec.replicatedJobs[0].template.spec.parallelism"),
    ("a gang over the bound", [rjob("w", 1000, 1000, None, 100, 0, 64)],
     "spec.replicatedJobs[0].replicas x parallelism"),
    ("replicas as text", [{**rjob("w", 1, 1, None, 100, 0, 64), "replicas": "2"}], "spec.replicatedJobs[0].replicas"),
    ("no template", [{"name": "w", "replicas": 1}], "spec.replicatedJobs[0].template"),
    ("no replicated jobs", [], "spec.replicatedJobs"),
    ("a name twice", [rjob("w", 1, 1, None, 100, 0, 64), rjob("w", 1, 1, None, 100, 0, 64)],
     "spec.replicatedJobs[1].name"),
]


@pytest.mark.parametrize(("name", "rjobs", "path"), HOSTILE_JOBSETS, ids=[c[0] for c in HOSTILE_JOBSETS])
def test_a_hostile_jobset_gets_a_typed_reason(name: str, rjobs: list[dict[str, Any]], path: str) -> None:
    with pytest.raises(OwnerGangError) as caught:
        jobset_gang(jobset("bad", rjobs))
    reason = caught.value.reason
    assert isinstance(reason, FieldInvalid)
    assert (reason.object_kind, reason.name, reason.path) == ("JobSet", "ns/bad", path)


def test_an_empty_priority_class_name_is_none_and_the_next_template_gives_the_class() -> None:
    # A pod's `priorityClassName: ""` is a legal pod spec (none): the workload keeps its gang.
    first, second = rjob("a", 1, 1, None, 100, 0, 64), rjob("b", 1, 1, None, 100, 0, 64, "low")
    first["template"]["spec"]["template"]["spec"]["priorityClassName"] = ""
    assert jobset_gang(jobset("js", [first, second])).podgroup()["spec"]["priorityClassName"] == "low"
    obj = lws("l", 1, 2, (100, 0, 64), (100, 0, 64))
    obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["priorityClassName"] = ""
    obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["priorityClassName"] = "low"
    assert [g.podgroup()["spec"]["priorityClassName"] for g in lws_gangs(obj)] == ["low"]


def test_a_jobset_started_in_order_is_refused_a_gang() -> None:
    js = jobset("ordered", [rjob("a", 1, 1, None, 100, 0, 64)])
    js["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    with pytest.raises(OwnerGangError) as caught:
        jobset_gang(js)
    assert caught.value.reason.path == "spec.startupPolicy.startupPolicyOrder"


def test_exclusive_placement_that_admits_pods_one_by_one_is_refused_a_gang() -> None:
    exclusive = {"alpha.jobset.sigs.k8s.io/exclusive-topology": "rack"}
    with pytest.raises(OwnerGangError) as caught:
        jobset_gang(jobset("ex", [rjob("a", 1, 2, None, 100, 0, 64)], annotations=exclusive))
    assert caught.value.reason.path == "metadata.annotations[alpha.jobset.sigs.k8s.io/exclusive-topology]"
    # The node-selector strategy does not wait for a first pod: a gang.
    assert jobset_gang(jobset("ns-ex", [rjob("a", 1, 2, None, 100, 0, 64)], annotations={
        **exclusive, "alpha.jobset.sigs.k8s.io/node-selector": "true"})).min_member == 2
    with pytest.raises(OwnerGangError) as caught:
        lws_gangs(lws("ex", 1, 2, (100, 0, 64), None,
                      annotations={"leaderworkerset.sigs.k8s.io/exclusive-topology": "rack"}))
    assert caught.value.reason.path == "metadata.annotations[leaderworkerset.sigs.k8s.io/exclusive-topology]"


@pytest.mark.parametrize(("replicas", "size", "path"), [
    (-2, 2, "spec.replicas"), (2, 0, "spec.leaderWorkerTemplate.size"), (True, 2, "spec.replicas"),
    (1000, 1000, "spec.replicas x size"),
])
def test_a_hostile_leaderworkerset_gets_a_typed_reason(replicas: Any, size: int, path: str) -> None:
    with pytest.raises(OwnerGangError) as caught:
        lws_gangs(lws("bad", replicas, size, (100, 0, 64), None))
    assert (caught.value.reason.object_kind, caught.value.reason.path) == ("LeaderWorkerSet", path)


def test_a_workload_whose_name_no_label_can_hold_gets_a_typed_reason_not_a_podgroup_the_apiserver_refuses() -> None:
    """Its pods could never name it (a label value is at most 63 characters), and `lws-<254 characters>-0` is no
    PodGroup name: creating one would fail, and be tried again, forever."""
    long = "x" * 64
    for make in (lambda: jobset_gang(jobset(long, [rjob("w", 1, 1, None, 100, 0, 64)])),
                 lambda: lws_gangs(lws(long, 1, 2, (100, 0, 64), None))):
        with pytest.raises(OwnerGangError) as caught:
            make()
        assert caught.value.reason.path == "metadata.name"
    assert jobset_gang(jobset("x" * 63, [rjob("w", 1, 1, None, 100, 0, 64)])).name == "jobset-" + "x" * 63


# ---- the controller -------------------------------------------------------------------------------------------
class Api(FakeApi):
    """FakeApi with the reads the owner-gang controller makes: namespaces, workloads, PodGroups by label."""

    def get(self, path: str) -> Any:
        parts = unquote(path).split("?")[0].strip("/").split("/")
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 4:
            return self.objects.get(("Namespace", "", parts[3]))
        if parts[-1] in ("jobsets", "leaderworkersets", "podgroups") or "?" in path:
            kind = {"jobsets": "JobSet", "leaderworkersets": "LeaderWorkerSet"}.get(parts[-1], "PodGroup")
            label = unquote(path).split("labelSelector=")[-1].split("=") if "labelSelector=" in path else None
            items = [o for (k, ns, _), o in self.objects.items() if k == kind and ns == parts[-2] and (
                label is None or (o["metadata"].get("labels") or {}).get(label[0]) == label[1])]
            return {"items": items}
        if parts[-2] in ("jobsets", "leaderworkersets"):
            kind = "JobSet" if parts[-2] == "jobsets" else "LeaderWorkerSet"
            return self.objects.get((kind, parts[-3], parts[-1]))
        return super().get(path)


def controller(*objs: dict[str, Any], namespace_opt_in: bool = False) -> tuple[OwnerGangController, Api]:
    api = Api()
    api.objects[("Namespace", "", "ns")] = {"metadata": {"name": "ns", "annotations": {
        OWNER_GANG_ANNOTATION: "true"} if namespace_opt_in else {}}}
    for obj in objs:
        api.put(obj["kind"], obj)
    return OwnerGangController(api, [SCHED]), api  # type: ignore[arg-type]


def podgroups(api: Api) -> dict[str, dict[str, Any]]:
    return {name: pg["spec"] for name, pg in api.of_kind("PodGroup").items()}


OPT_IN = {OWNER_GANG_ANNOTATION: "true"}


def test_a_jobset_opted_in_by_its_namespace_gets_one_podgroup_that_follows_its_replicas() -> None:
    js = jobset("train", [rjob("driver", 1, 1, None, 500, 0, 64), rjob("workers", 2, 2, None, 1000, 1, 64)])
    ctl, api = controller(js, namespace_opt_in=True)
    ctl.on_jobset("ADDED", js)
    assert podgroups(api)["jobset-train"]["minMember"] == 5
    assert podgroups(api)["jobset-train"]["minTaskMember"] == {"driver": 1, "workers": 4}
    js["spec"]["replicatedJobs"][1]["replicas"] = 3
    ctl.on_jobset("MODIFIED", js)
    spec = podgroups(api)["jobset-train"]
    assert (spec["minMember"], spec["minTaskMember"]["workers"], quantities(spec)[GPU]) == (7, 6, Decimal(6))


def test_the_podgroups_annotations_written_by_the_scheduler_survive_a_sync() -> None:
    js = jobset("kept", [rjob("w", 2, 1, None, 100, 0, 64)], annotations=OPT_IN)
    ctl, api = controller(js)
    ctl.on_jobset("ADDED", js)
    api.objects[("PodGroup", "ns", "jobset-kept")]["metadata"]["annotations"] = {"volcano-py.io/reasons": "[]"}
    js["spec"]["replicatedJobs"][0]["replicas"] = 3
    ctl.on_jobset("MODIFIED", js)
    pg = api.objects[("PodGroup", "ns", "jobset-kept")]
    assert pg["spec"]["minMember"] == 3
    assert pg["metadata"]["annotations"] == {"volcano-py.io/reasons": "[]"}


def test_a_jobset_that_is_not_opted_in_gets_no_gang_and_its_pods_keep_their_per_job_podgroups() -> None:
    js = jobset("plain", [rjob("w", 2, 1, None, 100, 0, 64)], annotations={OWNER_GANG_ANNOTATION: "false"})
    ctl, api = controller(js, namespace_opt_in=True)  # the workload's own "false" wins over its namespace
    ctl.on_jobset("ADDED", js)
    assert podgroups(api) == {}
    pod = {"metadata": {"name": "plain-w-0-0", "namespace": "ns", "uid": "p1",
                        "labels": {"jobset.sigs.k8s.io/jobset-name": "plain"},
                        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "plain-w-0",
                                             "uid": "job-1", "controller": True}]},
           "spec": {"schedulerName": SCHED, "containers": [container(100, 0, 64)]}}
    PodGroupController(api, [SCHED], owner_claims=ctl.claims).on_pod("ADDED", pod)  # type: ignore[arg-type]
    assert list(podgroups(api)) == ["podgroup-job-1"]


def test_an_opted_in_jobsets_pod_gets_no_per_job_podgroup() -> None:
    js = jobset("gang", [rjob("w", 2, 1, None, 100, 0, 64)], annotations=OPT_IN)
    ctl, api = controller(js)
    pod = {"metadata": {"name": "gang-w-0-0", "namespace": "ns", "uid": "p1",
                        "labels": {"jobset.sigs.k8s.io/jobset-name": "gang"},
                        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "gang-w-0",
                                             "uid": "job-1", "controller": True}]},
           "spec": {"schedulerName": SCHED, "containers": [container(100, 0, 64)]}}
    PodGroupController(api, [SCHED], owner_claims=ctl.claims).on_pod("ADDED", pod)  # type: ignore[arg-type]
    assert list(podgroups(api)) == ["jobset-gang"]  # made by the pod's arrival, before the JobSet's event


def test_a_leaderworkerset_scaled_down_and_up_has_its_groups_removed_and_added() -> None:
    obj = lws("serve", 3, 4, (1000, 1, 64), None, annotations=OPT_IN)
    ctl, api = controller(obj)
    ctl.on_lws("ADDED", obj)
    assert sorted(podgroups(api)) == ["lws-serve-0", "lws-serve-1", "lws-serve-2"]
    assert {s["minMember"] for s in podgroups(api).values()} == {4}
    obj["spec"]["replicas"] = 1
    api.put("LeaderWorkerSet", obj)  # as the apiserver now serves it
    ctl.on_lws("MODIFIED", obj)
    assert sorted(podgroups(api)) == ["lws-serve-0"]
    # A pod of group 2, on its way out, gets no per-StatefulSet PodGroup either.
    leaving = {"metadata": {"name": "serve-2", "namespace": "ns", "uid": "p2",
                            "labels": {"leaderworkerset.sigs.k8s.io/name": "serve",
                                       "leaderworkerset.sigs.k8s.io/group-index": "2"},
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "serve",
                                                 "uid": "sts-1", "controller": True}]},
               "spec": {"schedulerName": SCHED, "containers": [container(1000, 1, 64)]}}
    PodGroupController(api, [SCHED], owner_claims=ctl.claims).on_pod("MODIFIED", leaving)  # type: ignore[arg-type]
    assert sorted(podgroups(api)) == ["lws-serve-0"]
    obj["spec"]["replicas"], obj["spec"]["leaderWorkerTemplate"]["size"] = 2, 2
    ctl.on_lws("MODIFIED", obj)
    assert {k: s["minMember"] for k, s in podgroups(api).items()} == {"lws-serve-0": 2, "lws-serve-1": 2}


def test_a_deleted_workloads_failed_sync_is_not_run_again() -> None:
    js = jobset("gone", [rjob("w", 2, 1, None, 100, 0, 64)], annotations=OPT_IN)
    ctl, api = controller(js)
    api.failures[("create", "PodGroup")] = 1
    ctl.on_jobset("ADDED", js)  # the create fails: a retry is armed
    key = "JobSet ns/gone"
    assert ctl.retries.failures(key) == 1
    ctl.on_jobset("DELETED", js)
    assert ctl.retries.failures(key) == 0 and key not in ctl.retries._pending
    ctl.retries.timers.cancel_all()


def test_a_hostile_workload_gets_one_log_line_and_no_podgroup(caplog: pytest.LogCaptureFixture) -> None:
    bad = lws("bad", -1, 2, (100, 0, 64), None, annotations=OPT_IN)
    ctl, api = controller(bad)
    with caplog.at_level(logging.INFO, "volcano_py.controllers.owner_gangs"):
        for _ in range(3):
            ctl.on_lws("MODIFIED", bad)
    lines = [r for r in caplog.records if r.name == "volcano_py.controllers.owner_gangs"]
    assert len(lines) == 1 and "spec.replicas" in lines[0].getMessage()
    assert podgroups(api) == {}


_JUNK = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**64, max_value=2**64) | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
        ["spec", "template", "replicas", "parallelism", "size", "schedulerName", "containers", "workerTemplate"]),
        inner, max_size=3),
    max_leaves=8)
_RJOB = ("spec", "replicatedJobs", 0)
_JOB = (*_RJOB, "template", "spec")
_JOBSET_SPOTS = [("spec",), ("spec", "replicatedJobs"), _RJOB, (*_RJOB, "template"), (*_RJOB, "replicas"), _JOB,
                 (*_JOB, "parallelism"), (*_JOB, "template"), (*_JOB, "template", "spec"),
                 (*_JOB, "template", "spec", "schedulerName"), (*_JOB, "template", "spec", "containers"),
                 ("spec", "startupPolicy"), ("metadata", "annotations")]
_LWT = ("spec", "leaderWorkerTemplate")
_LWS_SPOTS = [("spec",), ("spec", "replicas"), _LWT, (*_LWT, "size"), (*_LWT, "workerTemplate"),
              (*_LWT, "workerTemplate", "spec"), (*_LWT, "workerTemplate", "spec", "schedulerName"),
              (*_LWT, "leaderTemplate"), ("spec", "startupPolicy"), ("metadata", "annotations")]


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.booleans(), st.data())
def test_a_workload_with_junk_anywhere_never_raises_out_of_the_controller(is_lws: bool, data: Any) -> None:
    """Whatever sits where a template, a count or a scheduler name belongs (a list, a bool, a 2^64, a text),
    the sync answers a gang or none and never raises: a raise would retry the workload forever, and in a pod's
    `claims` it would keep the pod's per-Job PodGroup from being made."""
    obj = lws("x", 2, 2, (100, 0, 64), None, annotations=dict(OPT_IN)) if is_lws else jobset(
        "x", [rjob("w", 2, 1, None, 100, 0, 64)], annotations=dict(OPT_IN))
    spot = data.draw(st.sampled_from(_LWS_SPOTS if is_lws else _JOBSET_SPOTS))
    parent = obj
    for step in spot[:-1]:
        parent = parent[step]
    parent[spot[-1]] = data.draw(_JUNK)
    ctl, api = controller(obj)
    gangs = ctl.sync(obj, "lws" if is_lws else "jobset")
    assert sorted(podgroups(api)) == sorted(g.name for g in gangs or () if g.min_member > 0)


class CountingApi(Api):
    def __init__(self) -> None:
        super().__init__()
        self.workload_reads = self.podgroup_reads = 0

    def get(self, path: str) -> Any:
        self.workload_reads += "/jobsets/" in path
        self.podgroup_reads += "/podgroups/" in path  # one PodGroup's GET, not the LIST
        return super().get(path)


def test_a_workload_event_that_changes_nothing_reads_one_list_not_each_group() -> None:
    api = CountingApi()
    api.objects[("Namespace", "", "ns")] = {"metadata": {"name": "ns"}}
    ctl = OwnerGangController(api, [SCHED])  # type: ignore[arg-type]
    obj = lws("many", 20, 2, (100, 0, 64), None, annotations=OPT_IN)
    ctl.on_lws("ADDED", obj)
    assert len(podgroups(api)) == 20
    api.podgroup_reads, writes = 0, len(api.writes)
    obj["status"] = {"readyReplicas": 3}  # LWS writes its status often
    ctl.on_lws("MODIFIED", obj)
    assert (api.podgroup_reads, len(api.writes)) == (0, writes)
    obj["spec"]["leaderWorkerTemplate"]["size"] = 3  # a real change is still written to every group
    ctl.on_lws("MODIFIED", obj)
    assert {s["minMember"] for s in podgroups(api).values()} == {3}


def test_syncing_one_workload_keeps_the_others_gangs_known_to_their_pods() -> None:
    api = CountingApi()
    api.objects[("Namespace", "", "ns")] = {"metadata": {"name": "ns"}}
    ctl = OwnerGangController(api, [SCHED])  # type: ignore[arg-type]
    a, b = (jobset(n, [rjob("w", 2, 1, None, 100, 0, 64)], annotations=OPT_IN) for n in ("a", "b"))
    for js in (a, b):
        api.put("JobSet", js)
        ctl.on_jobset("ADDED", js)
    pod_of_a = {"metadata": {"name": "a-w-0-0", "namespace": "ns",
                             "labels": {"jobset.sigs.k8s.io/jobset-name": "a"}}}
    assert ctl.claims(pod_of_a)
    assert api.workload_reads == 0  # known from a's own sync, not read again because b was synced after it
    ctl.on_jobset("DELETED", a)
    api.objects.pop(("JobSet", "ns", "a"))
    assert not ctl.claims(pod_of_a)


# ---- the scheduler --------------------------------------------------------------------------------------------
def jobset_pod(name: str, rjob_name: str, gpus: int) -> dict[str, Any]:
    pod = pod_object(name, gpu=gpus, cpu=None, memory=None)
    pod["metadata"]["labels"] = {"jobset.sigs.k8s.io/jobset-name": "train",
                                 "jobset.sigs.k8s.io/replicatedjob-name": rjob_name}
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": f"train-{rjob_name}-0",
                                           "uid": f"job-{rjob_name}", "controller": True}]
    return pod


def owner_gang_cluster(nodes: int) -> Any:
    c = cluster().nodes("n", nodes, gpu=2)
    for i in range(2):
        c.sim.add_pod(jobset_pod(f"train-workers-0-{i}", "workers", 2))
    c.sim.add_pod(jobset_pod("train-driver-0-0", "driver", 2))
    return c


def test_a_jobset_pod_waits_for_its_gang_and_the_whole_gang_then_binds() -> None:
    c = owner_gang_cluster(3)
    c.cycle()
    assert not any(p.manifest["spec"].get("nodeName") for p in c.sim.pods.values())  # none alone
    js = jobset("train", [rjob("driver", 1, 1, None, 0, 2, 0), rjob("workers", 1, 2, None, 0, 2, 0)],
                namespace="default")
    c.sim.add_podgroup(jobset_gang(js).podgroup())
    c.cycle()
    assert all(p.manifest["spec"].get("nodeName") for p in c.sim.pods.values())
    assert len(c.sim.pods) == 3


def test_a_jobset_gang_without_room_for_all_stays_wholly_pending() -> None:
    c = owner_gang_cluster(2)
    js = jobset("train", [rjob("driver", 1, 1, None, 0, 2, 0), rjob("workers", 1, 2, None, 0, 2, 0)],
                namespace="default")
    c.sim.add_podgroup(jobset_gang(js).podgroup())
    for _ in range(3):
        c.cycle()
    assert not any(p.manifest["spec"].get("nodeName") for p in c.sim.pods.values())
