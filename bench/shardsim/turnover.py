"""Gang turnover for `make bench-shards --turnover F`: the scheduler's own gangs end and others take their place, so
the cluster stays full and the queues' fair shares are worked out again and again (issue 40's queue row, "each
queue's allocation within 2% of the single-replica result, hour by hour": a window here is one turnover period).

Each step (`POST /sim/turnover`, the harness's call every `--turnover-period` seconds once the gangs arrived) first
reads each queue's allocation (the CPUs of its gang pods bound: one CPU a pod, as the generator makes them), then
ends the fraction F of the gangs bound whole (their pods and PodGroup deleted, as a finished job's controller
deletes them) and creates for each a new gang of the same size in the same queue: every queue's demand stays what
it was, in proportion to its weight, above what the cluster holds. The gangs are the generated plan's
(`shardsim/cluster.py`); a gang's pods are `<gang>-<m>`, so nothing is decoded to count them."""

from __future__ import annotations

import contextlib
import random
from dataclasses import replace
from typing import Any

from shardsim.cluster import NS, PG_GV, Gang, create_gangs, gang_shard
from shardsim.store import ApiError, Store


class Turnover:
    def __init__(self, store: Store, plan: list[Gang], replicas: int, active: bool, seed: int = 1) -> None:
        self.store = store
        self.pods = store.kind("v1", "pods")
        self.groups = store.kind(PG_GV, "podgroups")
        self.gangs = list(plan)  # the gangs now in the cluster, as made
        self.replicas, self.active = replicas, active
        self.draw = random.Random(seed)
        self.made = 0
        self.ended = 0

    def _bound(self, gang: Gang) -> int:
        n = 0
        for m in range(gang.size):
            e = self.pods.objects.get(f"{NS}/{gang.name}-{m}")
            if e is not None and e.fields.get("spec.nodeName"):
                n += 1
        return n

    def allocation(self) -> dict[str, float]:
        """CPUs of each queue's gang pods bound now (each pod asks for one)."""
        out: dict[str, float] = {}
        for gang in self.gangs:
            out[gang.queue] = out.get(gang.queue, 0.0) + self._bound(gang)
        return dict(sorted(out.items()))

    def step(self, fraction: float) -> dict[str, Any]:
        """Each queue's allocation, then round(fraction x the gangs bound whole) of them ended and replaced."""
        if not 0 <= fraction <= 1:
            raise ValueError(f"fraction must be in [0, 1], got {fraction}")
        before = self.allocation()
        whole = [i for i, g in enumerate(self.gangs) if self._bound(g) == g.size]
        ending = self.draw.sample(whole, min(len(whole), round(fraction * len(whole))))
        self.store.writer = ""
        new = []
        for i in ending:
            gang = self.gangs[i]
            for m in range(gang.size):
                with contextlib.suppress(ApiError):  # (gone meanwhile: nothing to delete)
                    self.store.delete(self.pods, NS, f"{gang.name}-{m}")
            with contextlib.suppress(ApiError):
                self.store.delete(self.groups, NS, gang.name)
            self.made += 1
            name = f"t{self.made}"
            shard = gang_shard(name, self.replicas) if self.active else gang.shard
            self.gangs[i] = replace(gang, name=name, shard=shard)
            new.append(self.gangs[i])
        create_gangs(self.store, new)
        self.ended += len(ending)
        return {"allocation": before, "ended": len(ending), "total": self.ended}
