"""N active replicas (`api.active_shards`): the node plan keeps every node in exactly one shard and every topology
domain whole, whatever order a replica saw the nodes in; a job's shard never depends on which replicas are alive;
and replicas following `lease_moves` round after round end up holding every shard, one holder each, none above its
fair count, also after replicas die or join."""

from __future__ import annotations

import json
import math
import random
import re

from hypothesis import given, settings, strategies as st

from scheduler.api.active_shards import (
    SHARD_ANNOTATION,
    SUMMARY_MAX,
    Need,
    NodeFacts,
    PinUnreadable,
    ShardSummary,
    encode_summary,
    fair_count,
    lease_moves,
    member_lease_name,
    parse_pin,
    parse_summary,
    plan_nodes,
    route,
    shard_name,
)
from scheduler.api.resources import Resource

DOMAINS = st.sampled_from(["", "rack-a", "rack-b", "rack-c", "rack-d", "zone-x"])
FACTS = st.lists(st.builds(NodeFacts, st.from_regex(r"n[0-9]{1,3}", fullmatch=True), DOMAINS,
                           st.integers(0, 8)), max_size=60, unique_by=lambda f: f.name)


def test_names_of_a_shards_lease_and_nodeshard():
    assert shard_name("volcano-py", 0) == "volcano-py-shard-0"
    assert shard_name("volcano-py-scheduler", 3) == "volcano-py-scheduler-shard-3"


def test_a_rack_stays_whole_and_racks_balance_by_gpus():
    nodes = [NodeFacts(f"a{i}", "rack-a", 8) for i in range(4)] + [NodeFacts(f"b{i}", "rack-b", 8) for i in range(2)]
    nodes += [NodeFacts(f"c{i}", "rack-c", 8) for i in range(2)]
    plan = plan_nodes(nodes, 2)
    assert plan == (("a0", "a1", "a2", "a3"), ("b0", "b1", "c0", "c1"))  # 32 GPUs each


@settings(max_examples=200, deadline=None)
@given(FACTS, st.integers(1, 6), st.randoms(use_true_random=False))
def test_every_node_in_exactly_one_shard_the_same_on_every_replica(facts, shards, rnd):
    plan = plan_nodes(facts, shards)
    assert len(plan) == shards
    placed = [n for names in plan for n in names]
    assert sorted(placed) == sorted(f.name for f in facts)  # each once
    seen = list(facts)
    rnd.shuffle(seen)  # another replica's watch delivered them in another order
    assert plan_nodes(seen, shards) == plan


@settings(max_examples=200, deadline=None)
@given(FACTS, st.integers(1, 6))
def test_a_domain_is_never_split_and_loads_stay_within_one_domain(facts, shards):
    assert_whole_and_even(facts, plan_nodes(facts, shards))


def assert_whole_and_even(facts: list[NodeFacts], plan: tuple[tuple[str, ...], ...]) -> None:
    """No domain split over two shards, and the shards' loads within the heaviest domain's weight."""
    where = {n: i for i, names in enumerate(plan) for n in names}
    domains: dict[str, set[int]] = {}
    weight: dict[str, int] = {}
    for f in facts:
        key = f.domain or f"node:{f.name}"
        domains.setdefault(key, set()).add(where[f.name])
        weight[key] = weight.get(key, 0) + f.weight
    assert all(len(s) == 1 for s in domains.values())
    loads = [sum(f.weight for f in facts if where[f.name] == i) for i in range(len(plan))]
    assert max(loads) - min(loads) <= max(weight.values(), default=0)


@settings(max_examples=300, deadline=None)
@given(FACTS, st.integers(1, 6), st.dictionaries(st.integers(-1, 6), st.builds(Need, st.integers(0, 120),
                                                                                st.integers(0, 5)), max_size=3),
       st.randoms(use_true_random=False))
def test_a_shard_whose_gang_outgrows_it_borrows_whole_domains_and_no_node_is_in_two_shards(facts, shards, needs, rnd):
    plan = plan_nodes(facts, shards, needs)
    placed = [n for names in plan for n in names]
    assert sorted(placed) == sorted(f.name for f in facts)  # each node in exactly one shard
    where = {n: i for i, names in enumerate(plan) for n in names}
    domains: dict[str, set[int]] = {}
    for f in facts:
        domains.setdefault(f.domain or f"node:{f.name}", set()).add(where[f.name])
    assert all(len(s) == 1 for s in domains.values())  # a loan moves a whole domain
    base = plan_nodes(facts, shards)

    def offered(names: tuple[str, ...], need: Need) -> int:
        return sum(need.usable(f.weight) for f in facts if f.name in names)

    wanted = {i: n for i, n in needs.items() if 0 <= i < shards and n.weight <= offered(tuple(where), n)}
    first = next(iter(wanted), None)
    if first is not None:  # the first need served may borrow from every other shard: it is met
        assert offered(plan[first], wanted[first]) >= wanted[first].weight
    if all(offered(base[i], n) >= n.weight for i, n in wanted.items()):
        assert plan == base  # no shard outgrown: the plan without loans
    seen = list(facts)
    rnd.shuffle(seen)
    assert plan_nodes(seen, shards, needs) == plan  # every replica plans alike


