"""The cache's side of N active replicas (`cache/active.py`, `cache/active_plan.py`) against an in-memory Lease and
NodeShard store with resourceVersion preconditions: replicas counting each other through their member Leases each
take their fair count of shard Leases, a survivor takes a silent replica's shards once their Leases lapse on its
own clock, a shard given up is released only after the apply of the cycle that used it, the plan writes every
shard's losses before any shard's gains, and a session sees only its shards' jobs and nodes."""

from __future__ import annotations

import copy
import threading
from typing import Any

from scheduler.api.job import JobInfo
from scheduler.api.node import NodeInfo
from scheduler.api.resources import Resource
from scheduler.api.snapshot import ClusterSnapshot, Lineage
from scheduler.cache.active import ActiveShards
from scheduler.cache.active_plan import PlanWriter
from scheduler.cache.kube import KubeError
from scheduler.cache.leader import LeaderConfig
from scheduler.cache.shards import node_shards_watched
from scheduler.cache.store import Stores

CONFIG = LeaderConfig(namespace="ns", name="sched", lease_duration=4.0, renew_deadline=3.0, retry_period=0.5)
LEASES = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
NODE_SHARDS = "/apis/shard.volcano.sh/v1alpha1/nodeshards"


class Server:
    """Leases and NodeShards by path, each write checked against the resourceVersion it names (409 otherwise)."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.log: list[tuple[str, str, Any]] = []
        self.lock = threading.Lock()
        self.request_timeout = 5.0

    def delete(self, path: str, body: Any = None) -> bool:
        self.request("DELETE", path, body=body)
        return True

    def request(self, method: str, path: str, *, body: Any = None, query: Any = None, **_: Any) -> Any:
        with self.lock:
            self.log.append((method, path, copy.deepcopy(body)))
            if method == "GET" and path in (LEASES, NODE_SHARDS):  # a list
                return {"items": [copy.deepcopy(o) for p, o in self.objects.items() if p.startswith(path + "/")]}
            if method == "DELETE":
                return self.objects.pop(path, None)
            if method == "GET":
                if path not in self.objects:
                    raise KubeError(404, method, path, b"{}")
                return copy.deepcopy(self.objects[path])
            if method == "POST":
                path = f"{path}/{body['metadata']['name']}"
                if path in self.objects:
                    raise KubeError(409, method, path, b"{}")
            if method == "PUT":
                path = path.removesuffix("/status")
                stored = self.objects.get(path)
                if stored is None or stored["metadata"]["resourceVersion"] != body["metadata"].get("resourceVersion"):
                    raise KubeError(409, method, path, b"{}")
            self.version += 1
            obj = copy.deepcopy(body)
            obj["metadata"]["resourceVersion"] = str(self.version)
            self.objects[path] = obj
            return copy.deepcopy(obj)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def replica(server: Server, clock: Clock, identity: str, shards: int = 2) -> ActiveShards:
    stores = Stores()
    return ActiveShards(server, stores, CONFIG, identity, "volcano-py", shards, monotonic=clock)  # type: ignore[arg-type]


def split_between_two() -> tuple[Server, Clock, ActiveShards, ActiveShards]:
    """Replica a holding shard 0 and replica b shard 1, on one Lease store."""
    server, clock = Server(), Clock()
    a = replica(server, clock, "a")
    a.round()
    a.electors[1].stop(release=True)  # a gives shard 1 up; b takes it
    b = replica(server, clock, "b")
    b.round()
    return server, clock, a, b


def holders(server: Server, shards: int = 2) -> list[str]:
    return [(server.objects.get(f"{LEASES}/sched-shard-{i}") or {}).get("spec", {}).get("holderIdentity", "")
            for i in range(shards)]


def test_two_replicas_take_one_shard_each_and_a_survivor_takes_the_silent_ones() -> None:
    server, clock = Server(), Clock()
    a, b = replica(server, clock, "a"), replica(server, clock, "b")
    for _ in range(4):
        for r in (a, b):
            r.round()
            r.after_apply()  # between cycles: a shard given up is released here
        clock.now += 0.5
    assert sorted(holders(server)) == ["a", "b"]
    assert len(a.held()) == len(b.held()) == 1 and a.held() | b.held() == {0, 1}
    # b goes silent (killed): its Leases lapse on a's clock after their duration, not before
    clock.now += 2.0
    a.round()
    assert len(a.held()) == 1
    for _ in range(12):
        clock.now += 0.5
        a.round()
    assert holders(server) == ["a", "a"] and a.held() == {0, 1}


def test_a_shard_given_up_is_released_only_after_the_apply() -> None:
    server, clock = Server(), Clock()
    a = replica(server, clock, "a")
    a.round()
    assert a.held() == {0, 1}  # alone: both
    b = replica(server, clock, "b")
    b.round()  # b is counted from its member Lease; it holds nothing yet
    a.round()  # two replicas, a above its fair count of one, nothing free: one shard is to be given up
    leaving = {0, 1} - a.held()
    assert len(leaving) == 1 and sorted(holders(server)) == ["a", "a"]  # still held: no apply yet
    (shard,) = leaving
    a.after_apply()
    assert holders(server)[shard] == ""
    b.round()
    assert holders(server)[shard] == "b" and b.held() == {shard}


def test_the_plan_writes_every_shards_losses_before_any_shards_gains() -> None:
    server, clock = Server(), Clock()
    watched = node_shards_watched()
    path = "/apis/shard.volcano.sh/v1alpha1/nodeshards"
    for name, nodes in (("s-0", ["n1", "n2"]), ("s-1", ["n3", "n4"])):
        obj = server.request("POST", path, body={"metadata": {"name": name}, "spec": {"nodesDesired": nodes}})
        watched.objects[name] = obj
    watched.synced.set()
    writer = PlanWriter(server, watched, threading.Lock(), ["s-0", "s-1"], "rack", 30.0, clock)  # type: ignore[arg-type]
    racks = {"n1": "x", "n2": "y", "n3": "x", "n4": "y"}  # racks cross the current shards
    nodes = {n: NodeInfo(n, Resource.of(cpu=8000), labels={"rack": r}) for n, r in racks.items()}
    server.log.clear()
    writer.step(ClusterSnapshot(nodes, {}, {}))
    puts = [(p.rsplit("/", 1)[1], set(b["spec"]["nodesDesired"])) for m, p, b in server.log if m == "PUT"]
    stored = {p.rsplit("/", 1)[1]: set(o["spec"]["nodesDesired"]) for p, o in server.objects.items()}
    assert sorted(map(sorted, stored.values())) == [["n1", "n3"], ["n2", "n4"]]  # one rack per shard
    for k in range(len(puts)):  # after every write, no node is desired by two shards
        state = {"s-0": {"n1", "n2"}, "s-1": {"n3", "n4"}}
        for name, nodes_ in puts[:k + 1]:
            state[name] = nodes_
        assert not state["s-0"] & state["s-1"], puts[:k + 1]


def test_a_session_sees_its_shards_jobs_and_nodes_only() -> None:
    server, clock = Server(), Clock()
    a = replica(server, clock, "a")
    a.round()
    a.electors[1].stop(release=True)  # a holds shard 0 alone
    assert a.held() == {0}
    for i, nodes in enumerate((["n0"], ["n1"])):
        obj = {"metadata": {"name": f"volcano-py-shard-{i}", "resourceVersion": str(i + 1)},
               "spec": {"nodesDesired": nodes}, "status": {"nodesInUse": nodes}}
        a.watched.objects[obj["metadata"]["name"]] = obj
    a.watched.synced.set()
    a.plan.step = lambda *_: None  # type: ignore[method-assign]  # keep the NodeShards as written here
    for key, shard in (("ns/zero", "0"), ("ns/one", "1")):
        a.stores.podgroups.objects[key] = {"metadata": {"name": key, "resourceVersion": "1",
                                                        "annotations": {"scheduling.volcano-py.io/shard": shard}}}
    nodes = {n: NodeInfo(n, Resource.of(cpu=8000)) for n in ("n0", "n1")}
    jobs = {k: JobInfo(k, k.split("/")[1], "ns", "default") for k in ("ns/zero", "ns/one")}
    view = a.restrict(ClusterSnapshot(nodes, jobs, {}))
    assert set(view.jobs) == {"ns/zero"} and set(view.nodes) == {"n0"}
    assert view.shard is not None and view.shard.hard and view.shard.nodes == {"n0"}
    fence = a.fence_for("n0")
    assert fence is not None and fence[0]["scheduling.volcano-py.io/lease"] == "ns/sched-shard-0"
    assert a.fence_for("n1") is None  # a node of a shard it does not hold: no bind is sent there


def test_jobs_entering_or_leaving_the_sessions_view_count_as_changed_for_the_carried_work() -> None:
    server, clock = Server(), Clock()
    a = replica(server, clock, "a")
    a.round()
    assert a.held() == {0, 1}
    a.watched.synced.set()
    a.plan.step = lambda *_: None  # type: ignore[method-assign]
    for key, shard in (("ns/zero", "0"), ("ns/one", "1")):
        a.stores.podgroups.objects[key] = {"metadata": {"name": key, "resourceVersion": "1",
                                                        "annotations": {"scheduling.volcano-py.io/shard": shard}}}
    jobs = {k: JobInfo(k, k.split("/")[1], "ns", "default") for k in ("ns/zero", "ns/one")}
    before, token = object(), object()

    def view() -> ClusterSnapshot:
        return a.restrict(ClusterSnapshot({}, dict(jobs), {}, lineage=Lineage(before, token, frozenset())))

    first = view().lineage
    assert first is not None and first.since is None  # no session of this replica to follow yet
    both = view().lineage
    assert both is not None and both.since is before and both.jobs == frozenset()  # the same view: nothing moved
    a.electors[1].stop(release=True)  # shard 1 given up: its job leaves the view
    left = view().lineage
    assert left is not None and left.since is before and left.jobs == {"ns/one"}


def test_many_plain_pods_beside_few_podgroups_never_fail_the_view() -> None:
    server, clock = Server(), Clock()
    a = replica(server, clock, "a")
    a.round()
    a.watched.synced.set()
    a.plan.step = lambda *_: None  # type: ignore[method-assign]
    a.stores.podgroups.objects["ns/gang"] = {"metadata": {"name": "gang", "resourceVersion": "1",
                                                          "annotations": {"scheduling.volcano-py.io/shard": "1"}}}
    jobs = {"ns/gang": JobInfo("ns/gang", "gang", "ns", "default", min_available=2)}  # routed first
    jobs.update({f"ns/plain-{i}": JobInfo(f"ns/plain-{i}", f"plain-{i}", "ns", "default") for i in range(5000)})
    for _ in range(2):  # implicit gangs of one (no PodGroup) outnumber the pin cache's bound
        view = a.restrict(ClusterSnapshot({}, dict(jobs), {}))
        assert set(view.jobs) == set(jobs)  # both shards held: every job, the pinned gang included
    assert a.route("ns/gang", a.stores.podgroups.objects["ns/gang"]) == 1  # pinned


def test_a_gang_keeps_to_the_shard_its_pods_were_bound_under_with_no_write() -> None:
    """The shard a gang's bound pods carry (each bind's fence, copied onto the pod) pins it, whatever its hash; a
    PodGroup's own annotation wins; a gang of one, or a fence of another Lease, pins nothing; nothing is written."""
    from scheduler.api.job import TaskInfo
    from scheduler.api.phases import TaskStatus

    server, clock = Server(), Clock()
    a = replica(server, clock, "a", shards=4)
    a.round()
    assert a.held() == {0, 1, 2, 3}
    a.watched.synced.set()
    a.plan.step = lambda *_: None  # type: ignore[method-assign]
    fence = "scheduling.volcano-py.io/lease"
    jobs: dict[str, JobInfo] = {}
    spec = {"ns/gang": (2, "ns/sched-shard-2", None), "ns/both": (2, "ns/sched-shard-2", "ns/sched-shard-1"),
            "ns/annotated": (2, "ns/sched-shard-3", None), "ns/single": (1, "ns/sched-shard-3", None),
            "ns/foreign": (2, "other/sched-shard-3", None), "ns/waiting": (2, None, None)}
    for key, (minimum, first, second) in spec.items():
        annotations = {"scheduling.volcano-py.io/shard": "0"} if key == "ns/annotated" else {}
        a.stores.podgroups.objects[key] = {"metadata": {"name": key, "resourceVersion": "1",
                                                        "annotations": annotations}}
        job = jobs[key] = JobInfo(key, key.split("/")[1], "ns", "default", min_available=minimum)
        for i, value in enumerate((first, second, None)):
            bound = value is not None
            job.add_task(TaskInfo(f"{key}-{i}", f"p{i}", "ns", key, Resource.of(cpu=1000),
                                  status=TaskStatus.BOUND if bound else TaskStatus.PENDING,
                                  node_name="n0" if bound else "", annotations={fence: value} if bound else {}))
    server.log.clear()
    a.restrict(ClusterSnapshot({}, jobs, {}))
    pins = {key: a.pins.bound.get(key, (None, None))[1] for key in jobs}
    assert pins == {"ns/gang": 2, "ns/both": 1, "ns/annotated": None, "ns/single": None, "ns/foreign": None,
                    "ns/waiting": None}
    assert server.log == []  # nothing written
    # another replica reads the same pods: the same shards (by their hash: ns/gang 3, ns/both 3, ns/single 0)
    b = replica(Server(), clock, "b", shards=4)
    b.round()
    b.watched.synced.set()
    b.plan.step = lambda *_: None  # type: ignore[method-assign]
    b.stores.podgroups.objects.update(a.stores.podgroups.objects)
    b.electors[2].stop(release=True)
    assert b.held() == {0, 1, 3}
    view = b.restrict(ClusterSnapshot({}, jobs, {}))
    assert set(view.jobs) == {"ns/both", "ns/annotated", "ns/single", "ns/foreign", "ns/waiting"}


