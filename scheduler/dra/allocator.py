"""Layer `dra`: allocating a gang's ResourceClaims on the nodes its pods are placed on, all or nothing.

The rules, as Kubernetes' structured allocator states them (k8s.io/dynamic-resource-allocation `structured`,
used by kube-scheduler's DynamicResources plugin; Volcano: pkg/scheduler/plugins/predicates/predicates.go with
`predicate.DynamicResourceAllocationEnable`), re-stated here:

- a request takes devices its DeviceClass's selectors and its own selectors all accept (`dra/cel.py`), that the
  node reaches (`dra/inventory.py`) and that no other claim holds; `ExactCount` takes `count` of them, `All`
  takes every one the node reaches, and fails if any of those is held or if a pool the node reaches is being
  updated (its newest generation has fewer slices than `resourceSliceCount`: "all" would be a subset);
- `matchAttribute` constraints: the devices of the requests a constraint names (all when none) have one value
  of the attribute; a device without the attribute cannot be taken for them;
- admin access (a monitoring pod's view of devices others hold) is refused unless the allocator allows it;
  when allowed, such a request may take held devices and holds none;
- a claim gets at most `COUNT_MAX` (32) devices in all, as the v1 API bounds an allocation's results: one
  asking more (many requests' counts, or `All` on a node with many devices) is refused with a reason;
- a claim already allocated (shared by several pods, or allocated in an earlier cycle) is reused where its
  devices are reachable, and the pod is added to `reservedFor`; a claim from a template that the claim
  controller has not made yet is allocated as the claim the pod would get (the template's spec);
- a session's allocations are made on a `Tentative`, on top of the devices the cluster's claims hold: `place`
  takes a pod's, `release` gives back what only that pod held (a statement discarded it), `plan` is what the
  binder writes.

A claim's devices are chosen by a bounded depth-first search over the requests' candidates (taken in a stable
order: node-local devices first, then by slice name and position), so a constraint that a greedy pick would
miss is still met when some choice meets it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.api import reasons_dra as R
from scheduler.api.dra import (
    ALL,
    COUNT_MAX,
    RESERVED_FOR_MAX,
    Allocation,
    ClaimSpec,
    ClaimWrite,
    Consumer,
    DeviceClass,
    DeviceId,
    DeviceRequest,
    DeviceResult,
    PodClaims,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    qualify,
)
from scheduler.api.reason_base import Reason
from scheduler.dra.cel import SelectorError, Selectors
from scheduler.dra.inventory import LOCAL, SELECTED, Candidate, Inventory

SEARCH_STEPS_MAX = 20_000  # per claim and node: a constraint no choice meets is given up after this many picks


@dataclass(frozen=True, slots=True)
class PodRef:
    namespace: str
    name: str
    uid: str

    def consumer(self) -> Consumer:
        return Consumer("pods", self.name, self.uid)


@dataclass(slots=True)
class _Entry:
    spec: ClaimSpec
    allocation: Allocation | None
    reserved: list[Consumer]
    new_allocation: bool = False
    new_consumers: list[Consumer] = field(default_factory=list)
    template: str = ""


class Allocator:
    """The cluster's DRA state for one cycle: inventory, classes, claims, templates, the devices held."""

    def __init__(self, slices: Iterable[ResourceSlice], classes: Iterable[DeviceClass],
                 claims: Iterable[ResourceClaim], templates: Iterable[ResourceClaimTemplate] = (), *,
                 admin_access: bool = False, selectors: Selectors | None = None) -> None:
        self.inventory = Inventory(slices)
        self.classes = {c.name: c for c in classes}
        self.claims = {c.key: c for c in claims}
        self.templates = {t.key: t for t in templates}
        self.admin_access = admin_access
        self.selectors = selectors or Selectors()
        self.held: set[DeviceId] = {r.device for c in self.claims.values() if c.allocation
                                    for r in c.allocation.results if not r.admin_access}
        self._matching: dict[tuple[str, tuple[str, ...], str], tuple[Candidate, ...] | Reason] = {}

    def tentative(self) -> Tentative:
        return Tentative(self)

    def matching(self, request: DeviceRequest, node: str, labels: Mapping[str, str],
                 claim: str) -> tuple[Candidate, ...] | Reason:
        """The devices `node` reaches that the request's class and selectors accept, held or not."""
        key = (request.device_class, request.selectors, node)
        found = self._matching.get(key)
        if found is None:
            found = self._matching[key] = self._match(request, node, labels, claim)
        return found

    def _match(self, request: DeviceRequest, node: str, labels: Mapping[str, str],
               claim: str) -> tuple[Candidate, ...] | Reason:
        cls = self.classes.get(request.device_class)
        if cls is None:
            return R.DeviceClassMissing(claim, request.name, request.device_class)
        exprs = [(e, cls.name) for e in cls.selectors] + [(e, "") for e in request.selectors]
        for expr, owner in exprs:
            problem = self.selectors.problem(expr)
            if problem:
                return R.ClaimSelectorInvalid(claim, request.name, expr, problem, owner)
        out = []
        for cand in self.inventory.devices(node, labels):
            for expr, owner in exprs:
                try:
                    ok = self.selectors.matches(expr, cand.device, cand.driver)
                except SelectorError as err:
                    return R.ClaimSelectorInvalid(claim, request.name, expr, f"{err} (device {cand.id})", owner)
                if not ok:
                    break
            else:
                out.append(cand)
        return tuple(out)


