"""Layer `api`: Kubernetes' label and node selectors as values: a pod's node affinity and affinity terms, a
PersistentVolume's node affinity, a StorageClass's allowed topologies and a claim's volume selector use them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        op = self.operator
        if op == "In":
            return present and value in self.values
        if op == "NotIn":
            return not present or value not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if op in ("Gt", "Lt") and present and self.values:
            try:
                left, right = int(value or ""), int(self.values[0])
            except ValueError:
                return False
            return left > right if op == "Gt" else left < right
        return False


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements ANDed together; a term with none matches nothing (as in Kubernetes)."""

    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False
        fields = {"metadata.name": node_name}
        return all(r.matches(labels) for r in self.match_expressions) and all(
            r.matches(fields) for r in self.match_fields
        )


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector: matchLabels and matchExpressions ANDed; an empty selector matches everything."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            r.matches(labels) for r in self.match_expressions
        )


def requirements(raw: object) -> tuple[Requirement, ...]:
    out = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, Mapping):
            out.append(
                Requirement(
                    str(item.get("key", "")),
                    str(item.get("operator", "In")),
                    tuple(str(v) for v in item.get("values") or ()),
                )
            )
    return tuple(out)


def node_selector_terms(selector: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...]:
    """The terms of a v1.NodeSelector (`nodeSelectorTerms`): a pod's required node affinity, a volume's."""
    return tuple(
        NodeSelectorTerm(requirements(t.get("matchExpressions")), requirements(t.get("matchFields")))
        for t in selector.get("nodeSelectorTerms") or ()
        if isinstance(t, Mapping)
    )


def label_selector(raw: object) -> LabelSelector:
    """A metav1.LabelSelector (a pod affinity term's, a claim's volume selector); not a map: matches everything."""
    if not isinstance(raw, Mapping):
        return LabelSelector()
    labels = raw.get("matchLabels") or {}
    return LabelSelector(
        tuple(sorted((str(k), str(v)) for k, v in labels.items())) if isinstance(labels, Mapping) else (),
        requirements(raw.get("matchExpressions")),
    )
