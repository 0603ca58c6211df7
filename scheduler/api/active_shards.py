"""Layer `api`: N active scheduler replicas over N shards (`--active-shards N`), the rules without I/O.

Three rules every replica computes alike, so that no replica needs to ask another:

- **Nodes -> shards** (`plan_nodes`): whole topology domains (a HyperNode at the chosen tier, else a rack or zone
  label, else the node alone) go to one shard each, largest first to the least loaded shard (LPT), so a gang that
  fits a domain fits a shard. The result depends only on the set of (node, domain, weight), never on the order a
  replica's watch delivered them. One replica (the holder of shard 0) writes it as the shards' NodeShard
  `spec.nodesDesired`; the NodeShard two-phase handoff (`api/shard.py`) then moves nodes between shards, so two
  replicas never use one node at once even while they disagree about the plan.
- **Jobs -> shards** (`route`): a PodGroup's annotation `scheduling.volcano-py.io/shard`, when a person or a tool
  pinned it, else a stable hash of its `namespace/name` modulo the shard count. Neither input depends on which
  replicas are alive, so losing a replica moves no job: its shards (and their jobs) pass whole to a survivor.
- **Leases** (`lease_moves`): every replica is a candidate for every shard's Lease and holds at most its fair
  count, ceil(shards / live replicas). It takes free shards while below that count (in an order of its own, a
  rendezvous hash of identity and shard, so replicas starting together reach for different shards), gives one up
  while above it and none is free (someone is then below: the counts add up), and takes an orphaned shard (free
  for two lease durations, e.g. the replica counts disagree for a while) whatever its count.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass
from typing import Any, Final

from scheduler.api.job import JobInfo
from scheduler.api.resources import Resource

SHARD_ANNOTATION: Final = "scheduling.volcano-py.io/shard"  # on a PodGroup: pins it to shard N (0-based)
MAX_SHARDS: Final = 64  # --active-shards at most: one Lease and one NodeShard each, read every retry period
NAME_MAX: Final = 253


def shard_name(base: str, index: int) -> str:
    """The NodeShard (base: the scheduler name) or Lease (base: the lease name) of shard `index`."""
    return f"{base}-shard-{index}"


@functools.lru_cache(maxsize=1 << 18)
def _hash(text: str) -> int:
    """Every cycle routes every job: one sha256 per job name, kept (bounded) rather than redone each cycle."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


# ---- nodes ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class NodeFacts:
    """A node as the planner sees it: its topology domain ("" for none: the node is a domain of its own) and its
    weight (GPUs, or CPU millicores on a cluster without GPUs)."""

    name: str
    domain: str = ""
    weight: int = 0


@dataclass(frozen=True, slots=True)
class Need:
    """What a gang larger than its shard needs of it: `weight` in all, in pods of `pod` each (0: pods of no weight
    or of differing weights: any node's whole weight counts)."""

    weight: int
    pod: int = 0

    def usable(self, node_weight: int) -> int:
        """What of a node of this weight the gang's pods can use: whole pods only."""
        return node_weight if self.pod <= 0 else node_weight // self.pod * self.pod


def plan_nodes(nodes: Iterable[NodeFacts], shards: int,
               needs: Mapping[int, Need] | Iterable[tuple[int, Need]] | None = None,
               current: Mapping[str, int] | None = None) -> tuple[tuple[str, ...], ...]:
    """Each shard's nodes (sorted). Every node is in exactly one shard; a domain's nodes are all in one; the shard
    loads differ by at most the heaviest domain's weight. A node named twice counts once (its first facts by name
    order decide). `current`: node -> the shard it is in now; a domain wholly in one shard stays there unless the
    loads must be evened out (`_sticky`), so a node added or gone moves few others; without it, largest first to
    the least loaded (LPT). `needs`: shard -> what its largest gang needs; a shard that cannot hold it borrows
    whole domains (`_lend`)."""
    if shards < 1:
        raise ValueError(f"shards must be at least 1, got {shards}")
    by_name: dict[str, NodeFacts] = {}
    for facts in sorted(nodes, key=lambda f: (f.name, f.domain, f.weight)):
        by_name.setdefault(facts.name, facts)
    groups: dict[str, list[str]] = {}
    weights: dict[str, int] = {}
    for facts in by_name.values():
        key = f"d/{facts.domain}" if facts.domain else f"n/{facts.name}"
        groups.setdefault(key, []).append(facts.name)
        weights[key] = weights.get(key, 0) + max(0, facts.weight)
    owner: dict[str, int] = {}
    if current:
        for key, names in groups.items():
            where = {current.get(n, -1) for n in names}
            if len(where) == 1 and 0 <= (index := where.pop()) < shards:
                owner[key] = index
    loads = [[0, 0] for _ in range(shards)]  # (weight, nodes) per shard
    for key, index in owner.items():
        loads[index][0] += weights[key]
        loads[index][1] += len(groups[key])
    for key in sorted((k for k in groups if k not in owner), key=lambda k: (-weights[k], -len(groups[k]), k)):
        index = min(range(shards), key=lambda i: (loads[i][0], loads[i][1], i))
        owner[key] = index
        loads[index][0] += weights[key]
        loads[index][1] += len(groups[key])
    if current:
        _sticky(owner, weights, [w for w, _ in loads])
    pairs = list(needs.items() if isinstance(needs, Mapping) else needs or ())
    if pairs:
        node_weight = {name: max(0, facts.weight) for name, facts in by_name.items()}
        _lend(owner, groups, node_weight, pairs, shards)
    out: list[list[str]] = [[] for _ in range(shards)]
    for key, index in owner.items():
        out[index].extend(groups[key])
    return tuple(tuple(sorted(names)) for names in out)


