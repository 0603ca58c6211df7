"""Go-style flags of `volcano-py scheduler` and `volcano-py controllers`: Volcano's and ours, honoured or
accepted with one warning; unknown flags are errors naming the closest known one."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from scheduler.cache.client import TokenBucket
from scheduler.cli import main
from scheduler.flags import (
    CONTROLLERS,
    SCHEDULER,
    FlagError,
    FlagSet,
    HelpRequested,
    parse_controllers,
    parse_scheduler,
)

DATA = Path(__file__).parent / "data"
VOLCANO_FLAGS = yaml.safe_load((DATA / "volcano-flags.yaml").read_text())


@dataclass(frozen=True)
class Syntax:
    name: str
    argv: tuple[str, ...]
    expect: dict[str, object]
    ignored: tuple[str, ...] = ()


SYNTAX = [
    Syntax("--flag=value", ("--scheduler-conf=/c.conf",), {"scheduler_conf": "/c.conf"}),
    Syntax("--flag value", ("--scheduler-conf", "/c.conf"), {"scheduler_conf": "/c.conf"}),
    Syntax("-flag=value, as Go's flag package", ("-scheduler-conf=/c.conf",), {"scheduler_conf": "/c.conf"}),
    Syntax("-flag value", ("-default-queue", "q1"), {"default_queue": "q1"}),
    Syntax("-v=3", ("-v=3",), {"verbosity": 3, "level": "info"}),
    Syntax("-v 4 is debug", ("-v", "4"), {"verbosity": 4, "level": "debug"}),
    Syntax("-v5 (pflag's attached shorthand) is trace", ("-v5",), {"verbosity": 5, "level": "trace"}),
    Syntax("--v=2", ("--v=2",), {"verbosity": 2}),
    Syntax("--log-level wins over -v", ("-v=5", "--log-level=debug"), {"level": "debug"}),
    Syntax("a bare boolean is true", ("--leader-elect",), {"leader_elect": True}),
    Syntax("--flag=true", ("--enable-healthz=true",), {"enable_healthz": True}),
    Syntax("--flag=false", ("--leader-elect=false",), {"leader_elect": False}),
    Syntax("Go's other booleans", ("--enable-healthz=T", "--leader-elect=0"), {"enable_healthz": True,
                                                                              "leader_elect": False}),
    Syntax("a boolean never takes the next argument", ("--leader-elect", "false"), {"leader_elect": True},
           ignored=("false",)),
    Syntax("underscores are dashes (klog's spelling)", ("--scheduler_conf=/c.conf", "--log_dir=/tmp"),
           {"scheduler_conf": "/c.conf"}, ignored=("log-dir",)),
    Syntax("the scheduler name repeats, replacing the default", ("--scheduler-name=volcano", "--scheduler-name",
                                                                  "volcano-py"),
           {"scheduler_names": ("volcano", "volcano-py")}),
    Syntax("durations take Go's grammar", ("--schedule-period=1m30s", "--partial-gang-timeout=2h"),
           {"schedule_period": 90.0, "partial_gang_timeout": 7200.0}),
    Syntax("a plain number of seconds still works", ("--partial-gang-timeout", "90"), {"partial_gang_timeout": 90.0}),
    Syntax("leader-election durations", ("--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s",
                                          "--leader-elect-retry-period=500ms"),
           {"leader_elect_lease_duration": 30.0, "leader_elect_renew_deadline": 20.0,
            "leader_elect_retry_period": 0.5}),
    Syntax("Volcano's lease flags are aliases of ours", ("--leader-elect-resource-namespace=volcano-system",
                                                          "--leader-elect-resource-name=volcano"),
           {"lease_namespace": "volcano-system", "leader_elect_lease_name": "volcano"}),
    Syntax("--lock-object-namespace overrides the resource namespace, as in Volcano",
           ("--lock-object-namespace=old", "--leader-elect-resource-namespace=new"), {"lease_namespace": "old"}),
    Syntax("-- ends the flags", ("--", "--scheduler-conf=x"), {"scheduler_conf": None},
           ignored=("--scheduler-conf=x",)),
    Syntax("a stray argument is ignored", ("2>&1",), {}, ignored=("2>&1",)),
    Syntax("a flag without effect warns once", ("--node-worker-threads=20", "--node-worker-threads=30"), {},
           ignored=("node-worker-threads",)),
    Syntax("a value that asks for what volcano-py does anyway does not warn",
           ("--logtostderr", "--priority-class=true", "--enable-pprof=false", "--scheduler-sharding-mode=none",
            "--leader-elect-resource-lock=leases", "--percentage-nodes-to-find=100"), {}),
    Syntax("the same flags asking otherwise warn",
           ("--logtostderr=false", "--priority-class=false", "--percentage-nodes-to-find=50"), {},
           ignored=("logtostderr", "priority-class", "percentage-nodes-to-find")),
    Syntax("QPS and burst set the token bucket", ("--kube-api-qps=20", "--kube-api-burst=30"),
           {"rate_limit": (20.0, 30)}),
    Syntax("QPS alone takes Volcano's burst", ("--kube-api-qps=20",), {"rate_limit": (20.0, 2000)}),
    Syntax("QPS 0 is client-go's default 5", ("--kube-api-qps=0", "--kube-api-burst=0"), {"rate_limit": (5.0, 10)}),
    Syntax("a negative QPS is no limit", ("--kube-api-qps=-1",), {"rate_limit": None}),
    Syntax("no QPS flag is no limit", (), {"rate_limit": None}),
    Syntax("--master and --kubeconfig", ("--master=https://k:6443", "--kubeconfig=/k"),
           {"master": "https://k:6443", "kubeconfig": "/k"}),
    Syntax("--resource-sync-timeout", ("--resource-sync-timeout=0",), {"resource_sync_timeout": 0.0}),
]


@pytest.mark.parametrize("case", SYNTAX, ids=lambda c: c.name)
def test_scheduler_flags_in_go_syntax(case: Syntax) -> None:
    opts = parse_scheduler(case.argv)
    assert {key: getattr(opts, key) for key in case.expect} == case.expect
    assert tuple(i.arg for i in opts.ignored) == case.ignored


@dataclass(frozen=True)
class Serving:
    name: str
    argv: tuple[str, ...]
    addresses: tuple[str, ...]
    controllers: tuple[str, ...] = field(default=())


SERVING = [
    Serving("nothing is served by default", (), ()),
    Serving("volcano-py's --listen-address alone serves", ("--listen-address=:9090",), (":9090",), (":9090",)),
    Serving("Volcano's --enable-metrics serves on its default address", ("--enable-metrics",), (":8080",),
            (":8081",)),
    Serving("--enable-metrics=false serves no metrics address", ("--listen-address=:9090", "--enable-metrics=false"),
            ()),
    Serving("--enable-healthz adds Volcano's health address", ("--enable-healthz=true", "--enable-metrics=true"),
            (":8080", ":11251"), (":8081", ":11251")),
    Serving("the health address is served once", ("--listen-address=:9", "--enable-healthz", "--healthz-address=:9"),
            (":9",)),
]


@pytest.mark.parametrize("case", SERVING, ids=lambda c: c.name)
def test_metrics_and_health_addresses(case: Serving) -> None:
    assert parse_scheduler(case.argv).serve_addresses == case.addresses
    assert parse_controllers(case.argv).serve_addresses == (case.controllers or case.addresses)


@pytest.mark.parametrize(("flags", "component"), [(SCHEDULER, "scheduler"), (CONTROLLERS, "controllers")])
def test_every_volcano_flag_is_known(flags: FlagSet, component: str) -> None:
    names = VOLCANO_FLAGS[component]
    assert len(names) > 40
    assert [n for n in names if flags.lookup(n) is None] == []


@pytest.mark.parametrize(("flags", "component"), [(SCHEDULER, "scheduler"), (CONTROLLERS, "controllers")])
def test_a_flag_without_effect_says_why(flags: FlagSet, component: str) -> None:
    for flag in flags.flags:
        assert flag.honoured or flag.no_effect, flag.name
        assert not (flag.honoured and flag.no_effect), flag.name


def test_the_defaults_keep_volcano_pys_names_and_modes() -> None:
    sched, ctl = parse_scheduler([]), parse_controllers([])
    assert (sched.scheduler_names, sched.leader_elect, sched.leader_elect_lease_name) == (
        ("volcano-py",), False, "volcano-py-scheduler")
    assert (ctl.scheduler_names, ctl.leader_elect, ctl.leader_elect_lease_name) == (
        ("volcano-py",), True, "volcano-py-controllers")
    assert (sched.schedule_period, sched.partial_gang_timeout, sched.leader_elect_lease_duration) == (1.0, 60.0, 15.0)


@pytest.mark.parametrize(("argv", "expect"), [
    (("--no-leader-elect",), {"leader_elect": False}),
    (("--claim-unnamed", "--scheduler-name", "volcano"), {"claim_unnamed": True, "scheduler_names": ("volcano",)}),
    ((), {"workers": 16, "level": "info", "library_debug": False}),
    (("--worker-threads=3", "--worker-threads-for-gc=5", "--worker-threads-for-podgroup=5"), {"workers": 18}),
    (("-v=4",), {"level": "debug", "library_debug": False}),
    (("-v=6",), {"level": "debug", "library_debug": True}),
    (("--log-level=debug",), {"level": "debug", "library_debug": True}),
    (("--kube-api-burst=7",), {"rate_limit": (50.0, 7)}),
], ids=str)
def test_controller_flags(argv: tuple[str, ...], expect: dict[str, object]) -> None:
    opts = parse_controllers(argv)
    assert {key: getattr(opts, key) for key in expect} == expect


@dataclass(frozen=True)
class Bad:
    argv: tuple[str, ...]
    flag: str
    suggestion: str | None = None


BAD = [
    Bad(("--scheduler-nmae=volcano",), "scheduler-nmae", "scheduler-name"),
    Bad(("--leader-elect-lease-duraton", "1s"), "leader-elect-lease-duraton", "leader-elect-lease-duration"),
    Bad(("--frobnicate",), "frobnicate", None),
    Bad(("--schedule-period",), "schedule-period"),
    Bad(("--schedule-period=1d",), "schedule-period"),
    Bad(("--leader-elect=yes",), "leader-elect"),
    Bad(("--kube-api-burst=lots",), "kube-api-burst"),
    Bad(("--log-level=loud",), "log-level"),
    Bad(("--no-leader-elect=true",), "no-leader-elect"),
]


@pytest.mark.parametrize("case", BAD, ids=lambda c: " ".join(c.argv))
def test_bad_flags_name_the_flag(case: Bad) -> None:
    with pytest.raises(FlagError) as caught:
        parse_scheduler(case.argv)
    assert (caught.value.flag, caught.value.suggestion) == (case.flag, case.suggestion)


def test_controllers_do_not_take_scheduler_only_flags() -> None:
    with pytest.raises(FlagError) as caught:
        parse_controllers(["--schedule-period=1s"])
    assert caught.value.flag == "schedule-period"


@pytest.mark.parametrize("argv", [["scheduler", "--scheduler-nmae=x"], ["controllers", "--bogus"],
                                  ["scheduler", "--leader-elect", "--leader-elect-retry-period=20s"],
                                  ["scheduler", "--disable-default-scheduler-config"]])
def test_the_command_exits_2_on_a_bad_command_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("command", ["scheduler", "controllers"])
def test_help_and_version_exit_0(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(HelpRequested):
        parse_scheduler(["-h"])
    assert main([command, "--help"]) == 0
    listed = [word.rstrip(",") for word in capsys.readouterr().out.split()]
    assert "--scheduler-name" in listed and "--leader-elect" in listed
    assert main([command, "-version"]) == 0


def test_the_token_bucket_lets_a_burst_through_then_paces() -> None:
    now = [0.0]
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    bucket = TokenBucket(10.0, 3, clock=lambda: now[0], sleep=sleep)
    for _ in range(5):
        bucket.take()
    assert waits == pytest.approx([0.1, 0.1])
    now[0] += 10.0  # idle: the bucket refills up to the burst, not beyond
    for _ in range(3):
        bucket.take()
    assert len(waits) == 2
    bucket.take()
    assert waits[-1] == pytest.approx(0.1)
