"""A leader frozen (SIGSTOP) in the middle of binding wakes (SIGCONT) after a standby took its Lease (issue 22).

Two scheduler processes share one Lease (duration 4 s, renew deadline 3 s, retry 0.5 s). Each round, in a fresh
namespace on 4 x 16 GPUs: 8 gangs of 4 one-GPU pods are created and the leader is frozen the moment a seeded
random number (1-4) of their pods is bound (read from a watch: most of that cycle's 32 binds are then still to
be sent); once the standby holds the Lease, 8 more gangs are created and bound by it; then the old leader is
continued. The next round freezes the new leader.

Two fences keep the old leader from binding on stale state: its own (`Binder.bind`: nothing is sent once it
is not the leader, or with less than MIN_LEASE_LEFT of the Lease certainly its own), and the apiserver's
(manifests/07-bind-fence.yaml, applied here): a Binding names the sender and its Lease, and is refused unless
the Lease names that sender. The first cannot stop a bind that had passed it when the process froze; the second
does (found by this test: 8 such binds went out after a wake-up, 409 only because the pods were bound already).

What proves that the old leader bound nothing after the takeover: the apiserver's own order. Every write gets
the next etcd revision (resourceVersion) across all kinds, so a test-side watch records the revision at which
each pod got its node, who bound it (the Binding's `bound-by` annotation, which the apiserver copies onto the
pod in the same write; the pod's `Scheduled` event agrees), and the revision of the Lease write that made the
standby the holder. Every pod the old leader bound must have been bound before the takeover; and every bind the
apiserver refused anyone must be a fence refusal (403), never a 409 (a late bind that got past admission).

Also checked: every pod bound exactly once (one `Scheduled` event per pod uid, one node ever), every gang whole,
no over-commit, both schedulers alive.
"""

from __future__ import annotations

import json
import random
import re
import threading
import uuid
from collections import Counter, defaultdict

from chaos_helpers import (
    ROUNDS,
    SEED,
    TIMEOUT,
    bound_pods,
    create_gangs,
    gang_counts,
    make_nodes,
    partly_bound,
    start_scheduler,
    wait_no_pods_on,
)
from controlplane import REPO_ROOT, assert_no_overcommit, wait_for
from kubernetes import client

from scheduler.cache.kube import TRANSPORT_ERRORS
from scheduler.cache.leader import BOUND_BY_ANNOTATION

LEASE_NS = "volcano-py-system"
GANGS, SIZE, NODES, GPUS = 8, 4, 4, 16  # a wave: 32 of the 64 GPUs; two waves fill them
LEASE_ARGS = ("--leader-elect", "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s",
              "--leader-elect-retry-period", "500ms")


