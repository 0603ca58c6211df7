"""Another scheduler's pod is stored as the part of it the scheduler reads (cache/slim.py): on random pods, hostile
ones among them, every reader reads from the slim object exactly what it reads from the whole one, and a random
cluster's snapshot is the same with the stores slim as with them whole."""

from __future__ import annotations

import copy
import random
import threading
from typing import Any

from hypothesis import HealthCheck, example, given, settings, strategies as st

from scheduler.adapter.partial import owned_by_controller
from scheduler.api import fields as F
from scheduler.api.convert import group_of, key_of, plain_group_of, wants_gang
from scheduler.api.pod import status_of
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.evictor import _disruption_target, _terminating, noticed_until, victim_of
from scheduler.cache.kube import dumps
from scheduler.cache.parse import ParseCache
from scheduler.cache.slim import Slimmer
from scheduler.cache.store import resource_version
from scheduler.cycle import builtin_default_conf, run_cycle
from scheduler.sim.objects import node_object, pod_object
from tests.adapter.snapshot_values import snapshot_value, value

OURS = frozenset({"volcano-py"})
ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}}

_valid = ["1", "500m", "2", "8Gi", "100Mi", "3", "0"]
_quantity = st.sampled_from([*_valid, *_valid, *_valid, "-1", "1.5", "x", 7, None])  # mostly valid
_resources = st.fixed_dictionaries({}, optional={
    "requests": st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), _quantity, max_size=3),
    "limits": st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), _quantity, max_size=3)})
_container = st.fixed_dictionaries({"name": st.sampled_from(["main", "side"])}, optional={
    "image": st.just("registry.invalid/train:latest"),
    "resources": _resources,
    "ports": st.lists(st.fixed_dictionaries({"containerPort": st.sampled_from([80, 8080])}, optional={
        "hostPort": st.sampled_from([80, 8080, 0, 70000, "x"]), "protocol": st.sampled_from(["TCP", "UDP"])}),
        max_size=2),
    "restartPolicy": st.sampled_from(["Always", "Never"]),
    "env": st.just([{"name": "A", "value": "b" * 40}]),
    "volumeMounts": st.just([{"name": "data", "mountPath": "/data"}]),
})
_text = st.sampled_from(["a", "x", "bench", "", "g1", "y" * 300])
_annotations = st.dictionaries(st.sampled_from([
    F.GROUP_NAME, "volcano.sh/task-spec", "volcano.sh/preemptable", F.POD_EVICTION_NOTICE,
    "scheduling.volcano.sh/group-min-member", "volcano.sh/task-index", "other"]),
    st.sampled_from(["g1", "worker", "true", "false", "3", "2026-12-05T10:00:00Z", "bad"]), max_size=4)
_meta = st.fixed_dictionaries({"name": st.sampled_from(["p1", "p2", "run-7"]), "namespace": st.just("ns")}, optional={
    "uid": st.sampled_from(["u1", "u2", 5]),
    "resourceVersion": st.sampled_from(["10", "11", 12]),
    "creationTimestamp": st.sampled_from(["2026-12-05T10:00:00Z", "yesterday", 3]),
    "deletionTimestamp": st.sampled_from(["2026-12-05T10:00:05Z", None, "soon"]),
    "labels": st.one_of(st.dictionaries(st.sampled_from(["app", "volcano.sh/task-spec", "tier"]), _text, max_size=3),
                        st.just(["not", "a", "map"])),
    "annotations": st.one_of(_annotations, st.just(7)),
    "ownerReferences": st.lists(st.fixed_dictionaries({"uid": st.sampled_from(["o1", "o2"]), "kind": st.just("Job"),
                                                       "name": st.just("j")},
                                                      optional={"controller": st.booleans()}), max_size=2),
    "generateName": st.just("run-"),
    "finalizers": st.just(["x/y"]),
})
_spec = st.fixed_dictionaries({}, optional={
    "schedulerName": st.sampled_from(["default-scheduler", "other", "volcano-py", 3]),
    "nodeName": st.sampled_from(["n1", "n2", "", 5]),
    "priority": st.sampled_from([0, 1000, -5, 2**40, "high"]),
    "priorityClassName": st.sampled_from(["high", "low", "", 9]),
    "containers": st.one_of(*[st.lists(_container, max_size=3)] * 4, st.just("none"), st.just([1])),
    "initContainers": st.lists(_container, max_size=2),
    "overhead": st.dictionaries(st.sampled_from(["cpu", "memory"]), _quantity, max_size=2),
    "resources": st.one_of(st.none(), _resources),
    "affinity": st.one_of(st.just(ANTI), st.just({"podAntiAffinity": 3}), st.none()),
    "tolerations": st.just([{"operator": "Exists"}]),
    "nodeSelector": st.just({"gpu": "true"}),
    "volumes": st.just([{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]),
    "hostname": st.just("h"),
})
_condition = st.fixed_dictionaries({"type": st.sampled_from(["PodScheduled", "Ready", "DisruptionTarget"]),
                                    "status": st.sampled_from(["True", "False"])},
                                   optional={"lastTransitionTime": st.just("2026-12-05T10:00:00Z")})
_status = st.fixed_dictionaries({}, optional={
    "phase": st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown", "Odd", 4]),
    "conditions": st.one_of(st.lists(_condition, max_size=3), st.just("none")),
    "podIP": st.just("10.0.0.1"),
    "containerStatuses": st.just([{"name": "main", "ready": True, "restartCount": 0}]),
})
pods = st.fixed_dictionaries({"metadata": _meta, "spec": _spec},
                             optional={"status": _status, "kind": st.just("Pod"), "apiVersion": st.just("v1")})


def parsed(pod: dict[str, Any], pcs: dict[str, int]) -> tuple[Any, Any]:
    """The task a fresh parse cache reads from `pod`, and the reasons it noted."""
    parser = ParseCache(OURS, threading.Lock(), lambda *_: None)
    task = parser.task(pod, pcs)
    return value(task), sorted(map(repr, parser.problems.values()))


PORTS = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
         "spec": {"nodeName": "n1", "containers": [{"name": "a", "ports": [{"containerPort": 80, "hostPort": 80}],
                                                   "resources": {"requests": {"cpu": "1"}}}]}}


