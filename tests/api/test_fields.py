"""The field table (scheduler/api/fields.py): every field a reader touches is listed; volcano.sh/preemptable is Go's
strconv.ParseBool, an unparsable value leaving the pod protected; the gang timeout outage of issue 31 is gone."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from scheduler.adapter.partial import bound_since, owned_by_controller
from scheduler.adapter.snapshot import AdapterRules, SnapshotInputs, build_snapshot
from scheduler.api import fields as F
from scheduler.api.convert import (
    hypernode_from_object,
    job_from_podgroup,
    node_from_object,
    plain_group_of,
    queue_from_object,
    task_from_pod,
    wants_gang,
)
from scheduler.api.disruption import budget_from_object
from scheduler.api.pod import PREEMPTABLE_KEY
from scheduler.api.quota import quota_from_object
from scheduler.cache.parse import ParseCache
from scheduler.cycle import builtin_default_conf, run_cycle
from scheduler.sim.objects import node_object, pod_object

# ---- every field a reader touches is in the table -----------------------------------------------------------

Path = tuple[str, ...]


class Recorder:
    def __init__(self) -> None:
        self.paths: set[Path] = set()

    def wrap(self, value: Any, path: Path) -> Any:
        if isinstance(value, dict):
            return RecDict(self, path, value)
        if isinstance(value, list):
            return RecList(self, path, value)
        return value


class RecDict(dict):  # type: ignore[type-arg]
    """A dict that records the path of every key read from it (get, [], in, items, values)."""

    def __init__(self, rec: Recorder, path: Path, data: dict[str, Any]) -> None:
        super().__init__(data)
        self._rec, self._path = rec, path

    def _seen(self, key: object) -> Path:
        path = (*self._path, str(key))
        self._rec.paths.add(path)
        return path

    def get(self, key: Any, default: Any = None) -> Any:
        path = self._seen(key)
        return self._rec.wrap(super().get(key, default), path)

    def __getitem__(self, key: Any) -> Any:
        path = self._seen(key)
        return self._rec.wrap(super().__getitem__(key), path)

    def __contains__(self, key: object) -> bool:
        self._seen(key)
        return super().__contains__(key)

    def items(self) -> Iterator[tuple[Any, Any]]:  # type: ignore[override]
        for k, v in super().items():
            yield k, self._rec.wrap(v, self._seen(k) if False else (*self._path, "*"))
        self._rec.paths.add((*self._path, "*"))

    def values(self) -> Iterator[Any]:  # type: ignore[override]
        self._rec.paths.add((*self._path, "*"))
        for v in super().values():
            yield self._rec.wrap(v, (*self._path, "*"))


class RecList(list):  # type: ignore[type-arg]
    def __init__(self, rec: Recorder, path: Path, data: list[Any]) -> None:
        super().__init__(data)
        self._rec, self._path = rec, path

    def __iter__(self) -> Iterator[Any]:
        for v in super().__iter__():
            yield self._rec.wrap(v, (*self._path, "*"))

    def __getitem__(self, index: Any) -> Any:
        return self._rec.wrap(super().__getitem__(index), (*self._path, "*"))


def _matches(entry: Path, path: Path) -> bool:
    """`entry` is `path` or leads to it (`*` stands for any key or list item, on either side)."""
    return len(entry) <= len(path) and all(e == "*" or p == "*" or e == p for e, p in zip(entry, path, strict=False))


def uncovered(kind: str, paths: set[Path]) -> set[str]:
    """Paths read that no entry of `kind` covers: an entry covers its own path, the objects on the way to it
    (`metadata`, `spec.guarantee`) and, unless it is a map of strings whose keys are fields of their own (labels,
    annotations), everything its parser reads below it."""
    entries = F.fields_of(kind)
    out = set()
    for path in paths:
        ok = any(len(path) < len(e.path) and _matches(path, e.path) for e in entries)
        for e in entries:
            exact = e.path == path or (_matches(e.path, path) and len(e.path) == len(path))
            ok = ok or exact or (_matches(e.path, path)
                                 and (e.parser.kind != "strings" or path[len(e.path)] == "*"))
        if not ok:
            out.add(F.dotted(path))
    return out


GPU_INDEX, GPU_SPEC = F.GPU_INDEX, F.GPU_SPEC


def full_pod(name: str = "p", *, scheduler: str = "volcano-py", group: str | None = "g") -> dict[str, Any]:
    pod = pod_object(name, namespace="ns", group=group, gpu=1, cpu="1", node_selector={"pool": "a"},
                     tolerations=[{"key": "k", "operator": "Exists"}])
    meta = pod["metadata"]
    meta.update(uid="u-1", resourceVersion="7", creationTimestamp="2026-01-01T00:00:00Z",
                ownerReferences=[{"uid": "o-1", "controller": True}], labels={"app": "x", F.TASK_SPEC: "w"})
    meta.setdefault("annotations", {}).update({
        F.TASK_SPEC: "w", F.TASK_INDEX: "3", PREEMPTABLE_KEY: "false", F.MIN_MEMBER: "2",
        GPU_INDEX: "0", GPU_SPEC: "A100", F.COOLDOWN: "2m",
    })
    spec = pod["spec"]
    spec["schedulerName"] = scheduler
    spec.update(priority=5, priorityClassName="high", preemptionPolicy="Never", schedulingGates=[{"name": "g1"}],
                volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}, {"name": "e", "ephemeral": {}}],
                initContainers=[{"name": "i", "resources": {"requests": {"cpu": "1"}}, "restartPolicy": "Always"}],
                overhead={"cpu": "10m"}, resources={"requests": {"cpu": "2"}},
                topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                            "labelSelector": {"matchLabels": {"app": "x"}}}],
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]},
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 5, "preference": {"matchExpressions": [{"key": "z", "operator": "Exists"}]}}]},
                    "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone",
                         "namespaces": ["ns"]}]},
                    "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 3, "podAffinityTerm": {"labelSelector": {}, "topologyKey": "host"}}]},
                })
    spec["containers"][0]["ports"] = [{"hostPort": 8080, "protocol": "TCP", "hostIP": "0.0.0.0"}]
    spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    pod["status"] = {"phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}],
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x7"}]}
    return pod


def full_podgroup() -> dict[str, Any]:
    return {
        "metadata": {"name": "g", "namespace": "ns", "resourceVersion": "3", "labels": {"a": "b"},
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "annotations": {F.FALLBACK_MIN: "1", F.SLA_WAITING: "1h"}},
        "spec": {"minMember": 2, "minResources": {"cpu": "2", "count/pods": "2"}, "minTaskMember": {"w": 2},
                 "queue": "q", "priorityClassName": "high", "scheduleTimeoutSeconds": 60,
                 "networkTopology": {"mode": "hard", "highestTierAllowed": 2}},
        "status": {"phase": "Inqueue", "minMemberOverride": 1, "running": 1, "succeeded": 0, "failed": 0,
                   "conditions": [{"type": "Scheduled", "status": "True", "reason": "r", "message": "m"}]},
    }


def full_queue() -> dict[str, Any]:
    return {
        "metadata": {"name": "q", "resourceVersion": "1", "labels": {}, "creationTimestamp": "2026-01-01T00:00:00Z",
                     "annotations": {"volcano-py.io/eviction-notice": "2m"}},
        "spec": {"weight": 2, "capability": {"cpu": "8", "nvidia.com/gpu": "0"},
                 "guarantee": {"resource": {"cpu": "1"}}, "deserved": {"cpu": "4"}, "state": "Open",
                 "reclaimable": True, "priority": 1, "parent": "root"},
        "status": {"state": "Open"},
    }


def full_node() -> dict[str, Any]:
    node = node_object("n", gpu=2, labels={"pool": "a"}, taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])
    node["metadata"].update(resourceVersion="1", creationTimestamp="2026-01-01T00:00:00Z")
    node["spec"]["unschedulable"] = False
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return node


def full_hypernode() -> dict[str, Any]:
    return {"metadata": {"name": "h", "resourceVersion": "1"},
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n"}}},
                                            {"type": "Node", "selector": {"regexMatch": {"pattern": "^n"}}}]}}


def full_pdb() -> dict[str, Any]:
    return {"metadata": {"name": "db", "namespace": "ns", "resourceVersion": "1"},
            "spec": {"selector": {"matchLabels": {"app": "db"},
                                  "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}},
            "status": {"disruptionsAllowed": 1, "disruptedPods": {"db-0": "2026-01-01T00:00:00Z"}}}


def record(obj: dict[str, Any], read: Any) -> set[Path]:
    rec = Recorder()
    with contextlib.suppress(F.FieldError):  # a broken sample, left out: what was read until then still counts
        read(rec.wrap(obj, ()))
    return rec.paths


def _cache() -> ParseCache:
    return ParseCache(frozenset({"volcano-py"}), threading.Lock(), lambda *a: None)


def _snapshot_reads(pod: dict[str, Any]) -> None:
    cache = _cache()
    task = cache.task(pod, {})
    if task is None:  # the broken sample
        return
    build_snapshot(SnapshotInputs([], [], [], [(pod, task)], 0.0, assumed={task.key: "n"}),
                   AdapterRules(frozenset({"volcano-py"})))


READERS = {
    "Pod": [
        lambda o: task_from_pod(o, priority_classes={"high": 10}),
        lambda o: _cache().task(o, {"high": 10}),
        _snapshot_reads,
        plain_group_of, wants_gang, bound_since, owned_by_controller,
    ],
    "PodGroup": [lambda o: job_from_podgroup(o, priority_classes={"high": 10}),
                 lambda o: _cache().podgroups([o], {"high": 10}, "default")],
    "Queue": [queue_from_object, lambda o: _cache().queues([o])],
    "Node": [node_from_object, lambda o: _cache().nodes([o])],
    "HyperNode": [hypernode_from_object, lambda o: _cache().hypernodes([o])],
    "PriorityClass": [lambda o: _cache().priority_classes_changed([o])],
    "PodDisruptionBudget": [budget_from_object, lambda o: _cache().disruption_budgets([o])],
    "ResourceQuota": [quota_from_object, lambda o: _cache().resource_quotas([o])],
}
def _samples(kind: str) -> list[dict[str, Any]]:
    """Objects of `kind` that, between them, set every field a reader of `kind` may read."""
    if kind == "Pod":
        return _pods()
    if kind == "PodGroup":
        seed = full_podgroup()  # seed 000's spelling: minAvailable, no minMember
        seed["spec"]["minAvailable"] = seed["spec"].pop("minMember")
        return [full_podgroup(), seed]
    if kind == "PriorityClass":
        return [{"metadata": {"name": "high"}, "value": 10}]
    if kind == "PodDisruptionBudget":
        return [full_pdb()]
    if kind == "ResourceQuota":
        return [{"metadata": {"name": "compute", "namespace": "ml", "resourceVersion": "3"},
                 "spec": {"hard": {"requests.cpu": "4", "count/pods": "10"}},
                 "status": {"hard": {"requests.cpu": "4", "count/pods": "10"},
                            "used": {"requests.cpu": "1500m", "count/pods": "2"}}}]
    if kind == "Queue":
        stateless = full_queue()  # no status: the spec's state is read
        del stateless["status"]
        return [full_queue(), stateless]
    if kind == "Node":
        new = full_node()  # no allocatable yet: its capacity is read
        new["status"]["capacity"] = new["status"].pop("allocatable")
        return [full_node(), new]
    return [full_hypernode()]



def _pods() -> list[dict[str, Any]]:
    foreign = full_pod("f", scheduler="default-scheduler")
    plain = full_pod("plain", group=None)
    plain["metadata"]["annotations"].pop("scheduling.k8s.io/group-name", None)
    label_only = full_pod("l")
    label_only["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "g"}
    label_only["metadata"]["labels"].update({PREEMPTABLE_KEY: "true", F.TASK_INDEX: "1", F.COOLDOWN: "1m"})
    orphan = full_pod("o", group=None)  # no owner and no priority: its uid names its PodGroup, its class its priority
    del orphan["metadata"]["ownerReferences"], orphan["spec"]["priority"]
    orphan["metadata"]["annotations"].pop("scheduling.k8s.io/group-name", None)
    return [full_pod(), foreign, plain, label_only, orphan]


def _broken(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` made unreadable, so that the reader takes its error path (which names the object's version)."""
    return {**obj, "spec": "x", "status": "x", "value": "x"}


