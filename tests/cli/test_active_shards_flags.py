"""`volcano-py scheduler --active-shards`: a count outside 0..64, or one beside Volcano's sharding modes (both would
write the NodeShards), is a user error (exit 2) found before anything connects; the default is one active
replica."""

from __future__ import annotations

import pytest

from scheduler.cli import run_component
from scheduler.flags import parse_scheduler


def test_the_default_is_one_active_replica() -> None:
    opts = parse_scheduler([])
    assert opts.active_shards == 0 and opts.shard_topology_label == ""
    assert opts.bind_workers == 16 and parse_scheduler(["--bind-workers", "64"]).bind_workers == 64


@pytest.mark.parametrize(("args", "message"), [
    (["--active-shards", "65"], "--active-shards: 65 is not between 0 and 64"),
    (["--active-shards", "-1"], "--active-shards: -1 is not between 0 and 64"),
    (["--active-shards", "2", "--scheduler-sharding-mode", "soft"], "cannot be used with --scheduler-sharding-mode"),
    (["--active-shards", "2", "--leader-elect-lease-duration", "1s"], "lease duration"),
    (["--bind-workers", "0"], "--bind-workers: 0 is not between 1 and 256"),
    (["--bind-workers", "257"], "--bind-workers: 257 is not between 1 and 256"),
])
def test_bad_active_shards_flags_exit_2_before_connecting(args: list[str], message: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert run_component("scheduler", [*args, "--kubeconfig", "/nonexistent/kubeconfig"]) == 2
    assert message in capsys.readouterr().err
