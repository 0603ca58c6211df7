"""The simulator carries out evictions as Kubernetes and Volcano's job controller do, and shows each one (issue
32): the victim keeps its node through its grace period (and its queue's notice), its Job's pods are recreated
(PodEvicted's default action) or its `policies` act, and the text, JSON and HTML reports list who lost which
tasks, to whom, under which rule, and whether a gang was broken.

Expected values come from the workload (examples/sim/rigid-gangs*.yaml): `low` is 8 x 1 GPU, minAvailable 8, on
2 x 4 GPUs, 1,000 s; `high` is 4 x 1 GPU, minAvailable 4, arrives at 10 s and runs 300 s; pods name no
terminationGracePeriodSeconds, so Kubernetes' 30 s applies; the period is 1 s.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api.evictions import POD_NOTICE
from scheduler.api.phases import TaskStatus
from scheduler.api.snapshot import CycleResult, Eviction
from scheduler.cli import main
from scheduler.cycle import load_conf_or_default
from scheduler.report.page import render as render_page
from scheduler.report.series import Labelled
from scheduler.sim.cluster import InMemoryCluster
from scheduler.sim.objects import pod_object
from scheduler.sim.replay import Replay, replay
from scheduler.sim.report import eviction_rows, job_rows
from scheduler.sim.workload import load_cluster, load_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"
CLUSTER, WORKLOAD, CONF = (EXAMPLES / n for n in ("rigid-gangs-cluster.yaml", "rigid-gangs.yaml",
                                                  "gang-eviction.conf"))
PERIOD = 1.0
K8S_GRACE = 30.0


def _docs() -> dict[str, Any]:
    return yaml.safe_load(WORKLOAD.read_text())  # type: ignore[no-any-return]


def _job(docs: dict[str, Any], name: str) -> dict[str, Any]:
    return next(j for j in docs["jobs"] if j["metadata"]["name"] == name)  # type: ignore[no-any-return]


def _run(tmp_path: Path, docs: dict[str, Any] | None = None, cluster: dict[str, Any] | None = None) -> Replay:
    workload = WORKLOAD
    if docs is not None:
        workload = tmp_path / "workload.yaml"
        workload.write_text(yaml.safe_dump(docs))
    spec = CLUSTER
    if cluster is not None:
        spec = tmp_path / "cluster.yaml"
        spec.write_text(yaml.safe_dump(cluster))
    return replay(load_cluster(spec), load_workload(workload), load_conf_or_default(str(CONF)), period=PERIOD)


def _first_bind(outcome: Replay, job: str) -> float:
    return min(b.time for b in outcome.cluster.bind_log if b.job == f"default/{job}")


def _runs(outcome: Replay) -> dict[str, Any]:
    return {r.item.name: r for r in outcome.runs}


def test_high_binds_within_one_period_and_the_victims_grace_period_of_its_arrival(tmp_path: Path) -> None:
    outcome = _run(tmp_path)
    high = _job(_docs(), "high")
    (evicted_at,) = {e.time for e in outcome.cluster.eviction_log}
    assert evicted_at <= high["arrival"] + PERIOD
    # Not before the victims are gone (they keep their GPUs through their grace period), and no later.
    assert _first_bind(outcome, "high") == evicted_at + K8S_GRACE
    assert _first_bind(outcome, "high") <= high["arrival"] + PERIOD + K8S_GRACE
    assert outcome.partial_cycles == 0


def test_the_victim_job_is_recreated_and_runs_its_whole_duration_again(tmp_path: Path) -> None:
    outcome = _run(tmp_path)
    docs = _docs()
    runs = _runs(outcome)
    low, high = runs["low"], runs["high"]
    assert low.interrupted == 1 and low.phase == "Completed"
    # 8 GPUs on 8: low's gang fits again only once high (4 GPUs) is done; then it runs its 1,000 s again.
    assert high.ended == high.started + _job(docs, "high")["duration"]
    assert low.ended is not None and low.ended >= high.ended + _job(docs, "low")["duration"]
    low_binds = [b for b in outcome.cluster.bind_log if b.job == "default/low"]
    assert len(low_binds) == 2 * 8  # every pod bound, evicted, recreated by the job controller, bound again


def test_the_pods_own_grace_period_is_modelled(tmp_path: Path) -> None:
    docs = _docs()
    _job(docs, "low")["spec"]["tasks"][0]["template"]["spec"]["terminationGracePeriodSeconds"] = 5
    outcome = _run(tmp_path, docs)
    (evicted_at,) = {e.time for e in outcome.cluster.eviction_log}
    assert {e.grace for e in outcome.cluster.eviction_log} == {5.0}
    assert _first_bind(outcome, "high") == evicted_at + 5


def test_a_pod_evicted_policy_of_the_job_is_followed(tmp_path: Path) -> None:
    """`policies: [{event: PodEvicted, action: AbortJob}]`: Volcano's job controller aborts the Job instead of
    recreating the pod; it never runs again."""
    docs = _docs()
    _job(docs, "low")["spec"]["policies"] = [{"event": "PodEvicted", "action": "AbortJob"}]
    outcome = _run(tmp_path, docs)
    low = _runs(outcome)["low"]
    assert low.phase in ("Aborting", "Aborted")
    (evicted_at,) = {e.time for e in outcome.cluster.eviction_log}
    assert [b for b in outcome.cluster.bind_log if b.job == "default/low" and b.time > evicted_at] == []


def test_a_queue_notice_delays_the_delete_and_the_victim_is_annotated(tmp_path: Path) -> None:
    cluster = yaml.safe_load(CLUSTER.read_text())
    cluster["queues"] = [{"metadata": {"name": "default", "annotations": {"volcano-py.io/eviction-notice": "20s"}},
                          "spec": {"weight": 1}}]
    outcome = _run(tmp_path, cluster=cluster)
    records = outcome.cluster.eviction_log
    (evicted_at,) = {e.time for e in records}
    assert {e.notice for e in records} == {20.0}
    assert _first_bind(outcome, "high") == evicted_at + 20 + K8S_GRACE
    assert len(records) == 8, "a victim under notice is releasing: never chosen twice"


def test_the_notice_annotation_is_what_the_snapshot_reads() -> None:
    """During the notice the pod is annotated and reads as releasing: its room is the preemptor's."""
    sim = InMemoryCluster(graceful=True)
    pod = pod_object("p", gpu=1)
    pod["spec"]["nodeName"] = "n"
    pod["status"]["phase"] = "Running"
    sim.add_pod(copy.deepcopy(pod))
    sim.apply(CycleResult(evictions=[Eviction("default/p", "default/p", "n", "r", None, notice=20.0)]))
    assert POD_NOTICE in sim.pods["default/p"].manifest["metadata"]["annotations"]
    assert sim.snapshot().jobs["default/p"].tasks["default/p"].status is TaskStatus.RELEASING


