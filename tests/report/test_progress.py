"""Long commands say how far they have got: a tqdm bar on a terminal, a plain line every interval otherwise, and
nothing at all from a command that ends quickly (issue 21: a day-long replay ran 2 min 21 s in silence)."""

from __future__ import annotations

import io
from pathlib import Path

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


def test_without_a_terminal_a_line_comes_every_interval_and_one_at_the_end() -> None:
    clock, out = FakeClock(), io.StringIO()
    with Progress("simulate", 100, "job", stream=out, interval=10.0, clock=clock, tty=False) as bar:
        for second in range(35):
            clock.now = float(second)
            bar.update(second)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 + 1  # at 10 s, 20 s and 30 s, and the last word at the end
    assert bar.lines == 4 and bar.done == 34


def test_a_quick_command_prints_nothing() -> None:
    clock, out = FakeClock(), io.StringIO()
    with Progress("simulate", 3, "job", stream=out, interval=10.0, clock=clock, tty=False) as bar:
        clock.now = 2.0
        bar.update(3)
    assert out.getvalue() == ""


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
