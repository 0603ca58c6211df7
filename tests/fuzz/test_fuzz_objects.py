"""Fuzz: Jobs' PodGroups, Queues, Pods (and their annotations) and Nodes, as the scheduler reads them.

Each example puts a few objects with one field gone wrong (any JSON value, as an object that bypassed
validation can carry) next to a healthy gang, then builds a snapshot and runs a full scheduling cycle:

- through the Kubernetes cache (`ClusterCache.snapshot()` over raw objects, as the watches store them): the
  snapshot and the cycle never raise; an object the scheduler cannot read is skipped and named (a Warning
  event on a Pod or PodGroup, a log line for a Node or Queue); the healthy gang is still bound;
- through the simulator (`InMemoryCluster`): an unreadable object is refused by `add_*` with a ValueError (the
  simulator's door), never another exception; the cycle then runs as above.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, strategies as st
from strategies import FUZZ, json_values, quantity_text, set_path

from scheduler.api.pod import GROUP_NAME_ANNOTATION, PREEMPTABLE_KEY, TASK_SPEC_KEY
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cycle import builtin_default_conf, run_cycle
from scheduler.gpu.devices import GPU_INDEX, GPU_SPEC_ANNOTATION
from scheduler.plugins.gang import FALLBACK_ANNOTATION
from scheduler.sim.cluster import InMemoryCluster
from scheduler.sim.objects import node_object, pod_object

CONF = builtin_default_conf()
GOOD_NODES = ("good-0", "good-1")
TAINT = {"key": "volcano-py.test/pool", "value": "good", "effect": "NoSchedule"}
ANNOTATIONS = [GROUP_NAME_ANNOTATION, TASK_SPEC_KEY, PREEMPTABLE_KEY, GPU_INDEX, GPU_SPEC_ANNOTATION,
               FALLBACK_ANNOTATION, "scheduling.volcano.sh/group-min-member", "scheduling.volcano.sh/queue-name"]

POD_PATHS = [
    ("spec", "containers", 0, "resources", "requests", "nvidia.com/gpu"),
    ("spec", "containers", 0, "resources", "requests"), ("spec", "containers", 0, "resources", "limits"),
    ("spec", "containers", 0, "resources"), ("spec", "containers", 0), ("spec", "containers"),
    ("spec", "initContainers"), ("spec", "overhead"), ("spec", "resources"),
    ("spec", "nodeSelector"), ("spec", "affinity"), ("spec", "affinity", "nodeAffinity"),
    ("spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"),
    ("spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"),
    ("spec", "tolerations"), ("spec", "priority"), ("spec", "priorityClassName"), ("spec", "nodeName"),
    ("spec", "topologySpreadConstraints"), ("spec", "affinity", "podAntiAffinity"), ("spec",),
    ("status", "phase"), ("status",), ("status", "conditions"), ("metadata", "deletionTimestamp"),
    ("metadata", "creationTimestamp"), ("metadata", "ownerReferences"), ("metadata", "labels"),
    ("metadata", "annotations"), ("metadata", "resourceVersion"),
    *(("metadata", "annotations", a) for a in ANNOTATIONS),
]
PODGROUP_PATHS = [
    ("spec", "minMember"), ("spec", "minAvailable"), ("spec", "minResources"), ("spec", "minResources", "cpu"),
    ("spec", "minTaskMember"), ("spec", "queue"), ("spec", "priorityClassName"), ("spec", "networkTopology"),
    ("spec", "scheduleTimeoutSeconds"), ("spec",), ("status", "phase"), ("status", "conditions"),
    ("status", "minMemberOverride"), ("status", "running"), ("status", "succeeded"), ("status",),
    ("metadata", "annotations"), ("metadata", "creationTimestamp"),
    *(("metadata", "annotations", a) for a in ANNOTATIONS),
]
QUEUE_PATHS = [
    ("spec", "weight"), ("spec", "capability"), ("spec", "capability", "nvidia.com/gpu"), ("spec", "guarantee"),
    ("spec", "guarantee", "resource"), ("spec", "deserved"), ("spec", "state"), ("status", "state"),
    ("spec", "reclaimable"), ("spec", "priority"), ("spec", "parent"), ("spec",), ("status",),
    ("status", "allocated"),
]
NODE_PATHS = [
    ("status", "allocatable"), ("status", "allocatable", "nvidia.com/gpu"), ("status", "capacity"),
    ("status", "conditions"), ("status",), ("spec", "taints"), ("spec", "unschedulable"), ("spec",),
    ("metadata", "labels"),
]

string_maps = st.dictionaries(st.sampled_from([*ANNOTATIONS, "a", "pool"]), st.text(max_size=8), max_size=3)
values = st.one_of(json_values, quantity_text, string_maps)


@st.composite
def mutations(draw: Any) -> tuple[str, tuple[Any, ...], Any]:
    kind = draw(st.sampled_from(["Pod", "Pod", "PodGroup", "Queue", "Node"]))
    paths = {"Pod": POD_PATHS, "PodGroup": PODGROUP_PATHS, "Queue": QUEUE_PATHS, "Node": NODE_PATHS}[kind]
    return kind, draw(st.sampled_from(paths)), draw(values)


def good_objects() -> dict[str, list[dict[str, Any]]]:
    nodes = [node_object(n, gpu=4, labels={"pool": "good"}, taints=[TAINT]) for n in GOOD_NODES]
    pods = [pod_object(f"good-{i}", namespace="ok", group="good", gpu=2, node_selector={"pool": "good"},
                       tolerations=[{"key": TAINT["key"], "operator": "Exists"}]) for i in range(4)]
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": "good", "namespace": "ok"}, "spec": {"minMember": 4, "queue": "default"},
          "status": {"phase": "Inqueue"}}
    queue = {"metadata": {"name": "default"}, "spec": {"weight": 1, "reclaimable": True}}
    return {"Node": nodes, "Pod": pods, "PodGroup": [pg], "Queue": [queue]}


def bad_object(i: int, kind: str, path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    name = f"bad-{i}"
    base: dict[str, Any]
    if kind == "Pod":
        base = pod_object(name, namespace="bad", group=f"bad-{i}", cpu="1")
        base["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u",
                                                "controller": True}]
    elif kind == "PodGroup":
        base = {"metadata": {"name": name, "namespace": "bad"},
                "spec": {"minMember": 1, "queue": "default", "minResources": {"cpu": "1"}},
                "status": {"phase": "Inqueue"}}
    elif kind == "Queue":
        base = {"metadata": {"name": name}, "spec": {"weight": 2, "capability": {"nvidia.com/gpu": "4"}}}
    else:
        base = node_object(name, gpu=2)
    return set_path(base, path, value)


def good_gang_bound_or_displaced(snapshot: Any, result: Any) -> None:
    """The healthy gang is bound whole, unless fuzzed objects legitimately claim what it needs.

    The bad pods start with no GPU and 1 cpu; the healthy gang needs 8 of the 8 GPUs. A mutation that makes a
    bad pod ask for GPUs (or most of the cpu/memory) competes for them as any pod does (the proportion plugin
    counts it in its queue even when it is bound to a node that does not exist, as Volcano does): then the gang
    may wait, but never bind in part.
    """
    binds = {task: node for gang in result.binds for task, node in gang.binds}
    good = {f"ok/good-{i}" for i in range(4)}
    if good <= binds.keys():
        assert {binds[t] for t in good} <= set(GOOD_NODES)
        return
    assert not good & binds.keys(), f"the healthy gang was bound in part: {binds}"
    others = [t for job in snapshot.jobs.values() for t in job.tasks.values() if t.key not in good]
    others += [t for node in snapshot.nodes.values() for t in node.tasks.values() if t.key not in good]
    competing = any(t.resreq.gpu > 0 or t.resreq.cpu > 32_000 or t.resreq.memory > 2**38 for t in others)
    assert competing, f"the healthy gang was not bound next to unreadable objects; binds: {binds}"


def cache_with(objects: dict[str, list[dict[str, Any]]]) -> ClusterCache:
    cache = ClusterCache(None, {"volcano-py"}, "default", clock=lambda: 1_000_000.0)
    store = {"Pod": cache.pods, "Node": cache.nodes, "PodGroup": cache.podgroups, "Queue": cache.queues}
    rv = itertools.count(1)
    from scheduler.api.convert import key_of

    for kind, objs in objects.items():
        for obj in objs:
            meta = obj.setdefault("metadata", {})
            if not isinstance(meta.get("resourceVersion"), str):
                meta["resourceVersion"] = str(next(rv))
            store[kind].objects[key_of(obj)] = obj
    return cache


@FUZZ
@given(st.lists(mutations(), min_size=1, max_size=4))
def test_the_cache_skips_unreadable_objects_and_schedules_the_rest(changes):
    objects = good_objects()
    for i, (kind, path, value) in enumerate(changes):
        objects[kind].append(bad_object(i, kind, path, value))
    cache = cache_with(objects)
    snapshot = cache.snapshot()
    assert "ok/good" in snapshot.jobs and len(snapshot.jobs["ok/good"].tasks) == 4
    result = run_cycle(snapshot, CONF)
    good_gang_bound_or_displaced(snapshot, result)
    # Every object skipped as unreadable is named: an event queued for a Pod/PodGroup.
    queued = [cache.events.queue.get_nowait()[1] for _ in range(cache.events.queue.qsize())]  # type: ignore[index]
    named = {(e["involvedObject"]["kind"], e["involvedObject"]["namespace"], e["involvedObject"]["name"])
             for e in queued if e["reason"] == "FailedToRead"}
    for kind, key, _ in cache.parser.bad:
        if kind in ("Pod", "PodGroup"):
            assert (kind, *key.split("/", 1)) in named, (kind, key, named)


@FUZZ
@given(st.lists(mutations(), min_size=1, max_size=4))
def test_the_simulator_refuses_unreadable_objects_with_value_error_and_schedules_the_rest(changes):
    sim = InMemoryCluster()
    objects = good_objects()
    for i, (kind, path, value) in enumerate(changes):
        objects[kind].append(bad_object(i, kind, path, value))
    adders = {"Node": sim.add_node, "Queue": sim.add_queue, "PodGroup": sim.add_podgroup, "Pod": sim.add_pod}
    for kind in ("Node", "Queue", "PodGroup", "Pod"):
        for obj in objects[kind]:
            try:
                adders[kind](obj)
            except ValueError:
                assert "bad-" in str(obj.get("metadata", {}).get("name"))
    snapshot = sim.snapshot()
    result = run_cycle(snapshot, CONF)
    good_gang_bound_or_displaced(snapshot, result)


@FUZZ
@given(st.dictionaries(st.sampled_from([*ANNOTATIONS, "volcano.sh/task-index", "a/b"]),
                       st.one_of(st.text(max_size=20), quantity_text,
                                 st.sampled_from(["", "0", "-1", "true", "false", "2", "1e9", "0,1", "x"])),
                       max_size=6))
def test_pod_annotations_as_users_write_them_never_fail_a_cycle(annotations):
    """Annotations are strings (the apiserver guarantees that much); any text in the keys the scheduler reads
    (group name, task spec, preemptable, GPU index/spec, fallback minimum) leaves the cycle running."""
    objects = good_objects()
    for i in range(2):
        pod = pod_object(f"annotated-{i}", namespace="bad", gpu=1, cpu="1")
        pod["metadata"]["annotations"] = dict(annotations)
        objects["Pod"].append(pod)
    pg = bad_object(0, "PodGroup", ("metadata", "annotations"), dict(annotations))
    pg["metadata"]["name"] = str(annotations.get(GROUP_NAME_ANNOTATION, "bad-0"))
    objects["PodGroup"].append(pg)
    cache = cache_with(objects)
    snapshot = cache.snapshot()
    result = run_cycle(snapshot, CONF)
    good_gang_bound_or_displaced(snapshot, result)


def test_a_node_with_10_peta_gpus_is_skipped_not_an_int64_overflow_in_every_cycle():
    """Found by the fuzzer: allocatable `nvidia.com/gpu: 10P` is 10^19 milli-units; the cycle's int64 node
    arrays raised OverflowError in every cycle, so nothing anywhere was scheduled."""
    objects = good_objects()
    objects["Node"].append(bad_object(0, "Node", ("status", "allocatable", "nvidia.com/gpu"), "10P"))
    cache = cache_with(objects)
    snapshot = cache.snapshot()
    assert "bad-0" not in snapshot.nodes
    result = run_cycle(snapshot, CONF)
    assert {t for g in result.binds for t, _ in g.binds} == {f"ok/good-{i}" for i in range(4)}


def test_the_simulator_refuses_an_infinite_min_member_with_value_error():
    """Found by make fuzz: YAML `minMember: .inf` raised OverflowError out of add_podgroup."""
    sim = InMemoryCluster()
    try:
        sim.add_podgroup(bad_object(0, "PodGroup", ("spec", "minMember"), float("inf")))
    except ValueError as exc:
        assert "bad-0" in str(exc)
    else:
        raise AssertionError("accepted minMember: .inf")