class Tentative:
    """A session's allocations, on top of the allocator's: `place` a pod's claims on a node (all of them or none),
    `fits` to ask without keeping anything, `release` a pod's, `plan` what the binder writes."""

    def __init__(self, allocator: Allocator) -> None:
        self.allocator = allocator
        self.held: set[DeviceId] = set()
        self.entries: dict[str, _Entry] = {}
        # The result of a claim spec on a node (a gang's pods from one template share the spec), valid while no
        # device the node reaches was taken or given back: (spec, node version, wide version, result).
        self._remembered: dict[tuple[int, str], tuple[ClaimSpec, int, int, Allocation | Reason]] = {}
        self._node_version: dict[str, int] = {}
        self._wide_version = 0
        self._canonical: dict[ClaimSpec, ClaimSpec] = {}  # equal specs (the claims of a gang) share results
        self._same: dict[int, tuple[ClaimSpec, ClaimSpec]] = {}  # id(spec) -> (spec, its canonical equal)

    def fits(self, pod: PodRef, claims: PodClaims, node: str, labels: Mapping[str, str]) -> tuple[Reason, ...]:
        if len(claims.claims) == 1:  # the common case: a pod's one claim, not allocated yet, asked of many nodes
            ref = claims.claims[0]
            name = claims.claim_name(ref)
            key = _claim_key(pod, ref.name, name)
            spec = None
            if key not in self.entries:
                if name:
                    claim = self.allocator.claims.get(key)
                    if claim is not None and claim.allocation is None and not claim.deleting:
                        spec = claim.spec
                else:
                    tmpl = self.allocator.templates.get(f"{pod.namespace}/{ref.template}")
                    spec = tmpl.spec if tmpl is not None else None
            if spec is not None:
                result = self._allocate(key, spec, node, labels, set())
                return (result,) if isinstance(result, Reason) else ()
        return self._place(pod, claims, node, labels, keep=False)

    def place(self, pod: PodRef, claims: PodClaims, node: str, labels: Mapping[str, str]) -> tuple[Reason, ...]:
        """Allocate (or reuse) every claim of the pod for `node`; () when done, else why not (nothing kept)."""
        return self._place(pod, claims, node, labels, keep=True)

    def release(self, pod: PodRef) -> None:
        """Undo `place` for one pod (a statement discarded its task): it leaves the claims it was added to, and a
        claim this gang allocated that nobody holds any more gives its devices back."""
        me = pod.consumer()
        for key, e in list(self.entries.items()):
            if me not in e.new_consumers:
                continue
            e.new_consumers.remove(me)
            e.reserved.remove(me)
            if e.new_allocation and not e.reserved:
                assert e.allocation is not None
                self._taken_changed(r.device for r in e.allocation.results if not r.admin_access)
                self.held -= {r.device for r in e.allocation.results}
                del self.entries[key]
            elif not e.new_allocation and not e.new_consumers:
                del self.entries[key]

    def _taken_changed(self, devices: Iterable[DeviceId]) -> None:
        """Devices taken or given back: what was remembered of the nodes that reach them is stale."""
        by_id = self.allocator.inventory.by_id
        for ident in devices:
            cand = by_id[ident]
            if cand.reach == LOCAL:
                self._node_version[cand.slice.node_name] = self._node_version.get(cand.slice.node_name, 0) + 1
            else:
                self._wide_version += 1

    def plan(self) -> list[ClaimWrite]:
        out = []
        for key, e in sorted(self.entries.items()):
            if e.new_allocation or e.new_consumers:
                namespace, name = key.split("/", 1)
                out.append(ClaimWrite(namespace, name, e.allocation if e.new_allocation else None,
                                      tuple(e.new_consumers), e.template))
        return out

    # ---- one pod ----------------------------------------------------------------------------------------------

    def _place(self, pod: PodRef, claims: PodClaims, node: str, labels: Mapping[str, str], *,
               keep: bool) -> tuple[Reason, ...]:
        made: dict[str, _Entry] = {}
        taken: set[DeviceId] = set()
        last = len(claims.claims) - 1
        for i, ref in enumerate(claims.claims):
            name = claims.claim_name(ref)
            entry, problem = self._entry(pod, ref.name, ref.template, name, made)
            if problem is not None:
                return (problem,)
            assert entry is not None
            key = _claim_key(pod, ref.name, name)
            if entry.allocation is None:
                result = self._allocate(key, entry.spec, node, labels, taken)
                if isinstance(result, Reason):
                    return (result,)
                entry.allocation, entry.new_allocation = result, True
                if keep or i < last:  # a question (`fits`) about the last claim needs no record of its devices
                    taken |= {r.device for r in result.results if not r.admin_access}
            elif not entry.allocation.reachable(node, labels):
                return (R.ClaimNotReachable(key, node),)
            me = pod.consumer()  # a pod is named by its name (the binder adds its UID when the plugin has none)
            if not any(c.resource == me.resource and c.name == me.name for c in entry.reserved):
                if len(entry.reserved) >= RESERVED_FOR_MAX:
                    return (R.ClaimUnusable(key, f"holds the most consumers it may ({RESERVED_FOR_MAX})"),)
                entry.reserved.append(me)
                entry.new_consumers.append(me)
            made[key] = entry
        if keep:
            self.entries.update(made)
            self.held |= taken
            self._taken_changed(taken)
        return ()

    def _entry(self, pod: PodRef, ref_name: str, template: str, name: str,
               made: Mapping[str, _Entry]) -> tuple[_Entry | None, Reason | None]:
        """This gang's view of a claim (a copy: the pod's placement may still fail)."""
        key = _claim_key(pod, ref_name, name)
        have = made.get(key) or self.entries.get(key)
        if have is not None:
            return _Entry(have.spec, have.allocation, list(have.reserved), have.new_allocation,
                          list(have.new_consumers), have.template), None
        where = f"{pod.namespace}/{pod.name}"
        if name:
            claim = self.allocator.claims.get(key)
            if claim is None:
                return None, R.ClaimMissing(where, name)
            if claim.deleting:
                return None, R.ClaimUnusable(key, "is being deleted")
            return _Entry(claim.spec, claim.allocation, list(claim.reserved_for)), None
        tmpl = self.allocator.templates.get(f"{pod.namespace}/{template}")
        if tmpl is None:
            return None, R.ClaimMissing(where, template, True)
        return _Entry(tmpl.spec, None, [], template=ref_name), None

    # ---- one claim on one node --------------------------------------------------------------------------------

    def _allocate(self, key: str, spec: ClaimSpec, node: str, labels: Mapping[str, str],
                  taken: set[DeviceId]) -> Allocation | Reason:
        if taken:  # another claim of the same pod took devices: nothing remembered applies
            return self._choose(key, spec, node, labels, taken)
        versions = (self._node_version.get(node, 0), self._wide_version)
        same = self._same.get(id(spec))
        if same is None or same[0] is not spec:  # one entry per equal spec: the claims of a gang are alike
            same = self._same[id(spec)] = (spec, self._canonical.setdefault(spec, spec))
        canonical = same[1]
        held = self._remembered.get((id(canonical), node))
        if held is not None and held[0] is canonical and held[1:3] == versions:
            result = held[3]
            return _for_claim(result, key) if isinstance(result, Reason) else result
        result = self._choose(key, spec, node, labels, taken)
        self._remembered[(id(canonical), node)] = (canonical, *versions, result)
        return result

    def _choose(self, key: str, spec: ClaimSpec, node: str, labels: Mapping[str, str],
                taken: set[DeviceId]) -> Allocation | Reason:
        alloc = self.allocator
        held, mine = alloc.held, self.held
        exact = sum(req.count for req in spec.requests if req.mode != ALL)
        if exact > COUNT_MAX:
            return _too_many(key, exact)
        options: list[tuple[DeviceRequest, list[Candidate], int]] = []  # request, candidates, how many
        for req in spec.requests:
            if req.admin_access and not alloc.admin_access:
                return R.AdminAccessRefused(key, req.name)
            found = alloc.matching(req, node, labels, key)
            if isinstance(found, Reason):
                return found
            if req.mode != ALL and len(found) < req.count:
                return R.ClaimDevicesShort(key, req.name, req.device_class, req.count, len(found), node)
            free = list(found) if req.admin_access else \
                [c for c in found if c.id not in held and c.id not in mine and c.id not in taken]
            if req.mode == ALL:
                updating = _updating_pool(alloc.inventory, node, labels)
                if updating:  # some of "all" is not published yet: taking the rest would be a subset
                    return R.ClaimUnusable(key, f"request {req.name} asks for all devices, but pool {updating} is "
                                                "being updated (fewer slices than its resourceSliceCount)")
                if not found or len(free) < len(found):
                    return R.ClaimDevicesShort(key, req.name, req.device_class, max(len(found), 1), len(free), node)
                options.append((req, free, len(free)))
            else:
                if len(free) < req.count:
                    return R.ClaimDevicesShort(key, req.name, req.device_class, req.count, len(free), node)
                options.append((req, free, req.count))
        total = sum(n for _, _, n in options)
        if total > COUNT_MAX:  # `All` on a node with many devices: more than a claim may hold
            return _too_many(key, total)
        chosen = _greedy(options) if not spec.constraints else None
        if chosen is None:
            chosen = _search(options, spec)
        if chosen is None:
            if spec.constraints:
                c = spec.constraints[0]
                return R.ClaimConstraintUnmet(key, c.attribute, c.requests, node)
            needed = sum(n for _, _, n in options)
            union = {c.id for _, cands, _ in options for c in cands}
            return R.ClaimDevicesShort(key, ",".join(r.name for r, _, _ in options),
                                       ",".join(sorted({r.device_class for r, _, _ in options})), needed,
                                       len(union), node)
        results = tuple(DeviceResult(req.name, c.id, req.admin_access) for req, c in chosen)
        cands = [c for _, c in chosen]
        if any(c.reach == LOCAL for c in cands) or not cands:
            return Allocation(results, node)
        selectors = {c.slice.node_selector for c in cands if c.reach == SELECTED}
        if len(selectors) > 1:  # devices from slices that select different nodes: the claim is pinned to this
            return Allocation(results, node)  # node (Kubernetes writes the selectors' intersection)
        return Allocation(results, "", selectors.pop() if selectors else ())


