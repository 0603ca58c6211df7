"""With --active-shards, a pod of ours whose job another replica schedules is read light (cache/parse.py): on random
pods the light read gives node accounting exactly what the full read gives, and through the cache a job whose
pods were read light joins a session only with every pod read in full: in the very session its shard is taken,
or (a route changed by its PodGroup) from the next one, never with a light pod."""

from __future__ import annotations

import copy
import threading
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st
from test_active_shards_cache import CONFIG, Clock, Server
from test_slim_foreign import pods

from scheduler.api import fields as F
from scheduler.api.active_shards import SHARD_ANNOTATION
from scheduler.api.job import TaskInfo
from scheduler.cache.active import ActiveShards
from scheduler.cache.cluster_cache import ClusterCache
from scheduler.cache.parse import ParseCache
from scheduler.sim.objects import node_object, pod_object
from tests.adapter.snapshot_values import value

OURS = frozenset({"volcano-py"})
# What node accounting, the queues' allocated, the shard plan's loans and a gang's bind-fence pin read of a task of
# a job this replica does not schedule; the rest (placement constraints, index, gates, claims, cooldown) only a
# session of its job reads.
ACCOUNTED = ("key", "name", "namespace", "job", "resreq", "role", "status", "node_name", "priority", "preemptable",
             "creation", "labels", "annotations")
AFFINITY = ("host_ports", "pod_affinity", "pod_anti_affinity", "preferred_pod_affinity",
            "preferred_pod_anti_affinity")


def accounted(task: TaskInfo | None) -> Any:
    if task is None:
        return None
    v = value(task)
    return {**{k: v[k] for k in ACCOUNTED}, **{k: v["constraints"][k] for k in AFFINITY}}


def read(pod: dict[str, Any], light: frozenset[str]) -> tuple[TaskInfo | None, bool]:
    parser = ParseCache(OURS, threading.Lock(), lambda *_: None)
    parser.light_of = light.__contains__
    parser.preparse(copy.deepcopy(pod))
    task = parser.task(pod, {})
    return task, parser.is_light(str(task.key) if task is not None else "")


@given(pods, st.sampled_from(["g1", "worker"]))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_light_read_accounts_a_pod_as_the_full_read_does(pod: dict[str, Any], group: str) -> None:
    pod = copy.deepcopy(pod)
    pod["spec"]["schedulerName"] = "volcano-py"
    meta = pod["metadata"]
    meta["annotations"] = {**(meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}),
                           F.GROUP_NAME: group}
    job = f"{meta['namespace']}/{group}"
    full, full_light = read(pod, frozenset())
    light, was_light = read(pod, frozenset({job}))
    assert not full_light
    if full is None:  # refused in full (a field only a session reads): a light read may still account it
        return
    assert light is not None and was_light
    assert accounted(light) == accounted(full)
    assert full.job == job


class Replica:
    """One of two active replicas' caches, holding the shards `held` says (its Leases stand in)."""

    def __init__(self) -> None:
        self.cache = ClusterCache(None)
        self.active = ActiveShards(Server(), self.cache.stores, CONFIG, "a", "volcano-py", 2,  # type: ignore[arg-type]
                                   monotonic=Clock())
        self.held = {0}
        self.active.held = lambda: frozenset(self.held)  # type: ignore[method-assign]
        self.active.plan.step = lambda *_: None  # type: ignore[method-assign]  # the NodeShards as written here
        self.cache.active = self.active
        for i in range(2):
            name = f"volcano-py-shard-{i}"
            self.active.watched.objects[name] = {
                "metadata": {"name": name, "resourceVersion": str(i + 1)},
                "spec": {"nodesDesired": [f"n{i}"]}, "status": {"nodesInUse": [f"n{i}"]}}
            node = node_object(f"n{i}", cpu="16", memory="64Gi")
            node["metadata"].update(uid=f"node-{i}", resourceVersion=str(i + 1))
            self.cache.nodes.objects[f"n{i}"] = node
        self.active.watched.synced.set()
        self.rv = 100

    def podgroup(self, name: str, shard: int) -> None:
        self.rv += 1
        self.cache.podgroups.objects[f"ns/{name}"] = {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns", "uid": f"pg-{name}", "resourceVersion": str(self.rv),
                         "annotations": {SHARD_ANNOTATION: str(shard)}},
            "spec": {"minMember": 2, "queue": "default"}}

    def pod(self, name: str, group: str) -> str:
        """A pending pod of the gang, through the pod watch's own path (read as it arrives)."""
        self.rv += 1
        pod = pod_object(name, namespace="ns", group=group, node_selector={"zone": "a"})
        pod["metadata"].update(uid=f"uid-{name}", resourceVersion=str(self.rv),
                               creationTimestamp="2026-12-06T00:00:00Z")
        pod["spec"]["schedulerName"] = "volcano-py"
        self.cache.watcher._on_event(self.cache.pods, "ADDED", pod)
        return f"ns/{name}"


