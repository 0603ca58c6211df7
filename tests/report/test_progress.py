"""Long commands say how far they have got: a tqdm bar on a terminal, a plain line every interval otherwise, and
nothing at all from a command that ends quickly (issue 21: a day-long replay ran 2 min 21 s in silence)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from scheduler.cycle import builtin_default_conf
from scheduler.report.progress import Progress, duration
from scheduler.sim.replay import replay
from scheduler.sim.workload import load_cluster, load_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_without_a_terminal_the_first_line_comes_after_the_delay_then_every_interval_and_one_at_the_end() -> None:
    clock, out = FakeClock(), io.StringIO()
    with Progress("simulate", 100, "job", stream=out, interval=10.0, delay=1.0, clock=clock, tty=False) as bar:
        for second in range(35):
            clock.now = float(second)
            bar.update(second)
    lines = out.getvalue().splitlines()
    assert [line.split(": ", 1)[1].split(" ")[0] for line in lines] == ["1/100", "11/100", "21/100", "31/100",
                                                                        "34/100"]  # 1 s, then every 10 s, the end
    assert bar.lines == 5 and bar.done == 34


def test_a_quick_command_prints_nothing() -> None:
    clock, out = FakeClock(), io.StringIO()
    with Progress("simulate", 3, "job", stream=out, interval=10.0, delay=1.0, clock=clock, tty=False) as bar:
        clock.now = 0.9
        bar.update(3)
    assert out.getvalue() == ""


def test_the_heartbeat_prints_while_the_work_does_not_call_update() -> None:
    """Issue 38: a long cluster build or one long cycle calls nothing; the line must still come, and say what
    the work is doing (its stage), from the first second."""
    import threading
    import time

    out = io.StringIO()
    bar = Progress("simulate", 1, "job", stream=out, interval=0.2, delay=0.1, tty=False, heartbeat=0.05)
    bar.stage("building the cluster: 4000/10000 nodes")
    deadline = time.monotonic() + 10
    while bar.lines < 2 and time.monotonic() < deadline:  # no update() call: only the heartbeat can print
        threading.Event().wait(0.02)
    bar.close()
    lines = out.getvalue().splitlines()
    assert len(lines) >= 2, lines
    assert lines[0].startswith("simulate: 0/1 jobs (0%), ") and lines[0].endswith(
        "building the cluster: 4000/10000 nodes")
    assert "so far" in lines[0]  # no rate of 0 jobs/s: the time spent instead


def test_a_replay_says_each_stage_before_its_first_cycle_ends() -> None:
    """The cluster build, the pods a job controller creates and each cycle are stages a progress line shows."""
    stages: list[str] = []
    cluster = load_cluster(EXAMPLES / "gpu-cluster.yaml")
    replay(cluster, load_workload(EXAMPLES / "two-gangs.yaml"), builtin_default_conf(), stage=stages.append)
    assert stages[0] == "building the cluster: 0/2 nodes"
    assert "cycle 1 at 0s: scheduling" in stages
    assert stages.index("building the cluster: 0/2 nodes") < stages.index("cycle 1 at 0s: scheduling")


def test_an_error_leaves_no_last_line_behind_it() -> None:
    clock, out = FakeClock(), io.StringIO()
    try:
        with Progress("simulate", 10, "job", stream=out, interval=1.0, clock=clock, tty=False) as bar:
            clock.now = 5.0
            bar.update(1)
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert len(out.getvalue().splitlines()) == 1


def test_on_a_terminal_the_bar_counts_the_work() -> None:
    out = io.StringIO()
    bar = Progress("simulate", 10, "job", stream=out, tty=True, delay=0.0)
    tqdm_bar = bar._bar
    bar.update(4, "simulated 1m00s")
    assert (tqdm_bar.n, tqdm_bar.total, tqdm_bar.postfix) == (4, 10, "simulated 1m00s")
    bar.close()
    assert bar._bar is None


def test_durations_read_as_people_write_them() -> None:
    assert [duration(s) for s in (0, 42, 185, 3720, 90061)] == ["0s", "42s", "3m05s", "1h02m", "25h01m"]


def test_a_replay_reports_its_finished_jobs_after_every_cycle() -> None:
    seen: list[tuple[float, int, int]] = []
    outcome = replay(load_cluster(EXAMPLES / "gpu-cluster.yaml"), load_workload(EXAMPLES / "two-gangs.yaml"),
                     builtin_default_conf(), progress=lambda now, done, total: seen.append((now, done, total)))
    assert len(seen) == outcome.cycles
    assert [done for _, done, _ in seen] == sorted(done for _, done, _ in seen)
    assert seen[-1][1:] == (3, 3) and {total for _, _, total in seen} == {3}


def test_a_replay_says_how_far_the_pod_expansion_of_a_wide_job_has_got(tmp_path: Path) -> None:
    """A 2,500-replica job's pods are made in one step; the stage counts them as they come (issue 38: a
    100,000-replica job sat at "0/1 jobs" through its expansion)."""
    import yaml

    from scheduler.api.phases import PodGroupPhase
    from scheduler.api.snapshot import ClusterSnapshot, CycleResult, PodGroupStatus

    def admit_only(snapshot: ClusterSnapshot) -> CycleResult:  # admits the PodGroup, binds nothing
        result = CycleResult()
        for job in snapshot.jobs.values():
            if job.phase == PodGroupPhase.PENDING:
                result.podgroups.append(PodGroupStatus(job.key, PodGroupPhase.INQUEUE, job.conditions, 0, 0, 0))
        return result

    (tmp_path / "c.yaml").write_text("nodes:\n- {name: n, count: 3, cpu: 4}\n")
    container = {"name": "w", "image": "x", "resources": {"requests": {"cpu": "1"}}}
    job = {"kind": "Job", "metadata": {"name": "wide"}, "spec": {"minAvailable": 2, "tasks": [
        {"name": "w", "replicas": 2500, "template": {"spec": {"containers": [container]}}}]}}
    (tmp_path / "w.yaml").write_text(yaml.safe_dump({"jobs": [job]}))
    stages: list[str] = []
    replay(load_cluster(tmp_path / "c.yaml"), load_workload(tmp_path / "w.yaml"), scheduler=admit_only, horizon=2,
           stage=stages.append)
    creating = [s for s in stages if s.startswith("creating the pods of default/wide")]
    assert creating == [f"creating the pods of default/wide: {n}/2500" for n in (0, 1000, 2000)]


def test_a_bar_made_late_in_a_commands_life_shows_soon_after_it_starts() -> None:
    """The delay counts from the process's start when its age is given: a command that spent 0.9 s reading its
    inputs shows its first line 0.25 s into the replay, not 1 s (issue 38: progress within the first second)."""
    from scheduler.report.progress import SHOWN_AFTER, process_age

    clock, out = FakeClock(), io.StringIO()
    bar = Progress("simulate", 10, "job", stream=out, delay=1.0, clock=clock, tty=False, age=0.9)
    clock.now = SHOWN_AFTER - 0.01
    bar.update(1)
    assert out.getvalue() == ""  # a bar over at once stays silent
    clock.now = SHOWN_AFTER
    bar.update(2)
    assert out.getvalue().startswith("simulate: 2/10 jobs")
    young = Progress("simulate", 10, "job", stream=io.StringIO(), delay=1.0, clock=clock, tty=False, age=0.2)
    assert young.due - young.started == pytest.approx(0.8)  # what is left of the command's first second
    age = process_age()
    assert age is not None and 0 < age < 24 * 3600  # this test's own process, on Linux