def test_the_reports_list_each_eviction(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outcome = _run(tmp_path)
    (row,) = eviction_rows(outcome)
    assert (row.job, row.by, row.action, row.rule, row.breaks_gang) == (
        "default/low", "default/high", "gangpreempt", "whole bundle", True)
    assert sorted(row.tasks) == [f"low-worker-{i}" for i in range(8)]
    assert set(row.nodes) == {"gpu-a", "gpu-b"}
    high = next(r for r in job_rows(outcome) if r.name == "high")
    assert high.room is not None and high.room[1:] == ("gangpreempt", 8)
    assert main(["simulate", str(CLUSTER), str(WORKLOAD), "--conf", str(CONF), "--json"]) == 0
    (report,) = json.loads(capsys.readouterr().out).values()
    (evicted,) = report["evictions"]
    assert (evicted["job"], evicted["by"], evicted["rule"], evicted["breaks_gang"], len(evicted["tasks"])) == (
        "default/low", "default/high", "whole bundle", True, 8)
    page = render_page([Labelled("gang eviction", outcome)], [])
    assert '<table class="evictions">' in page and 'data-broken="true"' in page and "gangpreempt" in page
    assert main(["simulate", str(CLUSTER), str(WORKLOAD), "--conf", str(CONF)]) == 0
    text = capsys.readouterr().out
    assert "evictions:" in text and "whole bundle" in text
