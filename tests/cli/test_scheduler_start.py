"""`volcano-py scheduler` pauses the garbage collector while it starts (scheduler/cli.py); a start that fails
(here: an unreadable kubeconfig) gives it back, so a caller in the same process is left as it was."""

from __future__ import annotations

import gc
from pathlib import Path

from scheduler.cli import main


def test_a_failed_start_leaves_the_collector_enabled(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("clusters: [")
    assert gc.isenabled()
    assert main(["scheduler", "--kubeconfig", str(kubeconfig)]) == 1
    assert gc.isenabled()