def selector(task: TaskInfo) -> tuple[tuple[str, str], ...]:
    return task.constraints.node_selector


def test_a_taken_shards_jobs_join_its_first_session_read_in_full() -> None:
    r = Replica()
    try:
        r.podgroup("zero", 0)
        r.podgroup("one", 1)
        r.cache.snapshot()  # the first view routes the jobs: ns/one is another replica's
        assert r.active.reads_light("ns/one") and not r.active.reads_light("ns/zero")
        keys = [r.pod(f"one-{i}", "one") for i in range(2)]
        mine = r.pod("zero-0", "zero")
        assert all(r.cache.parser.is_light(k) for k in keys) and not r.cache.parser.is_light(mine)
        view = r.cache.snapshot()
        assert set(view.jobs) == {"ns/zero"}
        assert selector(view.jobs["ns/zero"].tasks[mine]) == (("zone", "a"),)

        r.held = {0, 1}  # shard 1 taken: its jobs are this replica's from this very session, read in full
        view = r.cache.snapshot()
        assert set(view.jobs) == {"ns/zero", "ns/one"}
        assert [selector(view.jobs["ns/one"].tasks[k]) for k in keys] == [(("zone", "a"),)] * 2
        assert not any(r.cache.parser.is_light(k) for k in keys) and not r.active.reads_light("ns/one")
    finally:
        r.cache.stop(timeout=1.0)


def test_a_job_its_podgroup_routes_here_waits_one_session_for_its_pods_read_in_full() -> None:
    r = Replica()
    try:
        r.podgroup("two", 1)
        r.cache.snapshot()
        keys = [r.pod(f"two-{i}", "two") for i in range(2)]
        assert all(r.cache.parser.is_light(k) for k in keys)
        r.podgroup("two", 0)  # pinned here now: its pods, unchanged, were read light
        view = r.cache.snapshot()
        assert "ns/two" not in view.jobs  # never a session with a light pod
        view = r.cache.snapshot()
        assert "ns/two" in view.jobs
        assert [selector(view.jobs["ns/two"].tasks[k]) for k in keys] == [(("zone", "a"),)] * 2
    finally:
        r.cache.stop(timeout=1.0)


def test_a_job_no_view_has_routed_yet_is_read_as_its_podgroup_routes_it() -> None:
    r = Replica()
    try:
        r.cache.snapshot()  # routes nothing: no job yet
        r.podgroup("new-there", 1)
        r.podgroup("new-here", 0)
        there, here = r.pod("new-there-0", "new-there"), r.pod("new-here-0", "new-here")
        orphan = r.pod("orphan-0", "no-podgroup")
        assert r.cache.parser.is_light(there) and not r.cache.parser.is_light(here)
        assert not r.cache.parser.is_light(orphan)  # no PodGroup to route it by: read in full
        view = r.cache.snapshot()
        assert "ns/new-here" in view.jobs and "ns/new-there" not in view.jobs
        assert r.cache.parser.is_light(there)  # the view agrees: not read again
    finally:
        r.cache.stop(timeout=1.0)


