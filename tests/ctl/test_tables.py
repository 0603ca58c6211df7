"""`job list` and `queue list` print kubectl-like tables; queues show their GPUs."""

from __future__ import annotations

from scheduler.cli.ctl.commands import dump, job_table, queue_table

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def test_queue_list_shows_parent_and_gpus_allocated_deserved_and_capability() -> None:
    queues = [{"metadata": {"name": "team-a", "creationTimestamp": "2025-12-31T23:00:00Z"},
               "spec": {"weight": 2, "capability": {"nvidia.com/gpu": "16"}, "deserved": {"nvidia.com/gpu": "8"},
                        "parent": "org-1"},
               "status": {"state": "Open", "running": 3, "allocated": {"nvidia.com/gpu": "12"}}},
              {"metadata": {"name": "default"}, "spec": {}, "status": {"state": "Closed"}}]
    lines = queue_table(queues, NOW).splitlines()
    assert lines[0].split() == ["NAME", "STATE", "PARENT", "WEIGHT", "INQUEUE", "PENDING", "RUNNING",
                                "GPU-ALLOCATED", "GPU-DESERVED", "GPU-CAPABILITY", "AGE"]
    assert lines[1].split() == ["default", "Closed", "-", "1", "0", "0", "0", "0", "-", "-", "<unknown>"]
    assert lines[2].split() == ["team-a", "Open", "org-1", "2", "0", "0", "3", "12", "8", "16", "60m"]


def test_job_list_counts_replicas_and_pods() -> None:
    job = {"metadata": {"name": "train", "namespace": "ml", "creationTimestamp": "2025-12-31T23:59:30Z"},
           "spec": {"queue": "team-a", "tasks": [{"replicas": 2}, {"replicas": 6}]},
           "status": {"state": {"phase": "Running"}, "minAvailable": 8, "running": 8}}
    lines = job_table([job], NOW, with_namespace=True).splitlines()
    assert lines[0].split()[:3] == ["NAMESPACE", "NAME", "STATUS"]
    assert lines[1].split() == ["ml", "train", "Running", "8", "8", "0", "8", "0", "0", "team-a", "30s"]


def test_output_yaml_is_a_list() -> None:
    assert dump([{"metadata": {"name": "a"}}], "yaml").startswith("apiVersion: v1\nkind: List")
    assert '"name": "a"' in dump({"metadata": {"name": "a"}}, "json")