def _sticky(owner: dict[str, int], weights: Mapping[str, int], loads: list[int]) -> None:
    """Even the loads out with as few moves as the rule needs: while the most and least loaded shards differ by
    more than the heaviest domain, move from the first to the second the domain whose weight is nearest half the
    difference (below the difference, so every move narrows it: the loop ends, and only once the bound holds)."""
    heaviest = max(weights.values(), default=0)
    by_shard: dict[int, set[str]] = {}
    for key, index in owner.items():
        by_shard.setdefault(index, set()).add(key)
    while True:
        high = max(range(len(loads)), key=lambda i: (loads[i], -i))
        low = min(range(len(loads)), key=lambda i: (loads[i], i))
        gap = loads[high] - loads[low]
        if gap <= heaviest:
            return
        movable = [k for k in by_shard.get(high, ()) if 0 < weights[k] < gap]
        if not movable:
            return
        key = min(movable, key=lambda k: (abs(2 * weights[k] - gap), k))
        by_shard[high].discard(key)
        by_shard.setdefault(low, set()).add(key)
        owner[key] = low
        loads[high] -= weights[key]
        loads[low] += weights[key]


def _lend(owner: dict[str, int], groups: Mapping[str, list[str]], node_weight: Mapping[str, int],
          needs: list[tuple[int, Need]], shards: int) -> None:
    """Gangs larger than their shard borrow whole domains from other shards until their shard holds them, counting
    of each node what the gang's pods can use (`Need.usable`). Needs are served in the order given (the planner
    gives the longest waiting first; a shard may have several); a shard never lends below a need of its own
    already served, any other lends what it has; a need no plan can meet (above what the whole cluster offers
    those pods) moves nothing. Each loan is the domain offering least that closes the gap, else the one offering
    most (fewest domains moved); ties by name: the same inputs give the same plan. O(nodes) per need, plus a sort
    of the domains."""
    served: list[list[Any]] = []  # [shard, need, what the shard's domains offer that need now]

    def offer(need: Need, key: str) -> int:
        return sum(need.usable(node_weight[n]) for n in groups[key])

    def may_lend(key: str) -> bool:
        lender = owner[key]
        return all(held - offer(need, key) >= need.weight for shard, need, held in served if shard == lender)

    for index, need in needs:
        if not 0 <= index < shards:
            continue
        offers = {k: offer(need, k) for k in groups}
        if need.weight > sum(offers.values()):
            continue
        has = sum(o for k, o in offers.items() if owner[k] == index)
        ranked = sorted((o, k) for k, o in offers.items() if o > 0 and owner[k] != index)
        taken: set[str] = set()
        while has < need.weight:
            key = _pick(ranked, taken, need.weight - has, may_lend)
            if key is None:
                break
            taken.add(key)
            lender = owner[key]
            for entry in served:  # what the lender's and the borrower's served needs hold now
                if entry[0] == lender:
                    entry[2] -= offer(entry[1], key)
                elif entry[0] == index:
                    entry[2] += offer(entry[1], key)
            owner[key] = index
            has += offers[key]
        served.append([index, need, has])