class History:
    """What the apiserver recorded, by etcd revision: the revision at which each pod of `namespace` first had a
    node (and every node it ever had), and the Lease's holder at each of its writes. `on_bound(n)` runs in the
    watch thread the moment the n-th pod is seen bound."""

    def __init__(self, control_plane, namespace: str, lease: str, freeze_at: int, freeze):
        from scheduler.cache.kube import Kube

        self.api = control_plane.api_client()
        self.kube = Kube(self.api)
        self.bound_at: dict[str, int] = {}
        self.nodes: dict[str, set[str]] = defaultdict(set)
        self.bound_by: dict[str, str] = {}
        self.names: dict[str, str] = {}
        self.holders: list[tuple[int, str]] = []
        self.freeze_at, self.freeze, self.frozen = freeze_at, freeze, threading.Event()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._watch, args=(f"/api/v1/namespaces/{namespace}/pods", {}, self._pod),
                             daemon=True),
            threading.Thread(target=self._watch, args=(
                f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases",
                {"fieldSelector": f"metadata.name={lease}"}, self._lease), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _watch(self, path: str, selector: dict, on_object) -> None:
        listed = self.kube.request("GET", path, query=selector)
        for obj in listed["items"]:
            on_object(obj)
        rv = listed["metadata"]["resourceVersion"]
        while not self._stop.is_set():
            query = {**selector, "watch": "1", "resourceVersion": rv, "timeoutSeconds": 60}
            try:
                for event in self.kube.stream(path, query, read_timeout=75):
                    obj = event.get("object") or {}
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        on_object(obj)
                    rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
            except TRANSPORT_ERRORS:  # closed at stop(), or a broken stream: resume from rv
                if self._stop.is_set():
                    return

    def _pod(self, pod: dict) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return
        meta = pod["metadata"]
        self.nodes[meta["uid"]].add(node)
        self.names[meta["uid"]] = meta["name"]
        self.bound_by.setdefault(meta["uid"], (meta.get("annotations") or {}).get(BOUND_BY_ANNOTATION, ""))
        self.bound_at.setdefault(meta["uid"], int(meta["resourceVersion"]))
        if len(self.bound_at) >= self.freeze_at and not self.frozen.is_set():
            self.freeze()
            self.frozen.set()

    def _lease(self, lease: dict) -> None:
        holder = (lease.get("spec") or {}).get("holderIdentity") or ""
        self.holders.append((int(lease["metadata"]["resourceVersion"]), holder))

    def took_over(self, identity: str, after: int) -> int | None:
        """The revision of the first Lease write after revision `after` that made `identity` the holder."""
        return next((rv for rv, holder in sorted(self.holders) if rv > after and holder == identity), None)

    def stop(self) -> None:
        self._stop.set()
        self.kube.close_streams()
        for t in self._threads:
            t.join(10)
        self.api.close()


def scheduled_by(core_v1, namespace: str) -> dict[str, list[str]]:
    """pod uid -> reportingInstance of each of its `Scheduled` events."""
    raw = json.loads(core_v1.list_namespaced_event(namespace, _preload_content=False).data)["items"]
    seen: dict[str, list[str]] = defaultdict(list)
    for e in raw:
        if e.get("reason") == "Scheduled" and e["involvedObject"].get("kind") == "Pod":
            seen[e["involvedObject"].get("uid", "")].extend([e.get("reportingInstance", "")] * int(e.get("count", 1)))
    return dict(seen)


FAILED_BIND = re.compile(r"WARNING volcano_py\.cache: bind \S+ -> \S+ failed: POST \S+: (\d{3}) ")


def refused_binds(log: str) -> Counter:
    """HTTP status -> number of the binds the apiserver refused, from the binder's warning lines."""
    return Counter(int(m.group(1)) for m in FAILED_BIND.finditer(log))


def one_round(round_: int, ctx: dict, leader, standby, freeze_at: int) -> str:
    """Freeze `leader` at the `freeze_at`-th bind, let `standby` take over and bind the rest, wake `leader`,
    check. Returns a line for the summary."""
    core_v1, custom, tag = ctx["core_v1"], ctx["custom"], ctx["tag"]
    namespace = ctx["new_namespace"](f"frozen-{round_}")
    first = {f"a{i}": [f"a{i}-{j}" for j in range(SIZE)] for i in range(GANGS)}
    second = {f"b{i}": [f"b{i}-{j}" for j in range(SIZE)] for i in range(GANGS)}
    total = 2 * GANGS * SIZE
    history = History(ctx["control_plane"], namespace, ctx["lease"], freeze_at, leader.freeze)
    try:
        lost_before = leader.log().count("lost the Lease")
        create_gangs(core_v1, custom, namespace, tag, first)
        assert history.frozen.wait(TIMEOUT), f"round {round_}: {freeze_at} pods never bound"
        at_freeze = len(history.bound_at)
        frozen_rv = max(history.bound_at.values())
        wait_for(lambda: ctx["lease_holder"]() == standby.name, TIMEOUT, interval=0.1,
                 what=f"round {round_}: the standby takes the Lease")
        takeover = wait_for(lambda: history.took_over(standby.name, frozen_rv), TIMEOUT,
                            what="the takeover write seen by the watch")
        create_gangs(core_v1, custom, namespace, tag, second)
        wait_for(lambda: len(bound_pods(core_v1, namespace)) == total, TIMEOUT, interval=0.2,
                 what=f"round {round_}: every pod bound by the new leader")
        leader.thaw()
        wait_for(lambda: leader.log().count("lost the Lease") > lost_before, TIMEOUT, interval=0.1,
                 what=f"round {round_}: the old leader awake and knowing it lost the Lease")
        events = wait_for(lambda: (e := scheduled_by(core_v1, namespace)) and len(e) == total and e, TIMEOUT,
                          interval=0.2, what="one Scheduled event per pod")

        gangs = {**first, **second}
        counts = gang_counts(bound_pods(core_v1, namespace), gangs)
        assert not partly_bound(counts, gangs) and set(counts.values()) == {SIZE}, counts
        assert all(len(by) == 1 for by in events.values()), {u: b for u, b in events.items() if len(b) > 1}
        assert all(len(n) == 1 for n in history.nodes.values()), "a pod changed nodes"
        # Who bound a pod is on the pod, written by the bind itself (the Binding's annotations); the Scheduled
        # event, sent after the bind, agrees.
        assert history.bound_by == {uid: by[0] for uid, by in events.items()}, "bound-by and events disagree"
        by_old = [uid for uid, by in history.bound_by.items() if by == leader.name]
        late = [history.names[uid] for uid in by_old if history.bound_at[uid] > takeover]
        assert not late, f"round {round_}: the old leader bound {late} after the takeover"
        assert set(history.bound_by.values()) <= {leader.name, standby.name}
        # A bind of the old leader that reached the apiserver after the takeover is refused by the fence (403)
        # before the pod is looked at: never a 409 (the pod bound already), which would mean it got through.
        refused = {proc.name: refused_binds(proc.log()) for proc in (leader, standby)}
        assert all(set(r) <= {403} for r in refused.values()), refused
        for proc in (leader, standby):
            assert proc.alive()
        assert_no_overcommit(core_v1)
        skipped = leader.log().count("skipped: not the leader") + leader.log().count("skipped: the Lease may")
        return (f"round {round_}: froze {leader.name} at {at_freeze} pods bound (wanted {freeze_at}); it bound "
                f"{len(by_old)}, all before the takeover (revision {takeover}); {standby.name} bound "
                f"{total - len(by_old)}; the old leader's binds so far: {skipped} not sent after waking, "
                f"{refused[leader.name][403]} sent and refused by the fence")
    finally:
        history.stop()
        leader.thaw()
        core_v1.delete_namespace(namespace)
        wait_no_pods_on(core_v1, ctx["nodes"])


def test_a_frozen_leader_that_wakes_after_the_takeover_binds_nothing(
    control_plane, core_v1, custom, new_namespace, tmp_path
):
    rng = random.Random(SEED)
    tag = uuid.uuid4().hex[:6]
    lease = f"frozen-{tag}"
    coordination = client.CoordinationV1Api(core_v1.api_client)

    def lease_holder() -> str | None:
        try:
            return coordination.read_namespaced_lease(lease, LEASE_NS).spec.holder_identity or None
        except client.ApiException:
            return None

    fence = str(REPO_ROOT / "manifests" / "07-bind-fence.yaml")
    control_plane.kubectl("apply", "-f", fence)
    ctx = {"control_plane": control_plane, "core_v1": core_v1, "custom": custom, "new_namespace": new_namespace,
           "tag": tag, "lease": lease, "lease_holder": lease_holder,
           "nodes": make_nodes(core_v1, tag, NODES, gpus=GPUS)}
    args = (*LEASE_ARGS, "--leader-elect-lease-name", lease)
    leader = start_scheduler(control_plane, tmp_path, *args)
    standby = None
    try:
        wait_for(lambda: lease_holder() == leader.name, TIMEOUT, what="the first scheduler holds the Lease")
        standby = start_scheduler(control_plane, tmp_path, *args)
        wait_for(lambda: "is a candidate" in standby.log(), TIMEOUT, what="the second scheduler a candidate")
        lines = []
        for round_ in range(ROUNDS):
            lines.append(one_round(round_, ctx, leader, standby, rng.randint(1, SIZE)))
            leader, standby = standby, leader
        print("\n" + "\n".join(lines))
    finally:
        for proc in (leader, standby):
            if proc is not None:
                proc.stop()
        for name in ctx["nodes"]:
            core_v1.delete_node(name)
        control_plane.kubectl("delete", "-f", fence, check=False)
