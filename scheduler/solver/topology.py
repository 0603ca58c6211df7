"""Layer `solver`: the cluster's topology as a tree, node -> NVLink domain -> rack -> zone -> cluster.

Tier 0 is the node itself; tiers 1..k are HyperNode tiers (`spec.tier`) or, without HyperNodes, the label
tiers 1 = NVLink domain / host, 2 = rack, 3 = zone; the last tier (k + 1) is the whole cluster. A node with no
domain at a tier (a missing label, no HyperNode above it at that tier) is its own domain there.

The hot path never walks the tree: `domain[t, i]` is node i's domain id at tier t, so the tier two nodes first
share is a few integer comparisons, and "which racks does this placement touch" is one `np.unique`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from scheduler.api.member_pattern import MemberPattern, PatternError, compile_member_pattern
from scheduler.api.topology import NodeDomains

if TYPE_CHECKING:
    import networkx as nx  # type: ignore[import-untyped, unused-ignore]

IntArray = npt.NDArray[np.int64]

NVLINK, RACK, ZONE = 1, 2, 3
TIER_NAMES = {0: "node", NVLINK: "NVLink domain", RACK: "rack", ZONE: "zone"}


@dataclass(frozen=True, slots=True)
class TopologyLabels:
    """Node labels naming a node's domain per tier (the plugin arguments `topology.*Label`)."""

    zone: str = "topology.kubernetes.io/zone"
    rack: str = "volcano.sh/rack"
    nvlink: tuple[str, ...] = ("volcano.sh/nvlink-domain", "nvidia.com/gpu.clique")


@dataclass(slots=True)
class Topology:
    """Per-tier domain ids for nodes in a fixed order (the session's `node_list`)."""

    node_names: list[str]
    domain: IntArray  # (tiers, nodes): tier 0 = node index, last tier = 0 for every node
    domain_names: list[list[str]]  # per tier, the name of each domain id
    tier_names: dict[int, str] = field(default_factory=dict)
    _graph: nx.DiGraph | None = None

    @property
    def top(self) -> int:
        """The cluster tier: every node shares it."""
        return int(self.domain.shape[0]) - 1

    def tier_name(self, tier: int) -> str:
        if tier >= self.top:
            return "cluster"
        return self.tier_names.get(tier, f"tier-{tier} domain")

    def distance(self, a: int, b: int) -> int:
        """The lowest tier at which nodes a and b (indices) share a domain: 0 for the same node."""
        column_a, column_b = self.domain[:, a], self.domain[:, b]
        return int(np.argmax(column_a == column_b))

    def span_tier(self, nodes: IntArray) -> int:
        """The lowest tier at which all the given nodes share one domain (0 for one node, -1 for none)."""
        if nodes.size == 0:
            return -1
        sub = self.domain[:, nodes]
        same = (sub == sub[:, :1]).all(axis=1)
        return int(np.argmax(same))

    def redundant(self, tier: int) -> bool:
        """True when the tier's domains are exactly those of the tier below (no NVLink labels: every node is its
        own NVLink domain), so counting them counts the lower tier's again. The tiers nest, so equal numbers
        of domains mean equal domains."""
        if tier <= 0 or self.domain.shape[1] == 0:
            return False
        return int(self.domain[tier].max()) == int(self.domain[tier - 1].max())

    def domains_spanned(self, nodes: IntArray, tier: int) -> int:
        return int(np.unique(self.domain[tier, nodes]).size) if nodes.size else 0

    @property
    def graph(self) -> nx.DiGraph:
        """The tree itself (built on first use): edges point from a domain down to its members."""
        if self._graph is None:
            import networkx as nx  # only when someone asks for the tree: it costs 0.1 s at start-up

            graph = nx.DiGraph()
            root = ("cluster", self.top, 0)
            graph.add_node(root, tier=self.top, name="cluster")
            for i, _name in enumerate(self.node_names):
                parent = root
                for tier in range(self.top - 1, -1, -1):
                    ident = int(self.domain[tier, i])
                    key = (self.domain_names[tier][ident], tier, ident)
                    if key not in graph:
                        graph.add_node(key, tier=tier, name=self.domain_names[tier][ident])
                        graph.add_edge(parent, key)
                    parent = key
            self._graph = graph
        return self._graph


def _ids(keys: Sequence[str]) -> tuple[IntArray, list[str]]:
    index: dict[str, int] = {}
    out = np.empty(len(keys), dtype=np.int64)
    for i, key in enumerate(keys):
        out[i] = index.setdefault(key, len(index))
    return out, list(index)


def from_labels(
    node_names: Sequence[str], labels: Sequence[Mapping[str, str]], names: TopologyLabels = TopologyLabels()
) -> Topology:
    """Tiers from node labels (`from_domains` over the nodes' label domains)."""
    return from_domains(node_names, NodeDomains(labels), names)


