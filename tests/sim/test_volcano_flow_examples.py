"""Volcano's CronJob and JobFlow examples run on the simulator, their Jobs made by the controllers of the replay
(issue 19: every example that uses these features runs in the simulator and on the control plane)."""

from __future__ import annotations

from pathlib import Path

from volcano_examples import CI_CONF, run_file

from scheduler.testing import volcano_snapshot

VOLCANO = volcano_snapshot()


def outcomes(rel: str, tmp_path: Path) -> dict[str, bool]:
    found = run_file(VOLCANO, VOLCANO / rel, (VOLCANO / CI_CONF).read_text(), tmp_path)
    return {o.job: o.started for o in found}


def test_the_jobflow_example_runs_every_job_of_its_flow(tmp_path: Path) -> None:
    assert outcomes("example/jobflow/JobFlow.yaml", tmp_path) == {f"default/test-{s}": True for s in "abcde"}


def test_the_cronjob_example_starts_a_job_every_five_minutes(tmp_path: Path) -> None:
    # 15 simulated minutes from the CronJob's creation at 00:00: the starts at 00:05 and 00:10 (minutes since the
    # Unix epoch in the names, as Volcano's controller names them).
    assert outcomes("example/cronjob/cronjob.yaml", tmp_path) == {
        "default/volcano-cronjob-example-29453765": True, "default/volcano-cronjob-example-29453770": True}