def _pick(ranked: list[tuple[int, str]], taken: set[str], gap: int, may: Callable[[str], bool]) -> str | None:
    """The domain offering least that still closes `gap`, else the one offering most, among those that may lend."""
    start = bisect.bisect_left(ranked, (gap, ""))
    for _, key in ranked[start:]:
        if key not in taken and may(key):
            return key
    for _, key in reversed(ranked[:start]):
        if key not in taken and may(key):
            return key
    return None


# ---- jobs ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PinUnreadable:
    """A shard annotation that is no shard number below the shard count: the job is routed by its hash."""

    value: str
    problem: str

    def describe(self, job: str) -> str:
        return f"PodGroup {job}: annotation {SHARD_ANNOTATION}={self.value!r}: {self.problem}; routed by its name"


def parse_pin(annotations: Any, shards: int) -> int | None | PinUnreadable:
    """The shard a PodGroup's annotations pin it to, None when not pinned."""
    if not isinstance(annotations, Mapping):
        return None
    value = annotations.get(SHARD_ANNOTATION)
    if value is None:
        return None
    text = str(value)[:40]
    if not isinstance(value, str) or not value.isascii() or not value.isdigit() or len(value) > 3:
        return PinUnreadable(text, "not a shard number")
    if int(value) >= shards:
        return PinUnreadable(text, f"there are {shards} shards (0 to {shards - 1})")
    return int(value)


def route(job: str, shards: int, pin: int | None = None) -> int:
    """The shard a job (its PodGroup's namespace/name) belongs to."""
    if pin is not None and 0 <= pin < shards:
        return pin
    return _hash(job) % shards


# ---- leases --------------------------------------------------------------------------------------------------
def fair_count(shards: int, replicas: int) -> int:
    """The most shards one replica holds while `replicas` are alive."""
    return math.ceil(shards / max(1, replicas))


def preference(identity: str, shard: int) -> int:
    """A replica's rank for a shard (lower: reached for first): rendezvous hashing, so each replica has its own
    order and one replica's loss changes no other replica's order."""
    return _hash(f"{identity}/{shard}")


@dataclass(frozen=True, slots=True)
class LeaseMoves:
    acquire: tuple[int, ...]  # free shards to try, in order
    release: tuple[int, ...]  # held shards to give up (after the cycle that used them and its binds)


def lease_moves(identity: str, shards: int, replicas: int, held: Set[int], free: Set[int],
                orphaned: Set[int] = frozenset()) -> LeaseMoves:
    """What one replica does this round. `replicas`: live replicas it knows of, itself included; `free`: shards
    whose Lease nobody holds (or has lapsed); `orphaned`: free ones that stayed free two lease durations."""
    fair = fair_count(shards, replicas)
    mine = set(held)
    candidates = sorted(set(free) - mine, key=lambda s: (preference(identity, s), s))
    take = candidates[:max(0, fair - len(mine))]
    take += [s for s in candidates if s in orphaned and s not in take]
    give: list[int] = []
    if len(mine) > fair and not (set(free) - mine):
        give = sorted(mine, key=lambda s: (preference(identity, s), s))[fair:]  # the least preferred go
    return LeaseMoves(tuple(take), tuple(give))


def member_lease_name(lease: str, identity: str) -> str:
    """A replica's presence Lease (how the others count live replicas): the lease name, `-member-` and the
    identity made a DNS label (a hash kept when it had to be cut or changed)."""
    safe = "".join(c if c.isalnum() and c.isascii() else "-" for c in identity.lower()).strip("-")
    tag = f"{_hash(identity) % 16**8:08x}"
    if safe != identity or len(safe) > 40:
        safe = f"{safe[:40].strip('-')}-{tag}".strip("-")
    return f"{lease}-member-{safe}"[:NAME_MAX]


def allocated_by_queue(jobs: Iterable[JobInfo]) -> dict[str, Resource]:
    """What the jobs hold, per queue (the Queues' `status.allocated` across shards, cache/active.py)."""
    held: dict[str, list[Resource]] = {}
    for job in jobs:
        allocated = job.allocated()
        if not allocated.is_zero():
            held.setdefault(job.queue, []).append(allocated)
    return {queue: Resource.total(parts) for queue, parts in held.items()}


# ---- what each shard's holder publishes on the shard's Lease (cache/active.py `summary`) -------------------------
SUMMARY_ANNOTATION: Final = "scheduling.volcano-py.io/shard-summary"
SUMMARY_MAX: Final = 200_000  # characters: a Lease's annotations may hold 256 KiB in all
LOANS_MAX: Final = 256  # loans in one summary at most (the reader refuses more)
_UNITS_MAX: Final = 1 << 62