@pytest.mark.parametrize("kind", sorted(READERS))
def test_every_field_a_reader_touches_is_in_the_table(kind: str) -> None:
    """The readers run on objects that set every field they know, each object recording the keys read from it;
    a key no table entry covers fails (a reader that starts reading a new field must list it in the table)."""
    objects = _samples(kind)
    seen: set[Path] = set()
    for obj in [*objects, _broken(objects[0])]:
        for read in READERS[kind]:
            seen |= record(obj, read)
    assert seen, "the recorder saw no read"
    assert uncovered(kind, seen) == set()


def test_the_recorder_catches_a_field_missing_from_the_table() -> None:
    """The check above would fail for a reader of a field the table does not list (here, an annotation key)."""
    def sneaky(pod: Any) -> Any:
        return pod.get("metadata").get("annotations").get("example.com/not-in-the-table")

    assert uncovered("Pod", record(full_pod(), sneaky)) == {"metadata.annotations[example.com/not-in-the-table]"}
    assert uncovered("Pod", record(full_pod(), lambda p: p.get("spec").get("hostNetwork"))) == {"spec.hostNetwork"}


def test_every_table_entry_is_read_by_some_reader() -> None:
    """No dead rows: each entry of the table names a path some reader reads (or a map some reader reads whole)."""
    seen: dict[str, set[Path]] = {}
    for kind, readers in READERS.items():
        objects = _samples(kind)
        seen[kind] = {p for obj in [*objects, _broken(objects[0])] for read in readers for p in record(obj, read)}
    unread = [f"{f.kind} {f.name}" for f in F.FIELDS if f.kind in seen
              and not any(_matches(f.path, p) for p in seen[f.kind])]
    assert unread == [], unread


