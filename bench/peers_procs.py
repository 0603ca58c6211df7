"""The contenders of `make bench-peers` (bench/bench_peers.py) as processes: how each one is started against the
control plane, what /proc says about it, and the Go tool (tools/k8s/bindloop) that loads objects and measures the
apiserver's bind ceiling.

    volcano-py      python -m scheduler.cli scheduler, its defaults (built-in conf, schedule period 1 s, QPS 2,000)
    volcano         Volcano's vc-scheduler built from the snapshot by tools/conformance/build-volcano.sh, its
                    defaults (no --scheduler-conf: DefaultSchedulerConf of pkg/scheduler/util.go, period 1 s,
                    QPS/burst 2,000 of cmd/scheduler/app/options/options.go)
    kube-scheduler  the control plane's own build (.bin/kube-scheduler), default profile, client QPS and burst 5,000
    ceiling         bindloop bind: no scheduling, N goroutines, QPS unlimited, HTTP/1.1 over N connections (with
                    --ceiling-http2: client-go's default, one HTTP/2 connection; the same rate on this machine)
    limit           the ceiling plus the writes users rely on after a gang is bound (bindloop bind -events
                    -podgroups): each pod's `Scheduled` Event after its bind, each PodGroup's status Running and its
                    `Scheduled` Event once its pods are bound (what Volcano writes); the floor of server CPU per bind
                    for a scheduler that keeps them
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SCHEDULERS = ("volcano-py", "volcano", "kube-scheduler")
CEILING = "ceiling"
LIMIT = "limit"
CEILINGS = (CEILING, LIMIT)  # the Go bind loop, bare or with the writes users rely on
# volcano-py with some writes switched off (bench/py_variant.py, --py-off): information only, never in the default
# set, never in a target
PY_OFF = "volcano-py-off"
# the schedulerName each contender's pods carry
SCHEDULER_NAME = {"volcano-py": "volcano-py", "volcano": "volcano", "kube-scheduler": "default-scheduler",
                  CEILING: "bench-nobody", LIMIT: "bench-nobody", PY_OFF: "volcano-py"}
GANG_SCHEDULERS = ("volcano-py", "volcano", PY_OFF, LIMIT)  # their pods come in gangs with a PodGroup each


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds the process has used so far (its threads included; Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid: int) -> float:
    """VmHWM, the resident set's high-water mark, in MiB (0 if the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_script(*cmd: str) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {out.stderr.strip().splitlines()[-1:]}")
    return out.stdout.strip().splitlines()[-1]


def volcano_scheduler_binary() -> str:
    path = Path(_run_script(str(REPO / "tools" / "conformance" / "build-volcano.sh"), "--print-dir")) / "bin"
    exe = path / "vc-scheduler"
    if not os.access(exe, os.X_OK):
        raise SystemExit(f"{exe} missing: run tools/conformance/build-volcano.sh (make bench-peers does)")
    return str(exe)


def bindloop_binary() -> str:
    exe = _run_script(str(REPO / "tools" / "build-bindloop.sh"), "--print-path")
    if not os.access(exe, os.X_OK):
        raise SystemExit(f"{exe} missing: run tools/build-bindloop.sh (make bench-peers does)")
    return exe


@dataclass
class Contender:
    """One started process: its command line, when it started (monotonic) and its log."""

    name: str
    proc: subprocess.Popen
    started: float
    log: Path
    argv: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cpu_at_exit(self, timeout: float) -> float | None:
        """Wait (up to `timeout`) for the process to end without reaping it, and read its CPU seconds from its
        zombie's /proc entry, which keeps them; None if it did not end in time."""
        deadline = time.monotonic() + timeout
        while True:  # not Popen.poll(): it would reap the process and its /proc entry with it
            try:
                info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
            except ChildProcessError:  # already reaped
                return None
            if info is not None:
                cpu = cpu_seconds(self.pid)
                self.proc.wait()
                return cpu
            if time.monotonic() > deadline:
                return None
            time.sleep(0.005)  # no event tells us the child has ended other than waitid itself

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def tail(self, n: int = 5) -> list[str]:
        try:
            return self.log.read_text(errors="replace").splitlines()[-n:]
        except OSError:
            return []


def argv_for(name: str, cp, workdir: Path, *, bindloop: str, volcano: str, namespace: str,
             workers: int, http2: bool = False, py_off: str = "events") -> list[str]:
    """The command line of one contender against control plane `cp` (tests/e2e/controlplane.py)."""
    kc = str(cp.kubeconfig)
    if name in ("volcano-py", PY_OFF):
        head = ["-m", "scheduler.cli"] if name == "volcano-py" else [str(REPO / "bench" / "py_variant.py"), py_off]
        return [sys.executable, *head, "scheduler", f"--kubeconfig={kc}", f"--listen-address=127.0.0.1:{free_port()}"]
    if name == "volcano":
        return [volcano, f"--kubeconfig={kc}", "--leader-elect=false", f"--listen-address=127.0.0.1:{free_port()}",
                f"--healthz-address=127.0.0.1:{free_port()}", "--logtostderr", "-v=1"]
    if name == "kube-scheduler":
        return [cp.binary("kube-scheduler"), f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}", "--authentication-skip-lookup=true",
                "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
                f"--cert-dir={workdir / 'kube-scheduler-certs'}", "--leader-elect=false",
                "--kube-api-qps=5000", "--kube-api-burst=5000", "--v=1"]
    if name in CEILINGS:
        return [bindloop, f"-kubeconfig={kc}", f"-workers={workers}", f"-http1={str(not http2).lower()}", "bind",
                f"-namespace={namespace}", "-node-selector=bench=peers",
                *(("-events", "-podgroups") if name == LIMIT else ())]
    raise ValueError(name)


def start(name: str, argv: list[str], log: Path, prefix: list[str] | None = None) -> Contender:
    """Start it with stdout+stderr into `log`; `prefix` wraps the command (py-spy record ... --)."""
    cmd = [*(prefix or []), *argv]
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    return Contender(name, proc, started, log, cmd)


def target_pid(c: Contender, wrapped: bool) -> int:
    """The pid whose /proc to read: the contender itself, or py-spy's child when it is wrapped by py-spy."""
    if not wrapped:
        return c.pid
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            kids = Path(f"/proc/{c.pid}/task/{c.pid}/children").read_text().split()
        except OSError:
            kids = []
        if kids:
            return int(kids[0])
        time.sleep(0.01)  # polling /proc for the child py-spy forks; no event to wait on
    return c.pid


def load(bindloop: str, kubeconfig: str, lines: list[dict], workdir: Path, what: str, workers: int = 48) -> dict:
    """POST every {"path", "body"} with the Go tool (many goroutines, no rate limit); its JSON result."""
    f = workdir / f"load-{what}.jsonl"
    with open(f, "w") as out:
        for line in lines:
            out.write(json.dumps(line, separators=(",", ":")))
            out.write("\n")
    res = subprocess.run([bindloop, f"-kubeconfig={kubeconfig}", f"-workers={workers}", "create", f"-f={f}"],
                         capture_output=True, text=True)
    f.unlink()
    if res.returncode != 0:
        raise SystemExit(f"loading {what} failed: {(res.stdout + res.stderr).strip()[-500:]}")
    result = json.loads(res.stdout.strip().splitlines()[-1])
    print(f"  {what}: {result['done']} in {result['seconds']:.1f}s ({result['per_s']:.0f}/s)", flush=True)
    return result