@settings(max_examples=300, deadline=None)
@given(FACTS, FACTS, st.integers(1, 6), st.integers(0, 8))
def test_a_plan_made_from_the_current_one_keeps_its_rules_and_moves_few_nodes(facts, then, shards, added):
    first = plan_nodes(facts, shards)
    current = {n: i for i, names in enumerate(first) for n in names}
    assert plan_nodes(facts, shards, current=current) == first  # nothing changed: nothing moves
    changed = [f for f in facts if f.name not in {g.name for g in then[:3]}] + then[:3]  # some come, some go
    plan = plan_nodes(changed, shards, current=current)
    assert sorted(n for names in plan for n in names) == sorted({f.name for f in changed})  # each node once
    assert_whole_and_even(changed, plan)
    # one node more, in no domain and no heavier than the heaviest: it goes to the least loaded, nothing moves
    heaviest = max((sum(f.weight for f in facts if (f.domain or f.name) == d) for d in
                    {f.domain or f.name for f in facts}), default=0)
    if facts and added <= heaviest:
        grown = plan_nodes([*facts, NodeFacts("new-node", "", added)], shards, current=current)
        assert {n: i for i, names in enumerate(grown) for n in names if n != "new-node"} == current


def test_a_gang_of_three_racks_takes_the_lightest_racks_that_close_the_gap():
    nodes = [NodeFacts(f"{r}{i}", f"rack-{r}", 8) for r in "abcdef" for i in range(2)]  # 16 GPUs a rack
    base = plan_nodes(nodes, 2)
    assert [len(names) for names in base] == [6, 6]  # 48 GPUs each
    plan = plan_nodes(nodes, 2, {1: Need(80)})  # shard 1's gang needs 80 GPUs: two racks more
    assert [len(names) for names in plan] == [2, 10]
    assert set(plan[1]) >= set(base[1])  # it keeps its own racks and borrows whole ones
    assert plan_nodes(nodes, 2, {1: Need(200)}) == base  # more than the cluster has: nothing moves


def test_a_loan_counts_only_what_the_gangs_pods_can_use_of_each_node():
    big = [NodeFacts(f"b{i}", "rack-b", 1000) for i in range(2)]  # shard 1's rack: 2 nodes of 1,000 GPUs
    others = [NodeFacts(f"a{i}", "rack-a", 1000) for i in range(2)] + [NodeFacts("small", "", 999)]
    base = plan_nodes(big + others, 2)
    shard = next(i for i, names in enumerate(base) if "b0" in names)
    # 3 pods of 1,000: 3,000 in all; a node of 999 offers them nothing, so only the other rack closes the gap
    plan = plan_nodes(big + others, 2, {shard: Need(3000, 1000)})
    assert {"a0", "a1", "b0", "b1"} <= set(plan[shard])
    assert plan_nodes(big + others, 2, {shard: Need(5000, 1000)}) == base  # 4 such nodes in all: never met


def test_a_pin_is_read_with_bounds():
    assert parse_pin({SHARD_ANNOTATION: "1"}, 2) == 1
    assert parse_pin({}, 2) is None and parse_pin(None, 2) is None
    for bad in ("2", "-1", "x", "1.0", "0001", " 1", 1):
        assert isinstance(parse_pin({SHARD_ANNOTATION: bad}, 2), PinUnreadable), bad
    assert "there are 2 shards" in parse_pin({SHARD_ANNOTATION: "7"}, 2).describe("ns/pg")  # type: ignore[union-attr]


@given(st.text(min_size=1, max_size=80), st.integers(1, 16))
def test_route_is_a_shard_and_a_pin_wins(job, shards):
    assert 0 <= route(job, shards) < shards
    assert route(job, shards, shards - 1) == shards - 1
    assert route(job, shards, shards) == route(job, shards)  # an out-of-range pin is no pin


def test_jobs_spread_over_the_shards():
    counts = [0, 0, 0, 0]
    for i in range(4000):
        counts[route(f"ns/job-{i}", 4)] += 1
    assert min(counts) > 800, counts  # a uniform hash: about 1000 each


def test_member_lease_names_are_dns_names_of_their_own():
    names = {member_lease_name("volcano-py-scheduler", i) for i in ("a", "A", "a_b", "a-b", "x" * 300, "x" * 299)}
    assert len(names) == 6
    for name in names:
        assert len(name) <= 253 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name), name
    assert member_lease_name("volcano-py-scheduler", "sched-0") == "volcano-py-scheduler-member-sched-0"