def _updating_pool(inventory: Inventory, node: str, labels: Mapping[str, str]) -> str:
    """A pool the node reaches whose newest generation is not wholly published ("driver/pool"), or ""."""
    if not inventory.incomplete:
        return ""
    pools = {(c.driver, c.slice.pool) for c in inventory.devices(node, labels)} & inventory.incomplete
    return "/".join(min(pools)) if pools else ""


def _too_many(key: str, wanted: int) -> Reason:
    """A claim asking more devices than an allocation may hold (AllocationResultsMaxSize): Kubernetes' allocator
    refuses it, and the apiserver would refuse its allocation; it also keeps the search's depth bounded."""
    return R.ClaimUnusable(key, f"asks for {wanted} devices, more than a claim may hold ({COUNT_MAX})")


def _for_claim(reason: Any, key: str) -> Reason:
    """A remembered reason, for another claim of the same spec (every claim reason names its claim)."""
    out: Reason = dataclasses.replace(reason, claim=key)
    return out


def _claim_key(pod: PodRef, ref_name: str, name: str) -> str:
    """The claim's namespace/name; for a template's claim not made yet, one name per pod and pod claim."""
    return f"{pod.namespace}/{name}" if name else f"{pod.namespace}/{pod.name}-{ref_name}"


def _greedy(options: list[tuple[DeviceRequest, list[Candidate], int]]) -> list[tuple[DeviceRequest, Candidate]] | None:
    """Without constraints, the first free candidates of each request in turn: nearly always a choice; None
    sends the claim to the search (an earlier request took devices a later one needed)."""
    used: set[DeviceId] = set()
    out = []
    for req, cands, n in options:
        got = 0
        for cand in cands:
            if got == n:
                break
            if cand.id not in used:
                used.add(cand.id)
                out.append((req, cand))
                got += 1
        if got < n:
            return None
    return out


