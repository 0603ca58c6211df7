"""Shared configs for the preemption, reclaim and starvation tests."""

from __future__ import annotations

from typing import Any

import yaml

from scheduler.actions import ACTIONS
from scheduler.framework.conf import SchedulerConf, parse_conf
from scheduler.plugins.registry import PLUGINS

ALL_ACTIONS = "enqueue, allocate, preempt, reclaim, backfill"
FIRST_TIER = ("priority", "gang", "conformance")
SECOND_TIER = ("overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack")


def make_conf(
    actions: str = ALL_ACTIONS,
    *,
    first: tuple[str, ...] = FIRST_TIER,
    second: tuple[str, ...] = SECOND_TIER,
    configurations: dict[str, dict[str, Any]] | None = None,
) -> SchedulerConf:
    doc: dict[str, Any] = {
        "actions": actions,
        "tiers": [{"plugins": [{"name": n} for n in first]}, {"plugins": [{"name": n} for n in second]}],
    }
    if configurations:
        doc["configurations"] = [{"name": k, "arguments": v} for k, v in configurations.items()]
    return parse_conf(
        yaml.safe_dump(doc), source="test.conf", implemented_actions=ACTIONS.keys(), implemented_plugins=PLUGINS.keys()
    )