def test_the_queues_allocated_sums_what_each_shards_holder_publishes_and_only_shard_0s_holder_writes_it() -> None:
    """Each holder publishes on its shard's Lease what the shard's jobs hold per queue (its pods of other replicas'
    jobs are passed over, cache/scope.py, so no replica's cache holds them all); the holder of shard 0 writes the
    Queues' `status.allocated` as its own session's figures plus the other shards' published ones, whatever its own
    cache holds of their jobs (here a stale view of them)."""
    from scheduler.api.job import TaskInfo
    from scheduler.api.phases import TaskStatus
    from scheduler.api.snapshot import QueueStatus

    server, clock = Server(), Clock()
    a = replica(server, clock, "a")
    a.round()
    a.electors[1].stop(release=True)  # a holds shard 0 alone
    b = replica(server, clock, "b")
    b.round()
    for r in (a, b):
        r.watched.synced.set()
        r.plan.step = lambda *_: None  # type: ignore[method-assign]
    assert a.held() == {0} and b.held() == {1}
    held = {"ns/zero": ("0", "q", 2000), "ns/one": ("1", "q", 3000), "ns/other": ("1", "r", 5000),
            "ns/waits": ("1", "r", 0)}

    def jobs_of(r: ActiveShards, scale: int) -> dict[str, JobInfo]:
        jobs = {}
        for key, (shard, queue, cpu) in held.items():
            r.stores.podgroups.objects[key] = {"metadata": {"name": key, "resourceVersion": "1", "annotations": {
                "scheduling.volcano-py.io/shard": shard}}}
            job = jobs[key] = JobInfo(key, key.split("/")[1], "ns", queue)
            status = TaskStatus.RUNNING if cpu else TaskStatus.PENDING
            job.add_task(TaskInfo(f"{key}-0", "p", "ns", key, Resource.of(cpu=cpu // scale or 1000), status=status,
                                  node_name="n0" if cpu else ""))
        return jobs

    a.restrict(ClusterSnapshot({}, jobs_of(a, 10), {}))
    assert not a.writes_queues()  # no summary of shard 1 yet: a's own figures alone would undercount
    assert set(b.restrict(ClusterSnapshot({}, jobs_of(b, 1), {})).jobs) == {"ns/one", "ns/other", "ns/waits"}
    clock.now += 0.5
    b.round()  # the renewal publishes shard 1's summary
    a.round()  # and a's round reads it
    view = a.restrict(ClusterSnapshot({}, jobs_of(a, 10), {}))  # a's cache: a tenth of what shard 1's jobs hold
    assert set(view.jobs) == {"ns/zero"}
    # the session's own figures (its jobs as it left them: one more cpu placed in q this cycle)
    session = [QueueStatus("q", Resource.of(cpu=3000)), QueueStatus("r", Resource.of(cpu=0))]
    assert a.writes_queues() and not b.writes_queues()
    written = {q.queue: q.allocated.cpu for q in a.queue_statuses(session)}
    assert written == {"q": 3000 + 3000, "r": 5000}
    # whoever may write Leases writes nonsense there, between b's renewals: the last readable one kept
    lease = server.objects[f"{LEASES}/sched-shard-1"]
    for nonsense in ('{"v":1,"allocated":{"q":[-1,0,0,{}]}}', "[" * 5000, "x"):
        lease["metadata"]["annotations"] = {"scheduling.volcano-py.io/shard-summary": nonsense}
        clock.now += 0.5
        a.round()
        a.restrict(ClusterSnapshot({}, jobs_of(a, 10), {}))
        assert a.held() == {0} and a.electors[1].published == nonsense
        assert {q.queue: q.allocated.cpu for q in a.queue_statuses(session)} == written


def test_the_holder_of_shard_0_writes_the_queues_two_lease_durations_after_it_took_shard_0_if_none_is_published():
    """A holder of shard 1 that publishes no summary (here: no session yet; an older volcano-py in a rolling
    upgrade) keeps the Queues' status unwritten for two lease durations, not for ever."""
    server, clock, a, b = split_between_two()
    a.watched.synced.set()
    a.plan.step = lambda *_: None  # type: ignore[method-assign]
    waited = 0.0
    while True:
        a.restrict(ClusterSnapshot({}, {}, {}))
        if a.writes_queues():
            break
        assert a.held() == {0} and b.held() == {1} and waited < 2 * CONFIG.lease_duration
        clock.now += 0.5
        waited += 0.5
        a.round()
        b.round()
    assert waited == 2 * CONFIG.lease_duration and not b.writes_queues()


def test_a_gang_larger_than_a_shard_another_replica_holds_borrows_racks_through_the_published_summaries() -> None:
    """The holder of shard 0 plans the nodes but no longer reads other shards' waiting pods (they are passed over,
    cache/scope.py): it publishes the plan's weights on shard 0's Lease, the holder of shard 1 finds its gang
    larger than its shard against them and publishes the gang's need on shard 1's Lease, and the plan lends it
    whole racks; once the gang has ended the racks go back."""
    from scheduler.api.job import TaskInfo
    from scheduler.api.phases import TaskStatus

    server, clock, a, b = split_between_two()
    assert a.held() == {0} and b.held() == {1}
    racks = {f"{r}{i}": r for r in "abcd" for i in range(2)}  # 4 racks of 2 nodes of 8 GPUs: 16 GPUs a rack
    gpu = Resource.of(cpu=64000, scalars={"nvidia.com/gpu": 8})
    nodes = {n: NodeInfo(n, gpu, labels={"rack": r}) for n, r in racks.items()}
    a.plan.label = "rack"
    gang = JobInfo("ns/big", "big", "ns", "default", min_available=6)
    for i in range(6):  # 6 x 8 GPUs: more than shard 1's 32
        gang.add_task(TaskInfo(f"ns/big-{i}", f"big-{i}", "ns", "ns/big", Resource.of(scalars={"nvidia.com/gpu": 8})))
    for r in (a, b):
        r.stores.podgroups.objects["ns/big"] = {"metadata": {"name": "big", "resourceVersion": "1", "annotations": {
            "scheduling.volcano-py.io/shard": "1"}}}

    def cycle() -> list[set[str]]:
        """A cycle of each replica, then a round of Lease renewals (which publish and read the summaries)."""
        for r in (a, b):
            r.watched.synced.set()
            for path, obj in server.objects.items():
                if path.startswith(NODE_SHARDS):
                    r.watched.objects[path.rsplit("/", 1)[1]] = obj
            r.restrict(ClusterSnapshot(nodes, {"ns/big": gang}, {}))
        clock.now += 0.5
        a.round()
        b.round()
        return [set(server.objects.get(f"{NODE_SHARDS}/volcano-py-shard-{i}", {}).get("spec", {}).get(
            "nodesDesired", ())) for i in range(2)]

    planned = [cycle() for _ in range(4)][-1]
    assert a.plan.loans.gangs == {}  # shard 0's holder weighed none of it itself
    assert len(planned[1]) >= 6 and not planned[0] & planned[1]  # 48 GPUs: three racks
    assert {racks[n] for n in planned[0]}.isdisjoint({racks[n] for n in planned[1]})
    for task in list(gang.tasks.values()):  # it ended: the racks go back
        gang.set_status(task, TaskStatus.SUCCEEDED)
    assert [len(s) for s in [cycle() for _ in range(3)][-1]] == [4, 4]


def test_a_gang_larger_than_its_shard_borrows_racks_for_as_long_as_it_lives() -> None:
    """The plan lends whole racks to the shard of a waiting gang larger than that shard's share, every shard's
    losses written before any gains, keeps them while the gang runs, and gives them back once it has ended."""
    from scheduler.api.job import TaskInfo
    from scheduler.api.phases import TaskStatus

    server, clock = Server(), Clock()
    watched = node_shards_watched()
    path = "/apis/shard.volcano.sh/v1alpha1/nodeshards"
    racks = {f"{r}{i}": r for r in "abcd" for i in range(2)}  # 4 racks of 2 nodes of 8 GPUs: 16 GPUs a rack
    gpu = Resource.of(cpu=64000, scalars={"nvidia.com/gpu": 8})
    nodes = {n: NodeInfo(n, gpu, labels={"rack": r}) for n, r in racks.items()}
    writer = PlanWriter(server, watched, threading.Lock(), ["s-0", "s-1"], "rack", 30.0, clock)  # type: ignore[arg-type]
    watched.synced.set()

    def step(jobs: dict[str, JobInfo]) -> list[set[str]]:
        writer.step(ClusterSnapshot(nodes, jobs, {}), lambda key: 1)  # every job routed to shard 1
        for p, obj in server.objects.items():
            if p.startswith(path):
                watched.objects[p.rsplit("/", 1)[1]] = obj
        return [set(_nodes_desired(server, f"{path}/s-{i}")) for i in range(2)]

    assert [len(s) for s in step({})] == [4, 4]  # 32 GPUs each: no loans
    gang = JobInfo("ns/big", "big", "ns", "default", min_available=6)
    for i in range(6):  # 6 x 8 GPUs: more than shard 1's 32
        gang.add_task(TaskInfo(f"ns/big-{i}", f"big-{i}", "ns", "ns/big", Resource.of(scalars={"nvidia.com/gpu": 8})))
    server.log.clear()
    clock.now += 1.0
    planned = step({"ns/big": gang})
    assert sum(8 for _ in planned[1]) >= 48 and not planned[0] & planned[1]
    assert {racks[n] for n in planned[0]}.isdisjoint({racks[n] for n in planned[1]})  # whole racks moved
    puts = [(p.rsplit("/", 1)[1], len(b["spec"]["nodesDesired"])) for m, p, b in server.log if m == "PUT"]
    assert puts[0][0] == "s-0" and puts[0][1] < 4  # the lender's loss first, then the borrower's gain
    for task in list(gang.tasks.values()):  # it runs: the loan stays
        gang.set_status(task, TaskStatus.RUNNING)
    clock.now += 1.0
    assert step({"ns/big": gang}) == planned
    for task in list(gang.tasks.values()):  # it ended: the racks go back
        gang.set_status(task, TaskStatus.SUCCEEDED)
    clock.now += 1.0
    assert [len(s) for s in step({"ns/big": gang})] == [4, 4]


def _nodes_desired(server: Server, path: str) -> list[str]:
    return list(server.objects[path]["spec"]["nodesDesired"])