def test_a_job_given_up_is_read_light_from_its_next_pod_event() -> None:
    r = Replica()
    try:
        r.held = {0, 1}
        r.podgroup("one", 1)
        r.cache.snapshot()
        key = r.pod("one-0", "one")
        assert not r.cache.parser.is_light(key)
        r.held = {0}  # given up: another replica schedules ns/one now
        assert "ns/one" not in r.cache.snapshot().jobs
        assert r.active.reads_light("ns/one")
        assert r.cache.parser.is_light(r.pod("one-1", "one"))
    finally:
        r.cache.stop(timeout=1.0)


def test_random_takeovers_and_pins_never_give_a_session_a_pod_read_light() -> None:
    """Seeded random: gangs pinned to either shard, shards taken and given up, pins changed, pods added and
    bound; after every snapshot each task of the session's jobs is what a full read of its pod gives."""
    import random

    rng = random.Random(4040)
    r = Replica()
    full = ParseCache(OURS, threading.Lock(), lambda *_: None)
    try:
        groups = [f"g{i}" for i in range(6)]
        for g in groups:
            r.podgroup(g, rng.randrange(2))
        made: dict[str, int] = dict.fromkeys(groups, 0)
        light_seen = 0
        for _ in range(120):
            step = rng.random()
            if step < 0.15:
                r.held = rng.choice([{0}, {1}, {0, 1}])
            elif step < 0.3:
                r.podgroup(rng.choice(groups), rng.randrange(2))
            elif step < 0.5:
                key = rng.choice(sorted(r.cache.pods.objects)) if r.cache.pods.objects else None
                if key is not None:  # bound by whichever replica: a new version of it arrives
                    pod = copy.deepcopy(r.cache.pods.objects[key])
                    r.rv += 1
                    pod["metadata"]["resourceVersion"] = str(r.rv)
                    pod["spec"]["nodeName"] = rng.choice(["n0", "n1"])
                    r.cache.watcher._on_event(r.cache.pods, "MODIFIED", pod)
            else:
                g = rng.choice(groups)
                r.pod(f"{g}-{made[g]}", g)
                made[g] += 1
            light_seen += sum(map(r.cache.parser.is_light, r.cache.pods.objects))
            view = r.cache.snapshot()
            for job in view.jobs.values():
                for key, task in job.tasks.items():
                    fresh = full.task(r.cache.pods.objects[key], {})
                    assert value(task) == value(fresh), key
        assert light_seen > 0  # the run did read pods light
    finally:
        r.cache.stop(timeout=1.0)


def test_a_hostile_podgroup_or_name_is_read_in_full_and_costs_no_other_job_its_session() -> None:
    r = Replica()
    try:
        r.podgroup("fine", 0)
        r.cache.snapshot()
        r.cache.podgroups.objects["ns/odd"] = {"metadata": 7, "spec": "x"}  # no route can be read from it
        r.cache.podgroups.objects["ns/bad"] = {"metadata": {"name": "bad", "resourceVersion": "9"}}

        def broken(job: str, podgroup: Any) -> int:
            if job == "ns/bad":
                raise RuntimeError("a fault while routing one PodGroup")
            return ActiveShards.route(r.active, job, podgroup)

        r.active.route = broken  # type: ignore[method-assign]
        odd, bad = r.pod("odd-0", "odd"), r.pod("bad-0", "bad")
        long = r.pod("long-0", "g" * 300)  # a group name past its bounds
        assert not any(map(r.cache.parser.is_light, (odd, bad, long)))
        assert r.cache.parser.parsed[bad][1] is not None and r.cache.parser.parsed[bad][1].creation > 0
        mine = r.pod("fine-0", "fine")
        view = r.cache.snapshot()
        assert mine in view.jobs["ns/fine"].tasks  # the other jobs' faults cost this one nothing
    finally:
        r.cache.stop(timeout=1.0)
