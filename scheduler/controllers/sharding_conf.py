"""Layer `controllers`: the sharding controller's configuration, read as Volcano's reads it, bounded.

The ConfigMap `volcano-sharding-configmap` (key `sharding.yaml`; `--sharding-configmap`,
`--sharding-configmap-namespace`) holds `schedulerConfigs[] {name, type, policies[] {name, weight, arguments}}` (and
the deprecated scalars cpuUtilizationMin/Max, preferWarmupNodes, minNodes/maxNodes), `shardSyncPeriod` and
`enableNodeEventTrigger`. Without the ConfigMap, the deprecated `--scheduler-configs` entries
(`name:type:minUtil:maxUtil:preferWarmup:minNodes:maxNodes`) apply. Volcano: pkg/controllers/sharding/config.go
(ParseShardingConfig, validatePolicies, applyPolicyDefaults, parseOldFormat), sharding_controller.go toPolicyRefs,
policy/*/ Initialize.

Stricter than Volcano: a policy it does not know or whose arguments its Initialize refuses makes the whole
configuration invalid here (Volcano goes on with the schedulers configured before it, and none of the policies of
the rest); an invalid configuration keeps the last good one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.controllers.configmap import load_yaml
from scheduler.durations import DurationError, parse_go_duration

CONFIGMAP_NAME = "volcano-sharding-configmap"
CONFIGMAP_NAMESPACE = "volcano-system"
CONFIGMAP_KEY = "sharding.yaml"
DEFAULT_SCHEDULER_CONFIGS = ("volcano:volcano:0.0:0.6:false:2:100", "agent-scheduler:agent:0.7:1.0:true:2:100")
DEFAULT_SYNC_PERIOD = 60.0  # --shard-sync-period
FALLBACK_SYNC_PERIOD = 120.0  # sharding_controller.go defaultShardSyncPeriod: a period <= 0
# Stricter than Volcano, whose sync reads informer caches: each sync here lists nodes, pods and NodeShards from
# the apiserver, so a period of "1ms" would list them without pause.
MIN_SYNC_PERIOD = 1.0
MAX_CONF_BYTES = 1 << 20  # a ConfigMap's value
MAX_SCHEDULERS = 64
MAX_POLICIES = 16
NAME_MAX = 253
MAX_NODES = 1_000_000

ALLOCATION_RATE, WARMUP, NODE_LIMIT = "allocation-rate", "warmup", "node-limit"
WARMUP_LABEL, WARMUP_VALUE = "node.volcano.sh/warmup", "true"


class ShardingConfError(ValueError):
    """A configuration that cannot be used (the last good one stays)."""


@dataclass(frozen=True, slots=True)
class Policy:
    """One policy of a scheduler's chain, its arguments read (policy/*/ Initialize)."""

    name: str
    weight: int = 1
    min_cpu: float = 0.0  # allocation-rate, rounded to hundredths as Volcano compares them
    max_cpu: float = 0.0
    label: str = WARMUP_LABEL  # warmup
    value: str = WARMUP_VALUE
    min_nodes: int = 0  # node-limit
    max_nodes: int = 0


@dataclass(frozen=True, slots=True)
class SchedulerShardConf:
    name: str
    type: str
    policies: tuple[Policy, ...]


@dataclass(frozen=True, slots=True)
class ShardingConf:
    schedulers: tuple[SchedulerShardConf, ...]
    sync_period: float | None = None  # seconds; None: keep the current one
    node_event_trigger: bool | None = None
    notes: tuple[str, ...] = field(default=())  # what Volcano would warn about


def sync_period(seconds: float) -> float:
    """The period a sync waits for: FALLBACK_SYNC_PERIOD for one <= 0 (as Volcano), at least MIN_SYNC_PERIOD."""
    return FALLBACK_SYNC_PERIOD if seconds <= 0 else max(MIN_SYNC_PERIOD, seconds)


def _round(u: float) -> float:
    return round(u * 100) / 100  # allocationrate.go roundUtil (math.Round: half away from zero; utils are >= 0)


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ShardingConfError(f"{what}: {str(value)[:40]!r} is not a number")
    return float(value)


def _integer(value: Any, what: str) -> int:
    number = _number(value, what)
    if abs(number) > MAX_NODES:
        raise ShardingConfError(f"{what}: {value} is out of range")
    return int(number)  # Volcano's Arguments.GetInt truncates a float


def _text(value: Any, what: str, *, empty: bool = False) -> str:
    if value is None and empty:
        return ""
    if not isinstance(value, str) or len(value) > NAME_MAX or (not value and not empty):
        raise ShardingConfError(f"{what}: {str(value)[:40]!r} is not a name")
    return value


