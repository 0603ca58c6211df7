"""Layer `controllers`: node labels -> the HyperNodes discovery wants, and the writes that get there (no I/O).

Follows Volcano's label discoverer (pkg/controllers/hypernode/discovery/label/label.go `generateHyperNodeInfo`,
`buildHyperNodeName`, `buildHyperNodes`) and the controller's reconcile (hypernode_controller.go
`reconcileTopology`, utils/utils.go):
- per node and topology, tiers are walked from tier 1 up and the walk stops at the first label the node lacks;
  tier 1's members are nodes, a higher tier's the HyperNodes of the tier below;
- one HyperNode per (label key, value), whichever topology reaches it first (topologies in name order here);
- `metadata.labels` = {volcano.sh/network-topology-source: label, <key>: <value>}, `spec.tier` = the tier,
  `spec.tierName` = the label key, members sorted by name, each an exactMatch;
- the name: an existing label-made HyperNode carrying <key>=<value> whose name starts with
  `hypernode-<topology>-tier<N>` (the first by name) keeps it, so a restart or a new leader updates rather than
  recreates; else `hypernode-<topology>-tier<N>-<5 random characters>`;
- HyperNodes marked with that source and not wanted are deleted; unmarked ones are never touched.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.controllers.hypernode_conf import LabelTopology

SOURCE_KEY = "volcano.sh/network-topology-source"  # api/types.go NetworkTopologySourceLabelKey
SOURCE = "label"  # the label discoverer's Name()
API_VERSION = "topology.volcano.sh/v1alpha1"
NAME_ATTEMPTS = 20  # label.go loopCount
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery util/rand.String's alphabet


class NamingError(RuntimeError):
    """No free random name after NAME_ATTEMPTS tries."""


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    labels: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class HyperNodeView:
    """An existing HyperNode as discovery reads it: `spec` as stored, for the no-op comparison."""

    name: str
    labels: Mapping[str, str]
    spec: Any
    raw: Mapping[str, Any]

    @property
    def ours(self) -> bool:
        return self.labels.get(SOURCE_KEY) == SOURCE


@dataclass(slots=True)
class Wanted:
    name: str
    tier: int
    tier_name: str
    labels: dict[str, str]
    members: set[str] = field(default_factory=set)

    def spec(self) -> dict[str, Any]:
        kind = "Node" if self.tier == 1 else "HyperNode"
        return {"tier": self.tier, "tierName": self.tier_name,
                "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in sorted(self.members)]}

    def manifest(self) -> dict[str, Any]:
        return {"apiVersion": API_VERSION, "kind": "HyperNode",
                "metadata": {"name": self.name, "labels": dict(self.labels)}, "spec": self.spec()}


@dataclass(frozen=True, slots=True)
class Plan:
    create: tuple[dict[str, Any], ...]
    update: tuple[dict[str, Any], ...]  # whole objects to PUT (resourceVersion kept)
    delete: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not (self.create or self.update or self.delete)


def random_suffix(rng: random.Random, n: int = 5) -> str:
    return "".join(rng.choice(_ALPHANUMS) for _ in range(n))


class _Namer:
    def __init__(self, existing: Iterable[HyperNodeView], rng: random.Random):
        self.existing = sorted(existing, key=lambda h: h.name)
        self.taken = {h.name for h in self.existing}
        self.rng = rng

    def name(self, topology: LabelTopology, key: str, value: str, tier: int, planned: Mapping[str, Wanted]) -> str:
        prefix = f"hypernode-{topology.cleaned}-tier{tier}"
        for h in self.existing:
            if h.ours and h.labels.get(key) == value and h.name.startswith(prefix):
                return h.name
        for _ in range(NAME_ATTEMPTS):
            candidate = f"{prefix}-{random_suffix(self.rng)}"
            if candidate not in self.taken and candidate not in planned:
                return candidate
        raise NamingError(f"no free HyperNode name {prefix}-* after {NAME_ATTEMPTS} attempts")


def wanted(topologies: Iterable[LabelTopology], nodes: Iterable[NodeView], existing: Iterable[HyperNodeView],
           rng: random.Random) -> dict[str, Wanted]:
    """The HyperNodes the labels describe, by name."""
    topologies = tuple(topologies)
    namer = _Namer(existing, rng)
    by_label: dict[tuple[str, str], str] = {}
    out: dict[str, Wanted] = {}
    for node in sorted(nodes, key=lambda n: n.name):
        for topology in topologies:
            member = node.name
            for index, key in enumerate(topology.tiers):
                value = node.labels.get(key)
                if value is None:
                    break
                tier = index + 1
                name = by_label.get((key, value))
                if name is None:
                    name = namer.name(topology, key, value, tier, out)
                    by_label[(key, value)] = name
                if name not in out:
                    out[name] = Wanted(name, tier, key, {SOURCE_KEY: SOURCE, key: value})
                out[name].members.add(member)
                member = name
    return out


def plan(want: Mapping[str, Wanted], existing: Iterable[HyperNodeView]) -> Plan:
    """The writes from `existing` to `want`: create the missing, update those whose spec or labels differ (spec
    replaced, labels merged, as utils.go UpdateHyperNode), delete ours that are not wanted."""
    existing_by_name = {h.name: h for h in existing}
    create, update = [], []
    for name in sorted(want):
        w = want[name]
        have = existing_by_name.get(name)
        if have is None:
            create.append(w.manifest())
            continue
        spec = w.spec()
        missing = {k: v for k, v in w.labels.items() if have.labels.get(k) != v}
        if have.spec != spec or missing:
            obj = dict(have.raw)
            meta = dict(obj.get("metadata") or {})
            meta["name"], meta["labels"] = name, {**have.labels, **w.labels}
            obj["metadata"], obj["spec"] = meta, spec
            update.append(obj)
    delete = sorted(h.name for h in existing_by_name.values() if h.ours and h.name not in want)
    return Plan(tuple(create), tuple(update), tuple(delete))


def node_view(obj: Any) -> NodeView | None:
    """A Node as discovery reads it; None for one without a name or with labels that are not strings."""
    if not isinstance(obj, dict):
        return None
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        return None
    labels = _labels(meta)
    return None if labels is None else NodeView(meta["name"], labels)


def hypernode_view(obj: Any) -> HyperNodeView | None:
    if not isinstance(obj, dict):
        return None
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        return None
    labels = _labels(meta)
    return None if labels is None else HyperNodeView(meta["name"], labels, obj.get("spec"), obj)


def _labels(meta: Mapping[str, Any]) -> dict[str, str] | None:
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        return None
    return dict(labels)
