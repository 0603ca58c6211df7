"""The Job defaults Volcano's mutating webhook writes (pkg/webhooks/admission/jobs/mutate/mutate_job.go) that a
schema can express are written by the apiserver from the CRD's `default:`s (issue 16, docs/volcano-defaults.md)."""

from __future__ import annotations

BATCH = "batch.volcano.sh"


def test_a_bare_job_reads_back_with_volcanos_schema_defaults(custom, namespace):
    container = {"name": "main", "image": "busybox"}
    made = custom.create_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", {
        "apiVersion": f"{BATCH}/v1alpha1", "kind": "Job", "metadata": {"name": "bare"},
        "spec": {"schedulerName": "nobody", "networkTopology": {"highestTierAllowed": 1},
                 "tasks": [{"name": "w", "replicas": 4,
                            "partitionPolicy": {"totalPartitions": 2, "partitionSize": 2},
                            "template": {"spec": {"containers": [container]}}}]}})
    spec = made["spec"]
    assert (spec["queue"], spec["maxRetry"], spec["networkTopology"]["mode"]) == ("default", 3, "hard")
    task = spec["tasks"][0]
    assert task["maxRetry"] == 3
    assert task["partitionPolicy"] == {"totalPartitions": 2, "partitionSize": 2, "minPartitions": 0}


def test_user_values_are_kept(custom, namespace):
    container = {"name": "main", "image": "busybox"}
    made = custom.create_namespaced_custom_object(BATCH, "v1alpha1", namespace, "jobs", {
        "apiVersion": f"{BATCH}/v1alpha1", "kind": "Job", "metadata": {"name": "mine"},
        "spec": {"schedulerName": "nobody", "queue": "q1", "maxRetry": 7,
                 "tasks": [{"name": "w", "replicas": 1, "maxRetry": 2,
                            "template": {"spec": {"containers": [container]}}}]}})
    assert (made["spec"]["queue"], made["spec"]["maxRetry"], made["spec"]["tasks"][0]["maxRetry"]) == ("q1", 7, 2)