@dataclass(frozen=True, slots=True)
class ShardSummary:
    """What the holder of a shard publishes with each renewal of the shard's Lease, for the holder of shard 0: what
    the shard's jobs hold per queue (the Queues' `status.allocated` is the sum over shards), the shard's gangs
    larger than its share of nodes (`loans`: when each was first seen waiting, wall-clock seconds; its key; its
    need), and on shard 0's Lease the plan's node weights per shard without loans (`base`), which every holder
    needs to tell which of its gangs are larger than their shard."""

    allocated: Mapping[str, Resource]
    loans: tuple[tuple[float, str, Need], ...] = ()
    base: tuple[tuple[tuple[int, int], ...], ...] | None = None


def encode_summary(summary: ShardSummary) -> str:
    """Compact JSON: a resource as [cpu, memory, pods, {scalar: units}] in the scheduler's units."""
    allocated = {queue: [r.cpu, r.memory, r.pods, dict(r.scalars)] for queue, r in sorted(summary.allocated.items())}
    loans = [[round(since, 3), key, need.weight, need.pod] for since, key, need in summary.loans]
    body: dict[str, Any] = {"v": 1, "allocated": allocated, "loans": loans}
    if summary.base is not None:
        body["base"] = [[list(pair) for pair in shard] for shard in summary.base]
    return json.dumps(body, separators=(",", ":"), sort_keys=True)


def parse_summary(text: object) -> ShardSummary | str:
    """A shard's summary as published, or why it cannot be read (a Lease is writable by whoever may write Leases
    in the namespace: every number is bounded, every name a string of a name's length)."""
    if not isinstance(text, str):
        return "is not a string"
    if len(text) > SUMMARY_MAX:
        return f"is longer than {SUMMARY_MAX} characters"
    try:
        body = json.loads(text)
    except (ValueError, RecursionError) as exc:  # (nested past the parser's depth: refused, as malformed)
        return f"is not JSON: {exc}"
    if not isinstance(body, dict) or body.get("v") != 1:
        return "is not a version 1 summary"
    try:
        allocated = {_name(queue): _resource(value) for queue, value in _items(body.get("allocated"))}
        loans = body.get("loans", [])
        if not isinstance(loans, list) or len(loans) > LOANS_MAX:
            raise ValueError(f"loans: expected a list of at most {LOANS_MAX}")
        parsed = []
        for entry in loans:
            if not isinstance(entry, list) or len(entry) != 4:
                raise ValueError("loans: an entry is not [since, job, weight, pod]")
            since = entry[0]
            if isinstance(since, bool) or not isinstance(since, int | float) or not math.isfinite(since):
                raise ValueError("loans: since is not a number of seconds")
            parsed.append((float(since), _name(entry[1]), Need(_units(entry[2]), _units(entry[3]))))
        base = body.get("base")
        if base is not None:
            if not isinstance(base, list) or len(base) > MAX_SHARDS:
                raise ValueError(f"base: expected a list of at most {MAX_SHARDS} shards")
            shards = []
            for shard in base:
                if not isinstance(shard, list) or len(shard) > 4096:
                    raise ValueError("base: a shard is not a list of at most 4096 [weight, count]")
                pairs = []
                for pair in shard:
                    if not isinstance(pair, list) or len(pair) != 2:
                        raise ValueError("base: an entry is not [weight, count]")
                    pairs.append((_units(pair[0]), _units(pair[1])))
                shards.append(tuple(pairs))
            base = tuple(shards)
    except ValueError as exc:
        return str(exc)
    return ShardSummary(allocated, tuple(parsed), base)


def _items(value: object) -> Iterable[tuple[object, object]]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ValueError("allocated: expected a map of queue to resources")
    return value.items()


def _name(value: object) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= NAME_MAX:
        raise ValueError(f"{value!r:.80} is not a name")
    return value


def _units(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _UNITS_MAX:
        raise ValueError(f"{value!r:.80} is not an amount")
    return value


def _resource(value: object) -> Resource:
    if not isinstance(value, list) or len(value) != 4 or not isinstance(value[3], dict):
        raise ValueError("allocated: a queue's resources are not [cpu, memory, pods, {scalar: units}]")
    scalars = {_name(name): _units(units) for name, units in value[3].items()}
    return Resource.of(_units(value[0]), _units(value[1]), _units(value[2]), {k: v for k, v in scalars.items() if v})