def test_a_reader_asking_for_a_field_not_in_the_table_fails() -> None:
    with pytest.raises(KeyError):
        F.field("Pod", "spec.hostNetwork")


# ---- volcano.sh/preemptable as Go's strconv.ParseBool -------------------------------------------------------

TRUE = ["1", "t", "T", "TRUE", "true", "True"]
FALSE = ["0", "f", "F", "FALSE", "false", "False"]
REFUSED = ["", "yes", "no", "tRUE", " true", "2", "١", "on", "\u0000"]


def _pod_with(annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    pod = pod_object("p", namespace="ns", cpu="1")
    pod["metadata"]["annotations"] = annotations or {}
    pod["metadata"]["labels"] = labels or {}
    return pod


@pytest.mark.parametrize("where", ["annotation", "label"])
@pytest.mark.parametrize("value", TRUE + FALSE + REFUSED)
def test_preemptable_is_read_as_parse_bool(where: str, value: str) -> None:
    pod = _pod_with({PREEMPTABLE_KEY: value}) if where == "annotation" else _pod_with(labels={PREEMPTABLE_KEY: value})
    sink: list[F.FieldInvalid] = []
    task = task_from_pod(pod, sink=sink)
    assert task.preemptable is (value in TRUE)
    if value in REFUSED:  # protected, with a reason naming the field
        assert [r.path for r in sink] == [f"metadata.{where}s[{PREEMPTABLE_KEY}]"]
        assert sink[0].fallback.startswith("not preemptable")
    else:
        assert sink == []


def test_a_pod_without_the_key_is_preemptable() -> None:
    assert task_from_pod(_pod_with()).preemptable is True


def test_an_empty_annotation_wins_over_the_label_as_in_volcano() -> None:
    """GetPodPreemptable reads the annotation when it is present at all: "" fails ParseBool, so the pod is
    protected although its label says true."""
    assert task_from_pod(_pod_with({PREEMPTABLE_KEY: ""}, {PREEMPTABLE_KEY: "true"})).preemptable is False
    assert task_from_pod(_pod_with({"other": "x"}, {PREEMPTABLE_KEY: "true"})).preemptable is True


@pytest.mark.parametrize("value", [True, 1, None, ["true"]])
def test_parse_bool_takes_text_only(value: object) -> None:
    if value is None:
        return  # an absent value is the reader's (Field.absent), never the parser's
    with pytest.raises(F.BadValueError):
        F.parse_bool(value)


# ---- the outage of issue 31 ---------------------------------------------------------------------------------

CONF = builtin_default_conf()


def _cluster(bad_pg: dict[str, Any]) -> tuple[ParseCache, Any]:
    cache = _cache()
    nodes = cache.nodes([dict(node_object(f"n{i}", gpu=4), metadata={"name": f"n{i}", "resourceVersion": "1"})
                         for i in range(2)])
    good = {"metadata": {"name": "good", "namespace": "ok"}, "spec": {"minMember": 2, "queue": "default"},
            "status": {"phase": "Inqueue"}}
    jobs = cache.podgroups([good, bad_pg], {}, "default")
    pods = [pod_object(f"good-{i}", namespace="ok", group="good", gpu=2) for i in range(2)]
    pods += [pod_object(f"bad-{i}", namespace="bad", group="bad", gpu=2) for i in range(2)]
    for i, pod in enumerate(pods):
        pod["metadata"].update(resourceVersion=str(i + 1), creationTimestamp="2026-01-01T00:00:00Z")
    queues, _ = cache.queues([{"metadata": {"name": "default"}, "spec": {"weight": 1}}])
    snapshot = build_snapshot(
        SnapshotInputs(nodes, jobs, queues, list(cache.pods(pods, {})), now=1_800_000_000.0),
        AdapterRules(frozenset({"volcano-py"})))
    return cache, snapshot


def test_a_fallback_of_1e999_no_longer_stops_every_cycle() -> None:
    """Issue 31: `volcano-py.io/fallback-min-available: "1e999"` with `scheduleTimeoutSeconds: 1` raised
    OverflowError in gang.py in every cycle. Now the annotation is refused when the PodGroup is read: the gang
    times out without a smaller minimum, the PodGroup carries the reason, and the healthy gang is placed."""
    bad = {"metadata": {"name": "bad", "namespace": "bad", "creationTimestamp": "2026-01-01T00:00:00Z",
                        "annotations": {F.FALLBACK_MIN: "1e999"}},
           "spec": {"minMember": 2, "queue": "default", "scheduleTimeoutSeconds": 1}, "status": {"phase": "Inqueue"}}
    cache, snapshot = _cluster(bad)
    assert snapshot.jobs["bad/bad"].fallback_min is None and snapshot.jobs["bad/bad"].schedule_timeout == 1.0
    (reason,) = cache.problems[("PodGroup", "bad/bad")]
    assert (reason.path, reason.fallback) == (f"metadata.annotations[{F.FALLBACK_MIN}]", "no smaller minimum")
    result = run_cycle(snapshot, CONF)
    placed = {task for gang in result.binds for task, _ in gang.binds}
    assert {"ok/good-0", "ok/good-1"} <= placed


@pytest.mark.parametrize("timeout", [float("inf"), float("nan"), 1e999, -1, 2**63, "1", [1]])
def test_an_unreadable_schedule_timeout_means_no_timeout_and_a_reason(timeout: object) -> None:
    bad = {"metadata": {"name": "bad", "namespace": "bad", "annotations": {F.FALLBACK_MIN: "1"}},
           "spec": {"minMember": 2, "queue": "default", "scheduleTimeoutSeconds": timeout},
           "status": {"phase": "Inqueue"}}
    cache, snapshot = _cluster(bad)
    assert snapshot.jobs["bad/bad"].schedule_timeout is None
    assert [r.path for r in cache.problems[("PodGroup", "bad/bad")]] == ["spec.scheduleTimeoutSeconds"]
    result = run_cycle(snapshot, CONF)
    assert {"ok/good-0", "ok/good-1"} <= {task for gang in result.binds for task, _ in gang.binds}


def test_a_bad_field_is_logged_once_per_object_not_per_cycle(caplog: pytest.LogCaptureFixture) -> None:
    cache = _cache()
    pg = {"metadata": {"name": "bad", "namespace": "bad", "resourceVersion": "1",
                       "annotations": {F.SLA_WAITING: "forever"}}, "spec": {"minMember": 1, "queue": "q"}}
    for version in range(5):  # as a PodGroup's status is written every few cycles: new versions, same problem
        pg["metadata"]["resourceVersion"] = str(version + 1)
        (job,) = cache.podgroups([pg], {}, "default")
        assert job.sla_waiting is None
    assert len([r for r in caplog.records if "bad/bad" in r.getMessage()]) == 1
    pg["metadata"]["annotations"][F.SLA_WAITING] = "never"  # another problem: said again
    cache.podgroups([pg], {}, "default")
    assert len([r for r in caplog.records if "bad/bad" in r.getMessage()]) == 2


def test_a_schedule_timeout_of_0_means_none_without_a_reason() -> None:
    bad = {"metadata": {"name": "bad", "namespace": "bad"},
           "spec": {"minMember": 2, "queue": "default", "scheduleTimeoutSeconds": 0}, "status": {"phase": "Inqueue"}}
    cache, snapshot = _cluster(bad)
    assert snapshot.jobs["bad/bad"].schedule_timeout is None
    assert ("PodGroup", "bad/bad") not in cache.problems


def test_the_system_priority_classes_are_read() -> None:
    """system-node-critical is 2,000,001,000, above the 1e9 users may define: an int32, read as it is (the chaos
    suite's scheduler logged both system classes as out of range and left them out)."""
    cache = _cache()
    cache.priority_classes_changed([{"metadata": {"name": "system-node-critical"}, "value": 2_000_001_000},
                                    {"metadata": {"name": "system-cluster-critical"}, "value": 2_000_000_000}])
    assert cache.pcs == {"system-node-critical": 2_000_001_000, "system-cluster-critical": 2_000_000_000}
    assert not cache.problems