@given(pods)
@example(PORTS)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_reader_reads_the_same_from_the_slim_pod(pod: dict[str, Any]) -> None:
    whole = copy.deepcopy(pod)
    slim = Slimmer(OURS).slim(pod)
    assert pod == whole  # the object given is not changed
    scheduler = (pod.get("spec") or {}).get("schedulerName", "default-scheduler")
    if type(scheduler) is not str or scheduler in OURS:
        assert slim is pod  # ours (or unreadable as a name: the parser reports it from the whole object)
        return
    assert len(dumps(slim)) <= len(dumps(whole))
    for pcs in ({}, {"high": 100, "low": -1}):
        assert parsed(slim, pcs) == parsed(whole, pcs)
    key = key_of(whole)
    assert key_of(slim) == key and resource_version(slim) == resource_version(whole)
    readers = (status_of, group_of, plain_group_of, wants_gang, owned_by_controller, _disruption_target,
               _terminating, lambda p: victim_of(key, p), lambda p: noticed_until(key, p),
               lambda p: (p.get("spec") or {}).get("schedulerName", "default-scheduler"),
               lambda p: (p.get("spec") or {}).get("nodeName"))
    for read in readers:
        assert _outcome(read, slim) == _outcome(read, whole)


def _outcome(read: Any, pod: dict[str, Any]) -> Any:
    try:
        return value(read(pod))
    except (F.FieldError, TypeError, ValueError, AttributeError, KeyError) as exc:  # refused both alike
        return type(exc).__name__


def test_pods_of_one_template_share_what_they_repeat() -> None:
    slimmer = Slimmer(OURS)
    made = []
    for i in range(2):
        pod = pod_object(f"run-{i}", namespace="ns", cpu="2", memory="8Gi", scheduler_name="default-scheduler")
        pod["spec"]["containers"][0]["image"] = "registry.invalid/train:latest"
        pod["spec"]["nodeName"] = "n1"
        pod["metadata"]["labels"] = {"app": "bench"}
        pod["status"] = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
        made.append(slimmer.slim(pod))
    a, b = made
    assert a["spec"]["containers"] is b["spec"]["containers"]
    assert a["spec"]["containers"] == [{"resources": {"requests": {"cpu": "2", "memory": "8Gi"}}}]
    assert a["metadata"]["labels"] is b["metadata"]["labels"]
    assert a["spec"]["nodeName"] is b["spec"]["nodeName"]
    assert a["status"] == {"phase": "Running"}  # no condition a reader of such a pod reads