def from_domains(
    node_names: Sequence[str], domains: NodeDomains, names: TopologyLabels = TopologyLabels()
) -> Topology:
    """Tiers from the label domains of the nodes (the session's `domains`, shared with the affinity predicates);
    a node with no label for a tier and none below is its own domain there.

    Domains are nested: a rack named r in zone z is the domain "z/r", so equal rack names in different zones
    stay different racks; a rack with no zone label is its own zone. The NVLink domain is the first of the
    `nvlink` labels the node has.
    """
    tiers: list[list[str]] = [list(node_names)]
    zone = domains.key(names.zone).per_node()
    rack = domains.key(names.rack).per_node()
    nvlink = _first_present([domains.key(k).per_node() for k in names.nvlink], len(node_names))
    zone_keys, rack_keys, nv_keys = [], [], []
    for n, z, r, v in zip(node_names, zone, rack, nvlink, strict=True):
        # A missing tier is the next lower domain (a rack with no zone label is its own zone), so the tiers
        # stay a tree; with no label at all the node is its own domain.
        lower = f"rack:{r}" if r is not None else f"nvlink:{v}" if v is not None else f"node:{n}"
        zone_key = f"zone:{z}" if z is not None else lower
        rack_key = (
            f"{zone_key}/rack:{r}" if r is not None else (f"{zone_key}/nvlink:{v}" if v is not None else f"node:{n}")
        )
        zone_keys.append(zone_key)
        rack_keys.append(rack_key)
        nv_keys.append(f"{rack_key}/nvlink:{v}" if v is not None else f"node:{n}")
    tiers += [nv_keys, rack_keys, zone_keys, ["cluster"] * len(node_names)]
    return _assemble(node_names, tiers, dict(TIER_NAMES))


def _first_present(columns: Sequence[Sequence[str | None]], size: int) -> list[str | None]:
    """Per node, the first value any column has for it."""
    out: list[str | None] = [None] * size
    for column in reversed(columns):
        out = [v if v is not None else o for v, o in zip(column, out, strict=True)]
    return out


def _assemble(node_names: Sequence[str], tiers: list[list[str]], tier_names: dict[int, str]) -> Topology:
    domain = np.empty((len(tiers), len(node_names)), dtype=np.int64)
    domain_names: list[list[str]] = []
    for t, keys in enumerate(tiers):
        domain[t], names = _ids(keys)
        domain_names.append(names)
    return Topology(list(node_names), domain, domain_names, tier_names)


# ---- HyperNodes ---------------------------------------------------------------------------------------


def tier_names(hypernodes: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """`spec.tierName` -> `spec.tier` (Volcano's HyperNodeTierNameMap; a name on two tiers: the last by name)."""
    names: dict[str, int] = {}
    for h in sorted(hypernodes, key=lambda h: str((h.get("metadata") or {}).get("name", ""))):
        spec = h.get("spec") or {}
        if spec.get("tierName"):
            names[str(spec["tierName"])] = int(spec.get("tier", 1))
    return names


def _matched(member: Mapping[str, Any], candidates: Sequence[str], known: set[str]) -> Sequence[str]:
    """The candidates `member` selects, in their order: an exactMatch by lookup (a HyperNode of thousands of
    exact members is not matched against every node), a pattern by matching each."""
    exact = ((member.get("selector") or {}).get("exactMatch") or {}).get("name")
    if exact is not None:
        return (exact,) if type(exact) is str and exact in known else ()
    return [c for c in candidates if _member_matches(member, c)]


def _member_matches(member: Mapping[str, Any], candidate: str) -> bool:
    selector = member.get("selector") or {}
    exact = (selector.get("exactMatch") or {}).get("name")
    if exact is not None:
        return bool(exact == candidate)
    pattern = (selector.get("regexMatch") or {}).get("pattern")
    if pattern is not None:
        compiled = _pattern(pattern)
        return compiled is not None and compiled.search(candidate) is not None  # unanchored, as Go's MatchString
    return False


@functools.lru_cache(maxsize=4096)
def _pattern(text: str) -> MemberPattern | None:
    """RE2, as Go's regexp (api/member_pattern.py): linear time; a pattern it refuses selects nothing."""
    try:
        return compile_member_pattern(text)
    except PatternError:
        return None


def from_hypernodes(node_names: Sequence[str], hypernodes: Sequence[Mapping[str, Any]]) -> Topology:
    """Tiers from HyperNode objects (`spec.tier`, `spec.members` of type Node or HyperNode).

    Each node's ancestor at each tier is found by walking up from the HyperNodes that list it; a node with no
    ancestor at a tier is its own domain there. The tier above the highest HyperNode tier is the cluster.
    """
    tier_of: dict[str, int] = {}
    parent_of: dict[str, str] = {}  # HyperNode -> HyperNode that lists it
    node_parent: dict[str, str] = {}
    hyper_names = [str((h.get("metadata") or {}).get("name", "")) for h in hypernodes]
    for h, name in zip(hypernodes, hyper_names, strict=True):
        tier_of[name] = int((h.get("spec") or {}).get("tier", 1))
    known_hyper, known_nodes = set(hyper_names), set(node_names)
    for h, name in zip(hypernodes, hyper_names, strict=True):
        for member in (h.get("spec") or {}).get("members") or []:
            if member.get("type", "Node") == "HyperNode":
                for child in _matched(member, hyper_names, known_hyper):
                    if child != name:
                        parent_of.setdefault(child, name)
            else:
                for node in _matched(member, node_names, known_nodes):
                        # the lowest-tier HyperNode listing a node is its direct parent
                        current = node_parent.get(node)
                        if current is None or tier_of[name] < tier_of[current]:
                            node_parent[node] = name
    highest = max(tier_of.values(), default=0)
    tiers: list[list[str]] = [list(node_names)]
    per_tier: list[list[str]] = [[] for _ in range(highest)]
    for node in node_names:
        at: dict[int, str] = {}
        hyper = node_parent.get(node)
        seen: set[str] = set()
        while hyper is not None and hyper not in seen:
            seen.add(hyper)
            at.setdefault(tier_of[hyper], hyper)
            hyper = parent_of.get(hyper)
        for t in range(1, highest + 1):
            per_tier[t - 1].append(at.get(t, f"node:{node}"))
    tiers += per_tier
    tiers.append(["cluster"] * len(node_names))
    names = {t: f"tier-{t} HyperNode" for t in range(1, highest + 1)}
    names[0] = "node"
    return _assemble(node_names, tiers, names)
