"""`python -m shardsim.chaos`: the simulated apiserver of the chaos bench (bench/shards_chaos.py), one small
cluster per run, its invariants checked at every write (`shardsim/monitor.py`).

The cluster: `--nodes` nodes of 8 CPUs and 32 GiB (no GPUs: the active shards' plan weighs nodes by CPU), the
NodeShards `volcano-py-shard-i` holding blocks of them (as the holder of shard 0 keeps them), the queues and
namespaces. No pending pod at the start: the driver creates the gangs as the run goes (`/sim/chaos/gang`), ends
whole gangs that are bound (`/sim/chaos/finish`, a job that completed and was deleted), and deletes or adds nodes
(`/sim/chaos/nodes`). `/sim/chaos/state` is the driver's view while it runs (Leases, NodeShards, unbound pods);
`/sim/chaos/report` what the monitor saw and the gangs' end states. Prints `READY <port>` once it serves.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
from pathlib import Path
from typing import Any

import orjson

from shardsim.accounting import Accounting
from shardsim.cluster import ACTIVE_SCHEDULER, LEASE_NS, NS, PG_GV, base_objects, check, pod_doc, shard_name
from shardsim.kinds import all_kinds
from shardsim.main import read_calibration
from shardsim.monitor import Monitor
from shardsim.server import Request, Server, serve
from shardsim.store import ApiError, Store

CALIBRATION = Path(__file__).with_name("calibration.json")
NODE_CPU = 8


def chaos_node(name: str, cpu: int = NODE_CPU) -> dict[str, Any]:
    res = {"cpu": str(cpu), "memory": f"{4 * cpu}Gi", "pods": "110"}
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}, "spec": {},
            "status": {"capacity": res, "allocatable": dict(res), "conditions": [{"type": "Ready", "status": "True"}]}}


OTHER = "other-scheduler"  # another scheduler's pods, running at the start (`--other-pods`)


def load_chaos(store: Store, nodes: int, shards: int, other: int = 0) -> None:
    """`other`: up to this many 1-CPU pods of another scheduler already running on each node (a draw per node),
    which every replica must count on a node once its shard holds it: each replica keeps another scheduler's pods
    only on its shards' nodes (cache/scope.py), so a node moving between shards has them listed on arrival."""
    k = store.kind
    draw = random.Random(nodes * 7919 + shards)
    store.loading = True
    try:
        base_objects(store)
        for i in range(nodes):
            store.create(k("v1", "nodes"), "", chaos_node(f"c{i}"))
            for j in range(draw.randint(0, other)):
                store.create(k("v1", "pods"), NS, pod_doc(f"other-c{i}-{j}", OTHER, {"cpu": "1", "memory": "4Gi"},
                                                          node=f"c{i}"))
        bounds = [r * nodes // shards for r in range(shards + 1)]
        for r in range(shards):
            store.create(k("shard.volcano.sh/v1alpha1", "nodeshards"), "", {
                "metadata": {"name": shard_name(r, True)},
                "spec": {"nodesDesired": [f"c{i}" for i in range(bounds[r], bounds[r + 1])]}})
    finally:
        store.loading = False


class Chaos:
    """The driver's endpoints on one store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.monitor = Monitor(store)
        self.gangs: dict[str, int] = {}  # gang -> minMember, in creation order
        self.finished: list[str] = []
        self.pods, self.groups = store.kind("v1", "pods"), store.kind(PG_GV, "podgroups")
        self.nodes = store.kind("v1", "nodes")
        self.draw = random.Random(len(self.nodes.objects))

    def _bound(self, gang: str) -> int:
        return sum(1 for m in range(self.gangs[gang])
                   if (e := self.pods.objects.get(f"{NS}/{gang}-{m}")) is not None and e.fields.get("spec.nodeName"))

    def gang(self, body: dict[str, Any]) -> dict[str, Any]:
        """A gang: its PodGroup (minMember = size), then its pods, each `cpu` CPUs and 4 GiB a CPU."""
        name, size, cpu = str(body["name"]), int(body["size"]), int(body["cpu"])
        self.store.writer = ""
        self.store.create(self.groups, NS, {"metadata": {"name": name}, "spec": {"minMember": size,
                                                                                 "queue": "default"}})
        for m in range(size):
            self.store.create(self.pods, NS, pod_doc(f"{name}-{m}", ACTIVE_SCHEDULER,
                                                     {"cpu": str(cpu), "memory": f"{4 * cpu}Gi"}, group=name))
        self.gangs[name] = size
        return {"created": size}

    def _end(self, gang: str) -> None:
        self.store.writer = ""
        for m in range(self.gangs.pop(gang)):
            with contextlib.suppress(ApiError):
                self.store.delete(self.pods, NS, f"{gang}-{m}")
        with contextlib.suppress(ApiError):
            self.store.delete(self.groups, NS, gang)
        self.finished.append(gang)

    def finish(self, body: dict[str, Any]) -> dict[str, Any]:
        """End up to `n` whole bound gangs, the oldest first (`names`: these gangs, whatever their state: a gang
        given up, e.g. the loan's large gang)."""
        ended = []
        for name in [str(n) for n in body.get("names") or () if str(n) in self.gangs]:
            self._end(name)
            ended.append(name)
        want = int(body.get("n") or 0)
        for name in list(self.gangs):
            if len(ended) >= want + len(body.get("names") or ()):
                break
            if self._bound(name) == self.gangs[name]:
                self._end(name)
                ended.append(name)
        return {"ended": ended}

    def change_nodes(self, body: dict[str, Any]) -> dict[str, Any]:
        """Delete nodes (first ending whole every gang with a pod bound there, as a drain would), add nodes."""
        self.store.writer = ""
        doomed = {str(n) for n in body.get("delete") or ()}
        on = {key.split("/", 1)[1].rsplit("-", 1)[0] for key, e in self.pods.objects.items()
              if e.fields.get("spec.nodeName") in doomed}
        for gang in sorted(on & set(self.gangs)):
            self._end(gang)
        deleted = []
        for name in sorted(doomed):
            try:
                self.store.delete(self.nodes, "", name)
                deleted.append(name)
            except ApiError:
                pass
        added = []
        for name in body.get("add") or ():
            self.store.create(self.nodes, "", chaos_node(str(name)))
            added.append(str(name))
        return {"deleted": deleted, "added": added, "gangs_ended": sorted(on)}

    def state(self) -> dict[str, Any]:
        others = [key for key, e in self.pods.objects.items() if key.startswith(f"{NS}/other-")]
        if others and self.draw.random() < 0.2:  # another scheduler's pod ends now and then (the driver polls)
            self.store.writer = ""
            with contextlib.suppress(ApiError):
                self.store.delete(self.pods, NS, self.draw.choice(sorted(others)).split("/", 1)[1])
        leases = {}
        for key, e in self.store.kind("coordination.k8s.io/v1", "leases").objects.items():
            namespace, _, name = key.partition("/")
            if namespace == LEASE_NS:
                leases[name] = (orjson.loads(e.data).get("spec") or {}).get("holderIdentity") or ""
        shards: dict[str, Any] = {}
        for name, e in self.store.kind("shard.volcano.sh/v1alpha1", "nodeshards").objects.items():
            doc = orjson.loads(e.data)
            desired = (doc.get("spec") or {}).get("nodesDesired") or []
            shards[name] = {"desired": len(desired), "in_use": len((doc.get("status") or {}).get("nodesInUse") or ()),
                            "nodes": sorted(desired)}
        bound = {g: self._bound(g) for g in self.gangs}
        last: dict[str, float] = {}
        for t, who in reversed(self.monitor.binds):
            if len(last) >= 8:
                break
            last.setdefault(who, t)
        changes = [c["t"] for c in self.monitor.lease_changes if "-shard-" in c["lease"]]
        return {"t": self.monitor.clock(), "leases": leases, "last_bind": last,
                "last_shard_lease_change": max(changes, default=0.0), "nodeshards": shards,
                "unbound": sum(self.gangs[g] - b for g, b in bound.items()),
                "partial": sorted(g for g, b in bound.items() if 0 < b < self.gangs[g]),
                "binds": len(self.monitor.binds), "nodes": sorted(self.nodes.objects),
                "bound_gangs": sorted(g for g, b in bound.items() if b == self.gangs[g]),
                "used_cpu": sum(u.get("cpu", 0.0) for n, u in self.monitor.used.items() if n in self.monitor.alloc),
                "cpu": sum(a.get("cpu", 0.0) for a in self.monitor.alloc.values())}

    def report(self) -> dict[str, Any]:
        bound = {g: self._bound(g) for g in self.gangs}
        ends = {"whole": sum(1 for g, b in bound.items() if b == self.gangs[g]),
                "not_started": sum(1 for b in bound.values() if b == 0),
                "partial": sorted(g for g, b in bound.items() if 0 < b < self.gangs[g]),
                "finished": len(self.finished)}
        partial_pods = {g: sorted((f"{g}-{m}", e.fields.get("spec.nodeName"),
                                   (orjson.loads(e.data)["metadata"].get("annotations") or {}))
                                  for m in range(self.gangs[g])
                                  if (e := self.pods.objects.get(f"{NS}/{g}-{m}")) is not None)
                        for g in ends["partial"]}
        return {"monitor": self.monitor.report(), "check": check(self.store), "gangs": ends,
                "partial_pods": partial_pods}


def build(nodes: int, shards: int, calibration: dict[str, Any], cores: int,
          other: int = 0) -> tuple[Server, Chaos]:
    store = Store(all_kinds())
    load_chaos(store, nodes, shards, other)
    chaos = Chaos(store)
    acct = Accounting(calibration["costs_ms"], cores)

    def body(req: Request) -> dict[str, Any]:
        doc = orjson.loads(req.body) if req.body else {}
        return doc if isinstance(doc, dict) else {}

    def replicas(req: Request) -> dict[str, Any]:
        for token, pid in body(req).items():
            acct.register(str(token), int(pid))
        return {"registered": len(acct.replicas)}

    extra = {"replicas": replicas, "chaos/gang": lambda req: chaos.gang(body(req)),
             "chaos/finish": lambda req: chaos.finish(body(req)),
             "chaos/nodes": lambda req: chaos.change_nodes(body(req)),
             "chaos/state": lambda req: chaos.state(), "chaos/report": lambda req: chaos.report(),
             "stats": lambda req: acct.stats()}
    return Server(store, acct, extra), chaos


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--nodes", type=int, default=30)
    p.add_argument("--shards", type=int, default=3)
    p.add_argument("--cores", type=int, default=8)
    p.add_argument("--calibration", type=Path, default=CALIBRATION)
    p.add_argument("--other-pods", type=int, default=3, help="up to this many pods of another scheduler per node")
    a = p.parse_args(argv)
    server, _ = build(a.nodes, a.shards, read_calibration(a.calibration), a.cores, a.other_pods)

    def ready(port: int) -> None:
        print(f"READY {port}", flush=True)

    print(json.dumps({"nodes": a.nodes, "shards": a.shards}), file=sys.stderr, flush=True)
    asyncio.run(serve(server, "127.0.0.1", a.port, ready))
    return 0


if __name__ == "__main__":
    sys.exit(main())
