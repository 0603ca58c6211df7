"""Which configuration the sharding controller syncs with (`ShardingController.configuration`): the ConfigMap's when
it is readable, the last good one when it is not, and `--scheduler-configs` while there has been no good one."""

from __future__ import annotations

from typing import Any

from scheduler.controllers.sharding import ShardingController, ShardingOptions


class ConfigMaps:
    """Answers the controller's GET of its ConfigMap with `cm` (None: 404)."""

    def __init__(self) -> None:
        self.cm: dict[str, Any] | None = None

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        return self.cm

    def set(self, text: str, version: str) -> None:
        self.cm = {"metadata": {"resourceVersion": version}, "data": {"sharding.yaml": text}}


def controller() -> tuple[ShardingController, ConfigMaps]:
    kube = ConfigMaps()
    flags = ShardingOptions(scheduler_configs=("from-flags:volcano:0.0:0.6:false:2:100",))
    return ShardingController(kube, flags), kube  # type: ignore[arg-type]


def names(c: ShardingController) -> list[str]:
    conf = c.configuration()
    return [s.name for s in conf.schedulers] if conf is not None else []


def test_a_malformed_configmap_keeps_the_flags_on_every_sync_until_a_good_one() -> None:
    c, kube = controller()
    assert names(c) == ["from-flags"]  # no ConfigMap
    kube.set("schedulerConfigs: [", "7")  # malformed, and no good one read before
    assert names(c) == ["from-flags"]
    assert names(c) == ["from-flags"]  # the same resourceVersion again: not read again, still the flags
    kube.set("schedulerConfigs:\n- {name: from-map}\n", "8")
    assert names(c) == ["from-map"]
    kube.set("schedulerConfigs: [", "9")  # malformed again: the last good one stays
    assert names(c) == ["from-map"]
    assert names(c) == ["from-map"]


def test_the_sync_period_is_volcanos_with_a_floor_of_a_second() -> None:
    c, kube = controller()
    assert c.period == 60.0
    for given, period in (("30s", 30.0), ("1ms", 1.0), ("0s", 120.0), ("-5s", 120.0)):
        kube.set(f"schedulerConfigs:\n- {{name: s}}\nshardSyncPeriod: {given}\n", given)
        c.configuration()
        assert c.period == period, given
    assert ShardingController(kube, ShardingOptions(sync_period=0.001)).period == 1.0  # type: ignore[arg-type]


def test_malformed_scheduler_configs_flags_leave_the_configmap_alone_in_force() -> None:
    """As Volcano's Initialize: a warning, not a controller-manager that fails to start (its other controllers)."""
    kube = ConfigMaps()
    c = ShardingController(kube, ShardingOptions(scheduler_configs=("a:b:c",)))  # type: ignore[arg-type]
    assert c.flag_conf is None and c.configuration() is None
    kube.set("schedulerConfigs:\n- {name: from-map}\n", "1")
    assert names(c) == ["from-map"]