def _random_cluster(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    rnd = random.Random(seed)
    nodes = [node_object(f"n{i}", cpu="16", memory="64Gi") for i in range(6)]
    groups = [{"metadata": {"name": f"g{j}", "namespace": "ns", "resourceVersion": str(j + 1), "uid": f"pg{j}"},
               "spec": {"minMember": rnd.randint(1, 2), "queue": "default"}} for j in range(4)]
    out = []
    for i in range(60):
        foreign = rnd.random() < 0.6
        pod = pod_object(f"p{i}", namespace="ns", cpu=rnd.choice(["1", "500m", "2"]), memory="1Gi",
                         group=rnd.choice([None, "g0", "g1", "g2", "g3"]),
                         scheduler_name="default-scheduler" if foreign else "volcano-py",
                         affinity=ANTI if rnd.random() < 0.2 else None)
        pod["metadata"]["uid"] = f"uid-{i}"
        pod["metadata"]["labels"] = {"app": rnd.choice(["x", "y"])}
        pod["spec"]["containers"][0]["image"] = "registry.invalid/train:latest"
        if foreign or rnd.random() < 0.5:
            pod["spec"]["nodeName"] = rnd.choice(nodes)["metadata"]["name"]
            pod["status"] = {"phase": rnd.choice(["Running", "Running", "Succeeded", "Pending"]),
                             "conditions": [{"type": "PodScheduled", "status": "True"}]}
        out.append(pod)
    return nodes, groups, out


def _cache(nodes: list[dict[str, Any]], groups: list[dict[str, Any]], pods: list[dict[str, Any]],
           slim: bool) -> ClusterCache:
    cache = ClusterCache(None, OURS, "default", clock=lambda: 1_800_000_000.0)
    if not slim:
        cache.watcher.slim = lambda obj: obj
    cache.watcher._on_event(cache.queues, "ADDED", {"metadata": {"name": "default", "resourceVersion": "1"},
                                                     "spec": {"weight": 1}, "status": {"state": "Open"}})
    for node in nodes:
        cache.watcher._on_event(cache.nodes, "ADDED", copy.deepcopy(node))
    for group in groups:
        cache.watcher._on_event(cache.podgroups, "ADDED", copy.deepcopy(group))
    for i, pod in enumerate(pods):
        pod = copy.deepcopy(pod)
        pod["metadata"]["resourceVersion"] = str(100 + i)
        cache.watcher._on_event(cache.pods, "ADDED", pod)
    return cache


def test_a_random_clusters_snapshot_and_cycle_are_the_same_with_slim_stores() -> None:
    for seed in range(20):
        nodes, groups, pods = _random_cluster(seed)
        whole, slim = _cache(nodes, groups, pods, slim=False), _cache(nodes, groups, pods, slim=True)
        assert snapshot_value(slim.snapshot()) == snapshot_value(whole.snapshot()), seed
        binds = [sorted(b for g in run_cycle(c.snapshot(), builtin_default_conf()).binds for b in g.binds)
                 for c in (whole, slim)]
        assert binds[0] == binds[1], seed


def test_every_pod_of_another_scheduler_repels_ours_by_its_anti_affinity() -> None:
    """kube-scheduler keeps a pod off a node where an existing pod's required anti-affinity term matches it, the
    existing pod any scheduler's. Two such pods of one request shape, one per node: ours fits neither. (Ours has
    a term of its own: only such a pod is checked against existing pods' terms, plugins/predicates.py.)"""
    nodes = [node_object(f"n{i}", cpu="16", memory="64Gi") for i in (1, 2)]
    theirs = []
    for i in (1, 2):
        pod = pod_object(f"t{i}", namespace="ns", cpu="1", memory="1Gi", scheduler_name="default-scheduler",
                         affinity=ANTI)
        pod["metadata"]["uid"] = f"uid-t{i}"
        pod["spec"]["nodeName"] = f"n{i}"
        pod["status"] = {"phase": "Running"}
        theirs.append(pod)
    own_term = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "z"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    ours = pod_object("mine", namespace="ns", cpu="1", memory="1Gi", affinity=own_term)
    ours["metadata"].update(uid="uid-mine", labels={"app": "x"})
    free = pod_object("free", namespace="ns", cpu="1", memory="1Gi")
    free["metadata"].update(uid="uid-free", labels={"app": "y"})
    cache = _cache(nodes, [], [*theirs, ours, free], slim=True)
    result = run_cycle(cache.snapshot(), builtin_default_conf())
    bound = {task for g in result.binds for task, _ in g.binds}
    assert bound == {"ns/free"}  # the unrelated pod fits; ours is kept off both nodes


def test_another_schedulers_pod_whose_affinity_cannot_be_read_still_fills_its_node() -> None:
    """Its affinity is dropped with a reason, the pod is not: left out, its node's room would read as free."""
    pod = pod_object("odd", namespace="ns", cpu="3", memory="1Gi", scheduler_name="default-scheduler")
    pod["metadata"]["uid"] = "uid-odd"
    pod["spec"].update(nodeName="n1", affinity={"podAntiAffinity": 3})
    pod["status"] = {"phase": "Running"}
    cache = _cache([node_object("n1", cpu="16", memory="64Gi")], [], [pod], slim=True)
    node = cache.snapshot().nodes["n1"]
    assert "ns/odd" in node.tasks and node.used.cpu == 3000
    assert [r.path for r in cache.parser.problems[("Pod", "ns/odd")]] == ["spec.affinity"]


@given(pods)
@example(PORTS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_pod_of_ours_whose_request_shape_was_read_before_reads_as_a_fresh_parse(pod: dict[str, Any]) -> None:
    """The parse cache computes a request once per shape of resource fields (cache/parse.py): the next pod of
    that shape (a gang's next member) reads as it would alone, problems included."""
    if not isinstance(pod.get("spec"), dict) or not isinstance(pod.get("metadata"), dict):
        return
    pod = {**pod, "spec": {**pod["spec"], "schedulerName": "volcano-py"}}
    twin = {**pod, "metadata": {**pod["metadata"], "name": "twin"}}
    for pcs in ({}, {"high": 100, "low": -1}):
        alone = parsed(pod, pcs)
        parser = ParseCache(OURS, threading.Lock(), lambda *_: None)
        parser.task(twin, pcs)  # the same resource fields, read first
        task = parser.task(pod, pcs)
        key = key_of(pod)
        assert (value(task), sorted(repr(p) for k, p in parser.problems.items() if k == ("Pod", key))) == alone