def _search(options: list[tuple[DeviceRequest, list[Candidate], int]],
            spec: ClaimSpec) -> list[tuple[DeviceRequest, Candidate]] | None:
    """A choice of devices for every request (`count` each, distinct across requests), meeting the constraints,
    by depth-first search in the candidates' order; None when none exists or the search ran out of steps."""
    slots = [(i, req) for i, (req, _, n) in enumerate(options) for _ in range(n)]
    constraints = [(c, qualify(c.attribute, "")) for c in spec.constraints]
    values: list[object] = [None] * len(constraints)
    counts = [0] * len(constraints)
    picked: list[tuple[DeviceRequest, Candidate]] = []
    used: set[DeviceId] = set()
    steps = 0

    def attr(cand: Candidate, domain_id: tuple[str, str]) -> object:
        return cand.device.attributes.get(domain_id[0], {}).get(domain_id[1])

    def go(slot: int, start: int) -> bool:
        nonlocal steps
        if slot == len(slots):
            return True
        index, req = slots[slot]
        cands = options[index][1]
        next_is_same = slot + 1 < len(slots) and slots[slot + 1][0] == index
        for pos in range(start, len(cands)):
            cand = cands[pos]
            if cand.id in used:
                continue
            steps += 1
            if steps > SEARCH_STEPS_MAX:
                return False
            ok, set_here = True, []
            for k, (con, domain_id) in enumerate(constraints):
                if not con.covers(req.name):
                    continue
                value = attr(cand, domain_id)
                if value is None or (counts[k] and value != values[k]):
                    ok = False
                    break
                set_here.append(k)
            if not ok:
                continue
            for k in set_here:
                if not counts[k]:
                    values[k] = attr(cand, constraints[k][1])
                counts[k] += 1
            used.add(cand.id)
            picked.append((req, cand))
            if go(slot + 1, pos + 1 if next_is_same else 0):
                return True
            picked.pop()
            used.discard(cand.id)
            for k in set_here:
                counts[k] -= 1
            if steps > SEARCH_STEPS_MAX:
                return False
        return False

    return list(picked) if go(0, 0) else None