class Cluster:
    """Shard Leases as the apiserver holds them: one holder each; a write on a held Lease fails (409)."""

    def __init__(self, shards: int):
        self.shards = shards
        self.holder: dict[int, str] = {}
        self.free_for: dict[int, int] = {s: 0 for s in range(shards)}  # rounds each has been free

    def round(self, alive: list[str], rnd: random.Random, orphan_rounds: int = 2) -> None:
        for s in range(self.shards):
            self.free_for[s] = self.free_for[s] + 1 if s not in self.holder else 0
        order = list(alive)
        rnd.shuffle(order)
        for me in order:
            held = {s for s, h in self.holder.items() if h == me}
            free = {s for s in range(self.shards) if s not in self.holder}
            orphaned = {s for s in free if self.free_for[s] >= orphan_rounds}
            moves = lease_moves(me, self.shards, len(alive), held, free, orphaned)
            for s in moves.release:
                del self.holder[s]
            for s in moves.acquire:
                self.holder.setdefault(s, me)  # the apiserver takes the first write only

    def kill(self, who: str) -> None:  # its Leases lapse
        self.holder = {s: h for s, h in self.holder.items() if h != who}


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 8), st.integers(1, 5), st.lists(st.tuples(st.booleans(), st.integers(0, 9)), max_size=6),
       st.randoms(use_true_random=False))
def test_replicas_hold_every_shard_once_and_none_above_its_fair_count(shards, replicas, changes, rnd):
    alive = [f"r{i}" for i in range(replicas)]
    cluster = Cluster(shards)
    jobs = [f"ns/j{i}" for i in range(30)]
    route_before = {j: route(j, shards) for j in jobs}
    born = replicas
    for join, which in [(True, 0), *changes]:
        if join:
            alive.append(f"r{born}")
            born += 1
        elif len(alive) > 1:
            cluster.kill(alive.pop(which % len(alive)))
        for _ in range(shards + 4):  # quiet rounds
            cluster.round(alive, rnd)
        assert set(cluster.holder) == set(range(shards)), "a shard is held by nobody"
        assert set(cluster.holder.values()) <= set(alive)
        fair = fair_count(shards, len(alive))
        counts = [sum(1 for h in cluster.holder.values() if h == me) for me in alive]
        assert max(counts) <= fair, (counts, fair)
        assert sum(counts) == shards and fair == math.ceil(shards / len(alive))
        # a job's shard never moved; it is scheduled by whoever holds that shard now
        assert {j: route(j, shards) for j in jobs} == route_before


def test_two_replicas_starting_together_reach_for_different_shards_first():
    firsts = {lease_moves(me, 2, 2, set(), {0, 1}).acquire for me in ("a", "b", "c", "d", "e", "f")}
    assert len(firsts) == 2  # some replicas try shard 0 first, others shard 1


def test_a_replica_above_its_fair_count_gives_up_its_least_preferred_shard_only_when_none_is_free():
    assert lease_moves("a", 2, 2, {0, 1}, set()).release and len(lease_moves("a", 2, 2, {0, 1}, set()).release) == 1
    assert lease_moves("a", 2, 1, {0, 1}, set()).release == ()
    assert lease_moves("a", 3, 2, {0, 1}, {2}).release == ()  # a shard is free: someone below takes that first
    assert lease_moves("a", 3, 3, {0}, {1}, orphaned={1}).acquire == (1,)  # an orphan, whatever the count


# ---- the shard summary each holder publishes on its Lease -----------------------------------------------------
_names = st.text(st.sampled_from("abcz-./0"), min_size=1, max_size=12)
_units = st.integers(0, 1 << 62)
_resources = st.builds(lambda c, m, p, s: Resource.of(c, m, p, s), _units, _units, _units,
                       st.dictionaries(_names.map(lambda n: f"x.io/{n}"), st.integers(1, 1 << 62), max_size=2))
_summaries = st.builds(
    ShardSummary,
    st.dictionaries(_names, _resources, max_size=5),
    st.lists(st.tuples(st.floats(0, 2e9).map(lambda f: round(f, 3)), _names,
                       st.builds(Need, _units, _units)), max_size=4).map(tuple),
    st.none() | st.lists(st.lists(st.tuples(_units, _units), max_size=3).map(tuple), max_size=4).map(tuple))


@given(_summaries)
def test_a_summary_reads_back_as_published(summary):
    assert parse_summary(encode_summary(summary)) == summary


_json = st.recursive(st.none() | st.booleans() | st.integers(-(1 << 70), 1 << 70) | st.floats() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                  max_size=4), max_leaves=20)


@given(st.one_of(_json.map(lambda v: json.dumps(v)), _summaries.map(encode_summary).flatmap(
    lambda text: st.integers(0, len(text)).map(lambda cut: text[:cut] + "7" + text[cut + 1:]))), _json)
def test_a_summary_from_anyone_who_may_write_leases_is_read_or_refused_with_a_reason(text, other):
    """A Lease is writable by whoever may write Leases in its namespace: any text is a summary or a reason, never
    an exception, and every amount read is bounded."""
    for candidate in (text, other):
        got = parse_summary(candidate)
        assert isinstance(got, str | ShardSummary)
        if isinstance(got, ShardSummary):
            for held in got.allocated.values():
                assert all(0 <= units <= 1 << 62 for _, units in held.items())
            assert all(0 <= n.weight <= 1 << 62 and 0 <= n.pod <= 1 << 62 for _, _, n in got.loans)
    assert isinstance(parse_summary("x" * (SUMMARY_MAX + 1)), str)
    assert isinstance(parse_summary("[" * (SUMMARY_MAX // 2)), str)  # nested past the parser's depth
