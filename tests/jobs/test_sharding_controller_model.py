"""The sharding controller's pure parts: its ConfigMap read as Volcano reads it (pkg/controllers/sharding/config.go,
policy/*), node utilization from pod requests, the policy pipeline and Volcano's quirks (batches of 50, the 10%
update rule), and the writes, which never leave a node desired by two shards at once."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from scheduler.controllers.sharding_conf import (
    ALLOCATION_RATE,
    NODE_LIMIT,
    WARMUP,
    ShardingConfError,
    parse_conf,
    parse_flag_configs,
)
from scheduler.controllers.sharding_model import NodeUse, assign, needs_update, node_uses, pipeline, plan

CONF = """
schedulerConfigs:
- name: volcano
  type: volcano
  policies:
  - name: allocation-rate
    arguments: {minCPUUtil: 0.0, maxCPUUtil: 0.6}
  - name: node-limit
    arguments: {maxNodes: 2}
- name: agent-scheduler
  type: agent
  policies:
  - name: allocation-rate
    weight: 2
    arguments: {minCPUUtil: 0.7, maxCPUUtil: 1.0}
  - name: warmup
shardSyncPeriod: 30s
enableNodeEventTrigger: false
"""


def test_the_configmap_is_read_with_its_policies_period_and_trigger() -> None:
    conf = parse_conf(CONF)
    assert [s.name for s in conf.schedulers] == ["volcano", "agent-scheduler"]
    volcano, agent = conf.schedulers
    assert [(p.name, p.weight) for p in volcano.policies] == [(ALLOCATION_RATE, 1), (NODE_LIMIT, 1)]
    assert volcano.policies[0].max_cpu == 0.6 and volcano.policies[1].max_nodes == 2
    assert [(p.name, p.weight) for p in agent.policies] == [(ALLOCATION_RATE, 2), (WARMUP, 1)]
    assert agent.policies[1].label == "node.volcano.sh/warmup"
    assert conf.sync_period == 30.0 and conf.node_event_trigger is False


def test_deprecated_scalars_become_a_chain_as_volcano_makes_it() -> None:
    conf = parse_conf("schedulerConfigs:\n- {name: s, type: t, cpuUtilizationMin: 0.1, cpuUtilizationMax: 0.5,"
                      " preferWarmupNodes: true, minNodes: 1, maxNodes: 3}\n")
    (s,) = conf.schedulers
    assert [p.name for p in s.policies] == [ALLOCATION_RATE, WARMUP, NODE_LIMIT]
    assert (s.policies[0].min_cpu, s.policies[0].max_cpu, s.policies[2].max_nodes) == (0.1, 0.5, 3)


def test_the_flag_defaults_are_volcanos() -> None:
    conf = parse_flag_configs(("volcano:volcano:0.0:0.6:false:2:100", "agent-scheduler:agent:0.7:1.0:true:2:100"))
    volcano, agent = conf.schedulers
    # parseOldFormat gives an allocation-rate chain, so preferWarmup adds no warmup policy; node-limit is appended
    assert [p.name for p in agent.policies] == [ALLOCATION_RATE, NODE_LIMIT]
    assert (volcano.policies[0].max_cpu, volcano.policies[1].max_nodes) == (0.6, 100)


@pytest.mark.parametrize("text", [
    "schedulerConfigs: []",
    "schedulerConfigs:\n- {type: t}",
    "schedulerConfigs:\n- {name: s, cpuUtilizationMin: 0.8, cpuUtilizationMax: 0.2}",
    "schedulerConfigs:\n- {name: s, minNodes: 3, maxNodes: 1}",
    "schedulerConfigs:\n- {name: s, policies: [{name: nope}]}",
    "schedulerConfigs:\n- {name: s, policies: [{name: warmup, weight: -1}]}",
    "schedulerConfigs:\n- {name: s, policies: [{name: warmup, arguments: {maxNodes: 3}}]}",
    "schedulerConfigs:\n- {name: s, policies: [{name: allocation-rate, arguments: {minCPUUtil: x}}]}",
    "schedulerConfigs:\n- {name: s, policies: [{name: allocation-rate, arguments: {maxCPUUtil: 2}}]}",
    "schedulerConfigs: {a: 1}",
    "[unclosed",
    "x" * ((1 << 20) + 1),
])
def test_a_malformed_configuration_is_refused(text: str) -> None:
    with pytest.raises(ShardingConfError):
        parse_conf(text)


def test_a_bad_sync_period_keeps_the_current_one_with_a_note() -> None:
    conf = parse_conf("schedulerConfigs:\n- {name: s}\nshardSyncPeriod: soon\n")
    assert conf.sync_period is None and any("shardSyncPeriod" in n for n in conf.notes)


def node(name: str, cpu: str = "10", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "status": {"capacity": {"cpu": cpu}}}


def pod(node_name: str, cpu: str, phase: str = "Running", mirror: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"annotations": {"kubernetes.io/config.mirror": "x"}} if mirror else {}
    container = {"resources": {"requests": {"cpu": cpu}}}
    return {"metadata": meta, "spec": {"nodeName": node_name, "containers": [container]}, "status": {"phase": phase}}


def test_utilization_is_requests_over_capacity_without_finished_or_mirror_pods() -> None:
    uses = node_uses([node("b"), node("a", cpu="4")],
                     [pod("a", "1"), pod("a", "1", "Succeeded"), pod("a", "500m", mirror=True), pod("b", "20")])
    assert [(u.name, u.cpu_util) for u in uses] == [("a", 0.25), ("b", 1.0)]


def test_pipeline_filters_scores_and_limits() -> None:
    conf = parse_conf(CONF)
    nodes = [NodeUse("a", 0.1), NodeUse("b", 0.5), NodeUse("c", 0.3), NodeUse("d", 0.9),
             NodeUse("e", 0.8, {"node.volcano.sh/warmup": "true"})]
    # volcano packs: highest utilization in [0, 0.6] first, two at most
    assert pipeline(conf.schedulers[0], nodes) == ["b", "c"]
    # agent: 2 x util score + warmup: e (2*0.33+1) before d (2*0.67)
    assert assign(conf.schedulers, nodes) == {"volcano": ["b", "c"], "agent-scheduler": ["e", "d"]}


def test_node_limit_caps_each_batch_of_fifty_as_volcano_does() -> None:
    conf = parse_conf("schedulerConfigs:\n- {name: s, policies: [{name: node-limit, arguments: {maxNodes: 10}}]}\n")
    nodes = [NodeUse(f"n{i:03d}", 0.0) for i in range(120)]
    assert len(assign(conf.schedulers, nodes)["s"]) == 30  # 10 from each of the 3 batches


def test_ten_percent_rule() -> None:
    old = [f"n{i}" for i in range(20)]
    assert not needs_update(old, [*old[:19], "x"])  # 1 of 20 changed
    assert needs_update(old, [*old[:18], "x", "y"])  # 2 of 20
    assert needs_update(old, old[:19])  # the size changed


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 11), max_size=12), min_size=3, max_size=3),
       st.lists(st.floats(0, 1), min_size=12, max_size=12))
def test_writes_never_leave_a_node_desired_by_two_shards(old: list[list[int]], utils: list[float]) -> None:
    conf = parse_conf("schedulerConfigs:\n"
                      "- {name: a, policies: [{name: allocation-rate, arguments: {minCPUUtil: 0, maxCPUUtil: 0.5}}]}\n"
                      "- {name: b, policies: [{name: allocation-rate, arguments: {minCPUUtil: 0.3, maxCPUUtil: 1}}]}\n")
    nodes = [NodeUse(f"n{i:02d}", u) for i, u in enumerate(utils)]
    current: dict[str, list[str]] = {}
    seen: set[int] = set()
    for name, picks in zip(("a", "b", "stale"), old, strict=True):  # disjoint to start with
        current[name] = [f"n{i:02d}" for i in dict.fromkeys(picks) if i not in seen]
        seen.update(picks)
    writes = plan(conf.schedulers, nodes, current)
    state = dict(current)

    def disjoint() -> None:
        names = [n for nodes_ in state.values() for n in nodes_]
        assert len(names) == len(set(names)), state

    for name in writes.delete:
        del state[name]
        disjoint()
    for group in (writes.first, writes.create, writes.second):
        for name, desired in group.items():
            state[name] = desired
            disjoint()
    assert "stale" not in state and set(state) == {"a", "b"}