def _policy(index: int, sched: str, j: int, raw: Any) -> Policy:
    where = f"schedulerConfigs[{index}] ({sched}): policies[{j}]"
    if not isinstance(raw, Mapping):
        raise ShardingConfError(f"{where}: not an object")
    name = _text(raw.get("name"), f"{where}.name")
    weight = _integer(raw.get("weight", 0) or 0, f"{where}.weight")
    if weight < 0:
        raise ShardingConfError(f"{where} ({name}): weight must be >= 0 (omit for default of 1)")
    args = raw.get("arguments") or {}
    if not isinstance(args, Mapping):
        raise ShardingConfError(f"{where} ({name}): arguments is not an object")
    if name != NODE_LIMIT and ("minNodes" in args or "maxNodes" in args):
        raise ShardingConfError(f"{where} ({name}): minNodes/maxNodes are only supported by the node-limit policy")
    return make_policy(name, weight or 1, args, where)


def make_policy(name: str, weight: int, args: Mapping[str, Any], where: str) -> Policy:
    if name == ALLOCATION_RATE:
        lo = _number(args.get("minCPUUtil", 0.0), f"{where}.arguments.minCPUUtil")
        hi = _number(args.get("maxCPUUtil", 0.0), f"{where}.arguments.maxCPUUtil")
        if lo < 0 or hi > 1 or lo > hi:
            raise ShardingConfError(f"{where}: invalid CPU utilization range [{lo:.2f}, {hi:.2f}]: must be within "
                                    "[0.0, 1.0] and min <= max")
        return Policy(name, weight, min_cpu=_round(lo), max_cpu=_round(hi))
    if name == WARMUP:
        label = _text(args.get("warmupLabel", WARMUP_LABEL), f"{where}.arguments.warmupLabel")
        value = _text(args.get("warmupLabelValue", WARMUP_VALUE), f"{where}.arguments.warmupLabelValue", empty=True)
        return Policy(name, weight, label=label, value=value)
    if name == NODE_LIMIT:
        lo = _integer(args.get("minNodes", 0), f"{where}.arguments.minNodes")
        hi = _integer(args.get("maxNodes", 0), f"{where}.arguments.maxNodes")
        if lo < 0 or (hi > 0 and hi < lo):
            raise ShardingConfError(f"{where}: invalid node-limit bounds [{lo}, {hi}]")
        return Policy(name, weight, min_nodes=lo, max_nodes=hi)
    raise ShardingConfError(f"{where}: policy {name!r} not found (known: {ALLOCATION_RATE}, {WARMUP}, {NODE_LIMIT})")


def _scheduler(index: int, raw: Any, notes: list[str]) -> SchedulerShardConf:
    if not isinstance(raw, Mapping):
        raise ShardingConfError(f"schedulerConfigs[{index}]: not an object")
    name = _text(raw.get("name"), f"schedulerConfigs[{index}].name")
    kind = _text(raw.get("type"), f"schedulerConfigs[{index}].type", empty=True)
    where = f"schedulerConfigs[{index}] ({name})"
    lo = _number(raw.get("cpuUtilizationMin", 0.0), f"{where}.cpuUtilizationMin")
    hi = _number(raw.get("cpuUtilizationMax", 0.0), f"{where}.cpuUtilizationMax")
    if not 0 <= lo <= 1 or not 0 <= hi <= 1 or lo > hi:
        raise ShardingConfError(f"{where}: cpuUtilizationMin/Max [{lo}, {hi}] must be within [0,1] and min <= max")
    min_nodes = _integer(raw.get("minNodes", 0), f"{where}.minNodes")
    max_nodes = _integer(raw.get("maxNodes", 0), f"{where}.maxNodes")
    if min_nodes < 0 or max_nodes < min_nodes:
        raise ShardingConfError(f"{where}: minNodes {min_nodes} / maxNodes {max_nodes}: need 0 <= min <= max")
    raw_policies = raw.get("policies") or []
    if not isinstance(raw_policies, list) or len(raw_policies) > MAX_POLICIES:
        raise ShardingConfError(f"{where}.policies: not a list of at most {MAX_POLICIES}")
    policies = [_policy(index, name, j, p) for j, p in enumerate(raw_policies)]
    warmup = raw.get("preferWarmupNodes", False)
    if not isinstance(warmup, bool):
        raise ShardingConfError(f"{where}.preferWarmupNodes: not a boolean")
    args = raw.get("arguments") or {}
    if not isinstance(args, Mapping):
        raise ShardingConfError(f"{where}.arguments: not an object")
    return with_defaults(name, kind, policies, args, lo, hi, warmup, min_nodes, max_nodes, notes)


