"""volcano-py's components as processes (`python -m scheduler.cli <command>`), as a user runs them: a SIGKILL
or SIGSTOP is then a real crash or freeze. Shared by tests/e2e and tests/chaos."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from controlplane import REPO_ROOT

TIMEOUT = 90


class Process:
    """`python -m scheduler.cli <command> ...` with its log in a file."""

    def __init__(self, control_plane, log_dir: Path, name: str, command: str, *args: str, kubeconfig=None):
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        kubeconfig = kubeconfig or control_plane.kubeconfig  # another one: e.g. through the fault proxy
        cmd = [sys.executable, "-m", "scheduler.cli", command, "--kubeconfig", str(kubeconfig), *args]
        with open(self.log_path, "wb") as log:  # the child keeps its own descriptor of the file
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(TIMEOUT)

    def freeze(self) -> None:
        """SIGSTOP: the process stops where it is (threads, sockets and all), as in a long GC pause or a VM
        migration; its clocks run on."""
        os.kill(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> int:
        if self.alive():
            self.thaw()  # a stopped process would hold the SIGTERM until continued
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                self.kill()
        return int(self.proc.returncode)
