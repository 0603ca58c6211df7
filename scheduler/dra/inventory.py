"""Layer `dra`: the devices each node reaches, from the ResourceSlices.

A pool's devices are those of its newest generation (slices of an older one are being replaced by the driver
and are ignored, as the structured allocator does); a slice is local to one node (`nodeName`), reaches the
nodes its `nodeSelector` selects, or every node (`allNodes`). Devices are identified by (driver, pool, device).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scheduler.api.dra import Device, DeviceId, ResourceSlice

LOCAL, SELECTED, EVERYWHERE = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Candidate:
    id: DeviceId
    device: Device
    driver: str
    slice: ResourceSlice

    @property
    def reach(self) -> int:
        if self.slice.node_name:
            return LOCAL
        return EVERYWHERE if self.slice.all_nodes else SELECTED


class Inventory:
    """The devices per node (computed once per node and kept), and the pools whose newest generation has fewer
    slices than it says (`incomplete`)."""

    def __init__(self, slices: Iterable[ResourceSlice]) -> None:
        newest: dict[tuple[str, str], int] = {}
        all_slices = list(slices)
        for s in all_slices:
            key = (s.driver, s.pool)
            newest[key] = max(newest.get(key, s.generation), s.generation)
        self._local: dict[str, list[Candidate]] = {}
        self._wide: list[Candidate] = []
        counts: dict[tuple[str, str], tuple[int, int]] = {}
        seen: set[DeviceId] = set()
        for s in sorted(all_slices, key=lambda s: s.name):
            key = (s.driver, s.pool)
            if s.generation != newest[key]:
                continue
            have, want = counts.get(key, (0, s.slice_count))
            counts[key] = (have + 1, want)
            for d in s.devices:
                ident = DeviceId(s.driver, s.pool, d.name)
                if ident in seen:  # one device published twice: the first slice (by name) wins
                    continue
                seen.add(ident)
                cand = Candidate(ident, d, s.driver, s)
                if s.node_name:
                    self._local.setdefault(s.node_name, []).append(cand)
                else:
                    self._wide.append(cand)
        self.incomplete = frozenset(k for k, (have, want) in counts.items() if have < want)
        self._per_node: dict[str, tuple[Candidate, ...]] = {}
        self.by_id = {c.id: c for cands in (*self._local.values(), self._wide) for c in cands}

    def devices(self, node: str, labels: Mapping[str, str]) -> tuple[Candidate, ...]:
        """The devices `node` reaches, node-local ones first, each in a stable order."""
        out = self._per_node.get(node)
        if out is None:
            wide = [c for c in self._wide if c.slice.on_node(node, labels)]
            out = self._per_node[node] = (*self._local.get(node, ()), *wide)
        return out