def with_defaults(name: str, kind: str, policies: list[Policy], args: Mapping[str, Any], lo: float, hi: float,
                  warmup: bool, min_nodes: int, max_nodes: int, notes: list[str]) -> SchedulerShardConf:
    """config.go applyPolicyDefaults: no chain -> allocation-rate from `arguments` (else the scalars), plus warmup
    when preferWarmupNodes; minNodes/maxNodes without a node-limit policy -> one appended."""
    where = f"scheduler {name}"
    if not policies:
        given = dict(args) if args else {"minCPUUtil": lo, "maxCPUUtil": hi}
        policies = [make_policy(ALLOCATION_RATE, 1, given, where)]
        if warmup:
            notes.append(f"scheduler {name!r}: preferWarmupNodes is deprecated; use policy=warmup")
            policies.append(make_policy(WARMUP, 1, {}, where))
    if (min_nodes > 0 or max_nodes > 0) and not any(p.name == NODE_LIMIT for p in policies):
        notes.append(f"scheduler {name!r}: scheduler-level minNodes/maxNodes are deprecated; use the node-limit "
                     "policy")
        policies.append(make_policy(NODE_LIMIT, 1, {"minNodes": min_nodes, "maxNodes": max_nodes}, where))
    return SchedulerShardConf(name, kind, tuple(policies))


def parse_conf(text: str) -> ShardingConf:
    """The ConfigMap's `sharding.yaml`, or ShardingConfError."""
    raw = load_yaml(text, what="sharding.yaml", limit=MAX_CONF_BYTES, error=ShardingConfError)
    if not isinstance(raw, Mapping):
        raise ShardingConfError("not an object")
    items = raw.get("schedulerConfigs")
    if not isinstance(items, list) or not items:
        raise ShardingConfError("sharding config must contain at least one schedulerConfig entry")
    if len(items) > MAX_SCHEDULERS:
        raise ShardingConfError(f"{len(items)} schedulerConfigs, more than {MAX_SCHEDULERS}")
    notes: list[str] = []
    schedulers = tuple(_scheduler(i, item, notes) for i, item in enumerate(items))
    period = None
    given = raw.get("shardSyncPeriod")
    if given not in (None, ""):
        try:
            if not isinstance(given, str) or len(given) > 64:
                raise DurationError("not a duration")
            period = parse_go_duration(given) / 1e9
        except DurationError:  # Volcano warns and keeps the current period
            notes.append(f"invalid shardSyncPeriod {str(given)[:40]!r}: keeping the current period")
    trigger = raw.get("enableNodeEventTrigger")
    if trigger is not None and not isinstance(trigger, bool):
        raise ShardingConfError("enableNodeEventTrigger: not a boolean")
    return ShardingConf(schedulers, period, trigger, tuple(notes))


def parse_flag_configs(entries: Sequence[str]) -> ShardingConf:
    """`--scheduler-configs` (deprecated in Volcano): `name:type:minUtil:maxUtil:preferWarmup:minNodes:maxNodes`,
    as config.go parseOldFormat reads it (an allocation-rate chain; the node-limit one appended)."""
    schedulers = []
    notes: list[str] = []
    for entry in entries:
        parts = entry.split(":")
        if len(parts) != 7:
            raise ShardingConfError(f"invalid scheduler config format: {entry}, expected 7 colon-separated parts")
        name, kind = _text(parts[0], "name"), parts[1]
        try:
            lo, hi = (_util(p) for p in parts[2:4])
            warmup = {"true": True, "false": False, "1": True, "0": False}[parts[4].lower()]
            min_nodes, max_nodes = int(parts[5]), int(parts[6])
        except (KeyError, ValueError):
            raise ShardingConfError(f"failed to parse scheduler config {entry}") from None
        policy = make_policy(ALLOCATION_RATE, 1, {"minCPUUtil": lo, "maxCPUUtil": hi}, f"scheduler {name}")
        schedulers.append(with_defaults(name, kind, [policy], {}, lo, hi, warmup, min_nodes, max_nodes, notes))
    return ShardingConf(tuple(schedulers), notes=tuple(notes))


def _util(text: str) -> float:
    if text in ("inf", "infinity"):
        return 1.0
    if text in ("-inf", "-infinity"):
        return 0.0
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value
