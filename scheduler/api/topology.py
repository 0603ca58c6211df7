"""Layer `api`: topology domains by node label, the one model that inter-pod affinity, topology spread and the
solver's tiers read.

Nodes are known by their position (the session's `node_list` order). For a label key, the nodes that share a
value form one domain, whatever the key (as a Kubernetes `topologyKey` means it): `LabelDomains` maps each
position to its domain id (`NO_DOMAIN` where the node lacks the label) and each id back to the label value.
`NodeDomains` builds one per key the first time the key is asked for and keeps it for the session, so the
nodes' labels are read once per key, not once per question. Ids are numbered in position order, so two builds
over the same nodes agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]

NO_DOMAIN = -1


@dataclass(frozen=True, slots=True)
class LabelDomains:
    """One label key's domains: `of[position]` is the node's domain id, `values[id]` the domain's label value.

    Arrays indexed by domain id may carry one extra, last slot that stays empty: `NO_DOMAIN` (-1) reads it, so
    `counts[of[positions]]` needs no mask for nodes without the label.
    """

    key: str
    of: IntArray
    values: tuple[str, ...]

    @property
    def count(self) -> int:
        return len(self.values)

    def per_node(self) -> list[str | None]:
        """Per position, the node's label value (None where it has none)."""
        values = self.values
        return [values[d] if d != NO_DOMAIN else None for d in self.of.tolist()]


class NodeDomains:
    """Per label key, the domains of a fixed list of nodes (given by their labels, in position order)."""

    __slots__ = ("_labels", "_by_key")

    def __init__(self, labels: Sequence[Mapping[str, str]]) -> None:
        self._labels = labels
        self._by_key: dict[str, LabelDomains] = {}

    def key(self, key: str) -> LabelDomains:
        """The domains of `key`, built on first use."""
        domains = self._by_key.get(key)
        if domains is None:
            domains = self._by_key[key] = _build(key, self._labels)
        return domains


def _build(key: str, labels: Sequence[Mapping[str, str]]) -> LabelDomains:
    index: dict[str, int] = {}
    of = np.full(len(labels), NO_DOMAIN, dtype=np.int64)
    for position, node_labels in enumerate(labels):
        value = node_labels.get(key)
        if value is not None:
            of[position] = index.setdefault(value, len(index))
    return LabelDomains(key, of, tuple(index))
