"""The exact container args of Volcano's Helm chart start volcano-py's scheduler, controllers and webhook, and each
honoured flag lands on the option it should (the args: tests/cli/data/volcano-chart-args.yaml)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.flags import parse_controllers, parse_scheduler, parse_webhook

RENDERS: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent / "data" / "volcano-chart-args.yaml").read_text())["renders"]


@dataclass(frozen=True)
class Expect:
    render: str
    scheduler: dict[str, object]
    scheduler_ignored: tuple[str, ...]
    controllers: dict[str, object]
    controllers_ignored: tuple[str, ...]


COMMON_SCHEDULER = {
    "scheduler_conf": "/volcano.scheduler/volcano-scheduler.conf", "serve_addresses": (":8080", ":11251"),
    "rate_limit": (2000.0, 2000), "schedule_period": 1.0, "level": "info",
}
COMMON_CONTROLLERS = {"serve_addresses": (":8081", ":11251"), "rate_limit": (50.0, 100), "workers": 3 + 5 + 5 + 5,
                      "level": "debug", "library_debug": False,
                      # Volcano's chart names its sharding ConfigMap: the sharding controller reads it when turned on
                      "sharding_configmap": "vc-sharding-configmap", "sharding_configmap_namespace": "volcano-system"}
CONTROLLERS_IGNORED = ("2>&1",)

EXPECT = [
    Expect("the chart's default values",
           {**COMMON_SCHEDULER, "leader_elect": False, "scheduler_names": ("volcano-py",)},
           ("node-worker-threads", "2>&1"),
           {**COMMON_CONTROLLERS, "leader_elect": False, "scheduler_names": ("volcano-py",)},
           CONTROLLERS_IGNORED),
    Expect("leader election on, scheduler name volcano, pprof on, percentage of nodes 100",
           {**COMMON_SCHEDULER, "leader_elect": True, "scheduler_names": ("volcano",),
            "lease_namespace": "volcano-system"},
           ("enable-pprof", "node-worker-threads", "2>&1"),
           {**COMMON_CONTROLLERS, "leader_elect": True, "scheduler_names": ("volcano",),
            "lease_namespace": "volcano-system"},
           CONTROLLERS_IGNORED),
]


def _render(name: str) -> dict[str, Any]:
    return next(r for r in RENDERS if r["name"] == name)


def test_every_render_has_expectations() -> None:
    assert [r["name"] for r in RENDERS] == [e.render for e in EXPECT]


@pytest.mark.parametrize("case", EXPECT, ids=lambda e: e.render)
def test_volcanos_scheduler_args(case: Expect) -> None:
    opts = parse_scheduler(_render(case.render)["scheduler"])
    assert {key: getattr(opts, key) for key in case.scheduler} == case.scheduler
    assert tuple(i.arg for i in opts.ignored) == case.scheduler_ignored


@pytest.mark.parametrize("case", EXPECT, ids=lambda e: e.render)
def test_volcanos_controller_manager_args(case: Expect) -> None:
    opts = parse_controllers(_render(case.render)["controllers"])
    assert {key: getattr(opts, key) for key in case.controllers} == case.controllers
    assert tuple(i.arg for i in opts.ignored) == case.controllers_ignored


@pytest.mark.parametrize("render", RENDERS, ids=lambda r: r["name"])
def test_volcanos_webhook_manager_args(render: dict[str, Any]) -> None:
    """vc-admission's args: the paths it enables are served, TLS from its mounted files, its health port; the
    self-registration flags are accepted with a warning each (the chart installs the configurations)."""
    opts = parse_webhook(render["admission"])
    assert (opts.tls_cert_file, opts.tls_private_key_file, opts.port, opts.enable_healthz, opts.healthz_address) == (
        "/admission.local.config/certificates/tls.crt", "/admission.local.config/certificates/tls.key", 8443, True,
        ":11251")
    assert opts.enabled_admission == ("/jobs/mutate", "/jobs/validate", "/podgroups/validate", "/queues/mutate",
                                      "/queues/validate", "/hypernodes/validate", "/cronjobs/validate")
    scheduler_name = [a.split("=", 1)[1] for a in render["admission"] if a.startswith("--scheduler-name=")]
    assert opts.scheduler_names == (tuple(scheduler_name) or ("volcano-py",))
    assert tuple(i.arg for i in opts.ignored) == ("ca-cert-file", "admission-conf", "webhook-namespace",
                                                  "webhook-service-name", "2>&1")
