"""Layer `controllers`: every HyperNode's `status.nodeCount`, kept as Volcano's hypernode controller keeps it
(pkg/controllers/hypernode/hypernode_handler.go `syncHyperNodeStatus`, `actualNodeCnt`; the selectors as
pkg/util/hypernode/member_selector.go `GetMembers` reads them). No I/O here: the discovery worker writes.

The count is the number of distinct names the members' selectors give, whatever the member's type:
- an `exactMatch` gives its name, whether or not such a node exists (so a tier-2 HyperNode of three HyperNodes
  counts 3, as in Volcano); an empty name makes the whole selector give nothing;
- a `regexMatch` gives the nodes whose name it matches anywhere (Go's `MatchString`, unanchored);
- a `labelMatch` gives the nodes whose labels it selects; one with neither matchLabels nor matchExpressions adds
  nothing;
- a selector whose pattern RE2 (Go's regexp) refuses or whose label selector is invalid gives nothing at all;
  patterns match in linear time (api/member_pattern.py).

Every HyperNode is counted, discovered or hand-written; the count is written only when it differs from
`status.nodeCount`. Volcano recounts when a HyperNode is added or updated; volcano-py also when a node comes, goes
or is relabelled (a regexMatch or labelMatch member follows its nodes), which gives the same value Volcano would
write at its next HyperNode update.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.api.member_pattern import MemberPattern, PatternError, compile_member_pattern
from scheduler.api.selectors import LabelSelector, Requirement

MAX_MEMBERS = 10_000
MAX_NODE_COUNT = 2**63 - 1  # the CRD's int64
_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})  # metav1.LabelSelectorAsSelector's


@dataclass(frozen=True, slots=True)
class Selector:
    """One member's selector, parsed once. `void`: it gives no name (an empty exactMatch name, a pattern that
    does not compile, an invalid label selector)."""

    exact: str | None = None
    pattern: MemberPattern | None = None
    labels: LabelSelector | None = None
    void: bool = False

    @property
    def needs_nodes(self) -> bool:
        return not self.void and (self.pattern is not None or self.labels is not None)

    def selects(self, name: str, labels: Mapping[str, str] | None) -> bool:
        """Whether the node `name` with `labels` (None: there is no such node) is among the nodes it gives."""
        if self.void or labels is None:
            return False
        return bool(self.pattern is not None and self.pattern.search(name)) or (
            self.labels is not None and self.labels.matches(labels))

    def names(self, nodes: Mapping[str, Mapping[str, str]]) -> set[str]:
        if self.void:
            return set()
        out = {self.exact} if self.exact is not None else set()
        if self.pattern is not None:
            out.update(n for n in nodes if self.pattern.search(n))
        if self.labels is not None:
            out.update(n for n, labels in nodes.items() if self.labels.matches(labels))
        return out


@dataclass(frozen=True, slots=True)
class Counted:
    """A HyperNode as the count reads it: its selectors and the `status.nodeCount` it carries (None: none, or
    one that is not a count, so any count is written)."""

    selectors: tuple[Selector, ...]
    status: int | None

    @property
    def needs_nodes(self) -> bool:
        return any(s.needs_nodes for s in self.selectors)

    def moved_by(self, name: str, before: Mapping[str, str] | None, after: Mapping[str, str] | None) -> bool:
        """Whether a node's change (None: absent before, or after) may change the count: a selector that reads
        nodes took it in or let it go."""
        return any(s.needs_nodes and s.selects(name, before) != s.selects(name, after) for s in self.selectors)

    def count(self, nodes: Mapping[str, Mapping[str, str]]) -> int:
        names: set[str] = set()
        for selector in self.selectors:
            names |= selector.names(nodes)
        return len(names)


def parse_selector(raw: Any) -> Selector:
    if not isinstance(raw, Mapping):
        return Selector(void=True)
    exact, pattern, labels = raw.get("exactMatch"), raw.get("regexMatch"), raw.get("labelMatch")
    name = None
    if exact is not None:
        name = exact.get("name") if isinstance(exact, Mapping) else None
        if not isinstance(name, str) or not name:
            return Selector(void=True)
    compiled = None
    if pattern is not None:
        try:
            compiled = compile_member_pattern(pattern.get("pattern") if isinstance(pattern, Mapping) else None)
        except PatternError:  # Go's regexp refuses it too (api/member_pattern.py: RE2)
            return Selector(void=True)
    selector = None
    if labels is not None:
        selector, ok = _label_selector(labels)
        if not ok:
            return Selector(void=True)
    return Selector(name, compiled, selector)


def _label_selector(raw: Any) -> tuple[LabelSelector | None, bool]:
    """(the selector or None when it selects nothing, valid)."""
    if not isinstance(raw, Mapping):
        return None, False
    match_labels, expressions = raw.get("matchLabels") or {}, raw.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
        return None, False
    if not match_labels and not expressions:
        return None, True
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in match_labels.items()):
        return None, False
    requirements = []
    for item in expressions:
        if not isinstance(item, Mapping):
            return None, False
        key, operator, values = item.get("key"), item.get("operator"), item.get("values") or []
        if not isinstance(key, str) or operator not in _SELECTOR_OPERATORS or not isinstance(values, list):
            return None, False
        if not all(isinstance(v, str) for v in values):
            return None, False
        if (operator in ("In", "NotIn")) != bool(values):  # In/NotIn need values, Exists/DoesNotExist none
            return None, False
        requirements.append(Requirement(key, str(operator), tuple(values)))
    return LabelSelector(tuple(sorted(match_labels.items())), tuple(requirements)), True


def counted(obj: Mapping[str, Any]) -> Counted | None:
    """A HyperNode as the count reads it; None when its members are not a list of at most MAX_MEMBERS."""
    spec = obj.get("spec")
    members = spec.get("members") if isinstance(spec, Mapping) else None
    if members is None:
        members = []
    if not isinstance(members, list) or len(members) > MAX_MEMBERS:
        return None
    selectors = tuple(parse_selector(m.get("selector") if isinstance(m, Mapping) else None) for m in members)
    status = obj.get("status")
    value = status.get("nodeCount") if isinstance(status, Mapping) else None
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_NODE_COUNT
    return Counted(selectors, value if ok else None)


class NodeCounts:
    """The HyperNodes and nodes the count needs, fed by watch events, and which HyperNodes are due a recount."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hypernodes: dict[str, Counted] = {}
        self._pending: set[str] = set()

    def on_hypernode(self, kind: str | None, name: str, obj: Mapping[str, Any]) -> bool:
        """True when the HyperNode is due a recount."""
        with self._lock:
            if kind == "DELETED":
                self._hypernodes.pop(name, None)
                self._pending.discard(name)
                return False
            seen = counted(obj)
            if seen is None:
                self._hypernodes.pop(name, None)
                return False
            self._hypernodes[name] = seen
            self._pending.add(name)
            return True

    def on_nodes_changed(self, name: str, before: Mapping[str, str] | None, after: Mapping[str, str] | None) -> bool:
        """A node came (`before` None), went (`after` None) or was relabelled: the HyperNodes whose selectors take
        it in or let it go are due a recount (only those: a node event costs one match per selector, not a
        recount of every HyperNode over every node). True when some are."""
        with self._lock:
            due = {h_name for h_name, h in self._hypernodes.items() if h.moved_by(name, before, after)}
            self._pending |= due
            return bool(due)

    def due(self, nodes: Mapping[str, Mapping[str, str]]) -> list[tuple[str, int]]:
        """(name, count) for each pending HyperNode whose count differs from its status; the pending are taken."""
        with self._lock:
            pending, self._pending = self._pending, set()
            out = []
            for name in sorted(pending):
                h = self._hypernodes.get(name)
                if h is None:
                    continue
                count = h.count(nodes)
                if count != h.status:
                    out.append((name, count))
            return out

    def written(self, name: str, count: int) -> None:
        with self._lock:
            h = self._hypernodes.get(name)
            if h is not None:
                self._hypernodes[name] = Counted(h.selectors, count)

    def again(self, names: Iterable[str]) -> None:
        with self._lock:
            self._pending.update(n for n in names if n in self._hypernodes)

    @property
    def pending(self) -> bool:
        with self._lock:
            return bool(self._pending)
