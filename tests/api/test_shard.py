"""The NodeShard as the scheduler reads it (bounded), and the two-phase handoff (`api.shard.ShardLedger`): under
any order of desired-node moves, lagging watches and status writes, no node is ever in two shards' nodesInUse nor
used by two schedulers' sessions, and once the moves stop every shard ends up using exactly its desired nodes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import example, given, settings, strategies as st

from scheduler.api.shard import (
    NODES_MAX,
    NodeShardInfo,
    ShardLedger,
    ShardUnreadable,
    available_nodes,
    parse_node_shard,
    status_body,
)


def shard(name: str, desired: list[str], in_use: list[str] | None = None, rv: str = "1",
          **status: Any) -> dict[str, Any]:
    st_: dict[str, Any] = {**status}
    if in_use is not None:
        st_["nodesInUse"] = in_use
    return {"metadata": {"name": name, "resourceVersion": rv}, "spec": {"nodesDesired": desired}, "status": st_}


def test_reads_a_shard_and_works_out_add_and_remove_from_desired_and_in_use() -> None:
    read = parse_node_shard(shard("volcano", ["a", "b"], ["b", "c"], nodesToAdd=["x"], nodesToRemove=[]))
    assert isinstance(read, NodeShardInfo)
    assert read.desired == {"a", "b"} and read.in_use == {"b", "c"}
    assert read.status_to_add == {"x"} and read.status_to_remove == frozenset()
    body = status_body(read, read.in_use)  # not the stale lists of the status
    assert body == {"nodesInUse": ["b", "c"], "nodesToRemove": ["c"], "nodesToAdd": ["a"]}


def test_a_shard_without_status_uses_nothing_yet() -> None:
    read = parse_node_shard({"metadata": {"name": "s"}, "spec": {"nodesDesired": ["a"]}})
    assert isinstance(read, NodeShardInfo) and read.in_use == frozenset()
    assert status_body(read, frozenset()) == {"nodesInUse": [], "nodesToRemove": [], "nodesToAdd": ["a"]}


def test_hostile_shards_are_refused_with_the_field_and_the_problem() -> None:
    cases = [
        ({"metadata": {"name": "s"}}, "spec"),
        ({"metadata": {"name": "s"}, "spec": {}}, "spec.nodesDesired"),
        ({"metadata": {"name": "s"}, "spec": {"nodesDesired": "a,b"}}, "spec.nodesDesired"),
        ({"metadata": {"name": "s"}, "spec": {"nodesDesired": [1]}}, "spec.nodesDesired"),
        ({"metadata": {"name": "s"}, "spec": {"nodesDesired": ["x" * 254]}}, "spec.nodesDesired"),
        ({"metadata": {"name": "s"}, "spec": {"nodesDesired": ["a"] * (NODES_MAX + 1)}}, "spec.nodesDesired"),
        (shard("s", ["a"], status_extra := None) | {"status": {"nodesInUse": [None]}}, "status.nodesInUse"),
        ({"metadata": {"name": "s"}, "spec": {"nodesDesired": []}, "status": []}, "status"),
        ({"metadata": {}, "spec": {"nodesDesired": []}}, "metadata.name"),
    ]
    del status_extra
    for obj, path in cases:
        read = parse_node_shard(obj)
        assert isinstance(read, ShardUnreadable) and read.path == path, (obj, read)


def test_available_nodes_are_desired_less_what_other_shards_use() -> None:
    a = parse_node_shard(shard("a", ["n1", "n2", "n3"], ["n1"]))
    b = parse_node_shard(shard("b", ["n4"], ["n2", "n4"]))
    assert isinstance(a, NodeShardInfo) and isinstance(b, NodeShardInfo)
    assert available_nodes("a", {"a": a, "b": b}) == {"n1", "n3"}
    assert available_nodes("c", {"a": a, "b": b}) is None


def test_status_body_is_none_when_the_published_status_says_the_same() -> None:
    a = parse_node_shard(shard("a", ["n1", "n2"], ["n1", "n3"], nodesToAdd=["n2"], nodesToRemove=["n3"]))
    assert isinstance(a, NodeShardInfo)
    assert status_body(a, frozenset({"n1", "n3"})) is None
    assert status_body(a, frozenset({"n1", "n2"})) == {"nodesInUse": ["n1", "n2"], "nodesToRemove": [],
                                                       "nodesToAdd": []}


# ---- the handoff, as a model of one apiserver, one sharding controller and lagging schedulers -----------------


@dataclass
class Store:
    """NodeShards as etcd keeps them: every write is a new revision; a watch delivers a prefix of them."""

    revision: int = 0
    log: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    current: dict[str, dict[str, Any]] = field(default_factory=dict)

    def put(self, name: str, obj: dict[str, Any]) -> int:
        self.revision += 1
        obj = {**obj, "metadata": {"name": name, "resourceVersion": str(self.revision)}}
        self.current[name] = obj
        self.log.append((self.revision, name, obj))
        return self.revision

    def view(self, upto: int) -> dict[str, NodeShardInfo]:
        seen: dict[str, dict[str, Any]] = {}
        for rev, name, obj in self.log:
            if rev > upto:
                break
            seen[name] = obj
        out = {}
        for name, obj in seen.items():
            read = parse_node_shard(obj)
            assert isinstance(read, NodeShardInfo)
            out[name] = read
        return out

    def set_desired(self, name: str, desired: set[str]) -> None:
        obj = self.current[name]
        self.put(name, {"spec": {"nodesDesired": sorted(desired)}, "status": obj.get("status") or {}})

    def write_status(self, info: NodeShardInfo, status: dict[str, list[str]]) -> str | None:
        """A PUT of the status subresource with the resourceVersion as a precondition."""
        obj = self.current[info.name]
        if obj["metadata"]["resourceVersion"] != info.resource_version:
            return None  # 409
        return str(self.put(info.name, {"spec": obj["spec"], "status": status}))

    def in_use(self, name: str) -> set[str]:
        return set((self.current[name].get("status") or {}).get("nodesInUse") or ())

    def desired(self, name: str) -> set[str]:
        return set(self.current[name]["spec"]["nodesDesired"])


SHARDS = ("a", "b", "c")
NODES = tuple(f"n{i}" for i in range(6))

# (op, shard index, node index, how far a view advances)
ops = st.lists(st.tuples(st.sampled_from(("move", "drop", "watch", "step", "step", "watch", "apply")),
                         st.integers(0, len(SHARDS) - 1), st.integers(0, len(NODES) - 1), st.integers(0, 3)),
               max_size=80)


@settings(max_examples=300, deadline=None)
@given(ops)
# a's watch lags: it still sees n0 desired and free when b, which has it now, takes it; a's write must be refused
@example([("move", 1, 0, 0), ("watch", 1, 0, 3), ("step", 1, 0, 0), ("step", 0, 0, 0)])
# n0 leaves a while a's apply binds to it: a keeps it in use until that bind returns (the next step); b waits
@example([("step", 0, 0, 0), ("step", 0, 0, 0), ("move", 1, 0, 0), ("watch", 0, 0, 3), ("apply", 0, 0, 1),
          ("watch", 1, 0, 3), ("step", 1, 0, 0), ("step", 1, 0, 0)])
def test_no_node_is_ever_in_two_shards_in_use_nor_used_by_two_sessions(sequence: list[tuple[str, int, int, int]]
                                                                        ) -> None:
    store = Store()
    for i, name in enumerate(SHARDS):  # each starts with two nodes desired, none in use
        store.put(name, {"spec": {"nodesDesired": list(NODES[2 * i:2 * i + 2])}, "status": {}})
    ledgers = {name: ShardLedger(name) for name in SHARDS}
    views = dict.fromkeys(SHARDS, store.revision)
    sessions: dict[str, frozenset[str]] = dict.fromkeys(SHARDS, frozenset())

    def check() -> None:
        for x in SHARDS:
            assert sessions[x] <= store.in_use(x), (x, sessions[x], store.in_use(x))  # used only once stored
            for y in SHARDS:
                if x < y:
                    assert not store.in_use(x) & store.in_use(y), (x, y)
                    assert not sessions[x] & sessions[y], (x, y)

    def step(name: str) -> None:
        nodes = ledgers[name].step(store.view(views[name]), store.write_status)
        sessions[name] = nodes or frozenset()  # the next session's nodes; it ends (binds returned) by the next step

    def apply(name: str, pick: int) -> None:
        """The session's binds sent to some of its nodes (`pick`'s bits): the nodes leaving that none of them
        names are let go; from here to the next step the shard writes to the nodes of its binds only."""
        binds = frozenset(node for i, node in enumerate(sorted(sessions[name])) if pick >> i & 1)
        ledgers[name].release(store.view(views[name]), store.write_status, binds)
        sessions[name] = binds

    for op, s, n, k in sequence:
        name, node = SHARDS[s], NODES[n]
        if op in ("move", "drop"):  # the controller keeps desired lists disjoint: off the old shard first
            for other in SHARDS:
                if node in store.desired(other):
                    store.set_desired(other, store.desired(other) - {node})
            if op == "move":
                store.set_desired(name, store.desired(name) | {node})
        elif op == "watch":  # the watch delivers some more of the changes, in order
            views[name] = min(store.revision, views[name] + k + 1)
        elif op == "apply":
            apply(name, n * 4 + k)
        else:
            step(name)
        check()
    # The moves stop: with watches caught up, a few steps hand every node over to its shard.
    for _ in range(len(SHARDS) + 1):
        for name in SHARDS:
            views[name] = store.revision
            step(name)
            check()
    for name in SHARDS:
        assert store.in_use(name) == store.desired(name) and sessions[name] == store.desired(name)


def test_a_resource_version_that_is_not_ascii_digits_is_no_revision() -> None:
    from scheduler.api.shard import revision

    assert [revision(v) for v in ("42", "", "abc", "\u00b2", "\u0663", "9" * 21)] == [42, 0, 0, 0, 0, 0]


def test_an_apply_lets_go_of_the_leaving_nodes_its_binds_do_not_name_at_once() -> None:
    store = Store()
    store.put("a", {"spec": {"nodesDesired": ["n0", "n1", "n2"]}, "status": {}})
    ledger = ShardLedger("a")
    assert ledger.step(store.view(store.revision), store.write_status) == {"n0", "n1", "n2"}
    store.set_desired("a", {"n0"})  # n1 and n2 leave while a session that had them applies
    assert ledger.release(store.view(store.revision), store.write_status, keep={"n2", "n0"})
    assert store.in_use("a") == {"n0", "n2"}  # n1 let go as the binds are sent; n2 when they return
    assert not ledger.release(store.view(store.revision), store.write_status, keep={"n2"})  # nothing more to let go
    assert ledger.step(store.view(store.revision), store.write_status) == {"n0"}
    assert store.in_use("a") == {"n0"}
