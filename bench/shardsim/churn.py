"""Churn for `make bench-shards --churn F`: another scheduler's running pods replaced as the run goes, as a busy
cluster's pods finish and others take their place (kube-scheduler's scheduler_perf calls its family "churn").

Each step (`POST /sim/churn`, the harness's call every `--churn-period` seconds once the gangs arrived) replaces
the fraction F of those pods: a new pod, of the same requests, is created on the same node, then the old one is
deleted. So a node's room never grows while the replicas bind (no step can make the other scheduler's pods
over-commit a node the replicas filled meanwhile), and every replica's watch carries two events per pod replaced,
each a pod of a new name: what a replica keeps of them (cache/scope.py), stores, parses and drops is measured."""

from __future__ import annotations

import contextlib
import random
from typing import Any

import orjson

from shardsim.cluster import NS, pod_doc
from shardsim.store import ApiError, Store

OTHER = "default-scheduler"


class Churn:
    def __init__(self, store: Store, seed: int = 1) -> None:
        self.store = store
        self.pods = store.kind("v1", "pods")
        self.names: list[str] | None = None  # the running pods of the other scheduler, by name, as replaced
        self.draw = random.Random(seed)
        self.made = 0
        self.replaced = 0

    def step(self, fraction: float) -> dict[str, Any]:
        """Replace round(fraction x the other scheduler's running pods) of them."""
        if not 0 <= fraction <= 1:
            raise ValueError(f"fraction must be in [0, 1], got {fraction}")
        if self.names is None:  # once: the cluster's running pods of the other scheduler (`run-<j>`)
            self.names = [key.split("/", 1)[1] for key in self.pods.objects if key.startswith(f"{NS}/run-")]
        names = self.names
        count = min(len(names), round(fraction * len(names)))
        self.store.writer = ""
        done = 0
        for _ in range(count):
            i = self.draw.randrange(len(names))
            entry = self.pods.objects.get(f"{NS}/{names[i]}")
            if entry is None:
                continue
            doc = orjson.loads(entry.data)
            spec = doc.get("spec") or {}
            requests = ((spec.get("containers") or [{}])[0].get("resources") or {}).get("requests") or {}
            self.made += 1
            name = f"run-c{self.made}"
            self.store.create(self.pods, NS, pod_doc(name, OTHER, dict(requests), node=str(spec.get("nodeName"))))
            with contextlib.suppress(ApiError):  # (gone meanwhile: nothing to delete)
                self.store.delete(self.pods, NS, names[i])
            names[i] = name
            done += 1
        self.replaced += done
        return {"replaced": done, "total": self.replaced}
