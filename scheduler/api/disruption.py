"""Layer `api`: PodDisruptionBudgets (policy/v1) as the `pdb` plugin reads them, each field parsed once here.

What the plugin needs of a PDB, as Volcano's pdb plugin reads it (pkg/scheduler/plugins/pdb/pdb.go): its namespace,
its selector, `status.disruptionsAllowed` and the names in `status.disruptedPods`. Volcano turns the selector
with `metav1.LabelSelectorAsSelector` and skips a PDB whose selector that refuses, or whose selector is nil or
empty ("matches nothing"): here such a selector reads as `None`, which matches no pod. (Kubernetes' own eviction
API reads an empty policy/v1 selector as every pod of the namespace; Volcano does not, and neither do we.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.api import fields as F
from scheduler.api.selectors import LabelSelector, Requirement

F_SELECTOR = F.field("PodDisruptionBudget", "spec.selector")
F_ALLOWED = F.field("PodDisruptionBudget", "status.disruptionsAllowed")
F_DISRUPTED = F.field("PodDisruptionBudget", "status.disruptedPods")
F_NAME = F.field("PodDisruptionBudget", "metadata.name")
F_NAMESPACE = F.field("PodDisruptionBudget", "metadata.namespace")

# The operators LabelSelectorAsSelector accepts, and whether each takes values (k8s.io/apimachinery labels
# NewRequirement: In/NotIn need at least one, Exists/DoesNotExist none).
_OPERATORS = {"In": True, "NotIn": True, "Exists": False, "DoesNotExist": False}


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    namespace: str
    name: str
    selector: LabelSelector | None  # None: matches no pod
    allowed: int  # status.disruptionsAllowed, 0..int32
    disrupted: frozenset[str]  # status.disruptedPods: names of pods whose eviction the API already counted

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        return self.selector is not None and namespace == self.namespace and self.selector.matches(labels)


def check_selector(raw: Mapping[str, Any]) -> LabelSelector | None:
    """A policy/v1 selector as LabelSelectorAsSelector reads it: None (matches nothing) when empty;
    BadValueError when it would fail (an operator it does not know, values where none belong or none where some do)."""
    labels = raw.get("matchLabels")
    match_labels = F.LABELS.parse(labels) if labels is not None else {}
    expressions = raw.get("matchExpressions")
    if expressions is not None and not isinstance(expressions, list):
        raise F.BadValueError("matchExpressions is not a list")
    requirements = []
    for item in expressions or ():
        if not isinstance(item, Mapping):
            raise F.BadValueError("has a matchExpression that is not an object")
        key, operator, values = item.get("key"), item.get("operator"), item.get("values")
        if type(key) is not str or not key or len(key) > F.LABEL_KEY_MAX:
            raise F.BadValueError(f"has a matchExpression whose key is no label key: {F.show(key)}")
        if operator not in _OPERATORS:
            raise F.BadValueError(f"has an operator that is not In, NotIn, Exists or DoesNotExist: {F.show(operator)}")
        values = values if values is not None else []
        if not isinstance(values, list) or any(type(v) is not str or len(v) > F.LABEL_VALUE_MAX for v in values):
            raise F.BadValueError("has matchExpression values that are not label values")
        if bool(values) != _OPERATORS[operator]:
            raise F.BadValueError(f"has {operator} with {'no values' if not values else 'values'}")
        requirements.append(Requirement(key, operator, tuple(values)))
    if not match_labels and not requirements:
        return None
    return LabelSelector(tuple(sorted(match_labels.items())), tuple(requirements))


def check_disrupted(raw: Mapping[str, Any]) -> frozenset[str]:
    """The pod names of `status.disruptedPods` (the times beside them are not read)."""
    names = frozenset(raw)
    if any(type(n) is not str or len(n) > F.NAME_MAX for n in names):
        raise F.BadValueError("names a pod that is no pod name")
    return names


def budget_from_object(obj: Mapping[str, Any], sink: list[F.FieldInvalid] | None = None) -> DisruptionBudget:
    """Every field through the table; a PDB whose name or namespace cannot be read is left out (FieldError)."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise F.FieldError(F.FieldInvalid("PodDisruptionBudget", "?", "metadata", "is not an object", F.show(meta)))
    name = F_NAME.read(meta.get("name"), "?", sink)
    if name is None:
        raise F.FieldError(F.FieldInvalid("PodDisruptionBudget", "?", "metadata.name", "is missing", "null"))
    namespace = F_NAMESPACE.read(meta.get("namespace"), name, sink)
    key = f"{namespace}/{name}"
    spec, status = obj.get("spec"), obj.get("status")
    if spec is not None and not isinstance(spec, Mapping):  # what is under it reads as unreadable, with reasons
        return DisruptionBudget(namespace, name, F_SELECTOR.refuse(spec, "spec is not an object", key, sink),
                                0, frozenset())
    if status is not None and not isinstance(status, Mapping):
        status = {"disruptionsAllowed": F_ALLOWED.refuse(status, "status is not an object", key, sink)}
    spec, status = spec or {}, status or {}
    return DisruptionBudget(
        namespace=namespace,
        name=name,
        selector=F_SELECTOR.read(spec.get("selector"), key, sink),
        allowed=F_ALLOWED.read(status.get("disruptionsAllowed"), key, sink),
        disrupted=F_DISRUPTED.read(status.get("disruptedPods"), key, sink),
    )


F.register("pdb_selector", check_selector)
F.register("disrupted_pods", check_disrupted)
