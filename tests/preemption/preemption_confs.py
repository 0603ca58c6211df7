"""Shared configs for the preemption, reclaim and starvation tests."""

from __future__ import annotations

from typing import Any

from scheduler.framework.conf import SchedulerConf
from scheduler.testing import conf_from_tiers

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
    return conf_from_tiers(first, second, actions=actions, configurations=configurations)
