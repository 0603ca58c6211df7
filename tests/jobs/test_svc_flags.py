"""The svc job plugin's `--inject-hosts-env` (Volcano's plugins/svc/svc.go): off, no VC_<TASK>_HOSTS / _NUM in any
container (jobseq's "Test SVC Plugin with injectHostsEnv disabled"); the ConfigMap with the hosts is still mounted."""

from __future__ import annotations

import pytest

from scheduler.jobs.expand import pods_for


def job(svc_flags: list[str]) -> dict:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "svc-job", "namespace": "ns", "uid": "u1"},
            "spec": {"minAvailable": 1, "schedulerName": "volcano", "queue": "default", "plugins": {"svc": svc_flags},
                     "tasks": [{"name": "task", "replicas": 2, "template": {"spec": {
                         "initContainers": [{"name": "init", "image": "busybox"}],
                         "containers": [{"name": "main", "image": "nginx"}]}}}]}}


@pytest.mark.parametrize(("flags", "injected"), [([], True), (["--inject-hosts-env=false"], False),
                                                 (["--inject-hosts-env=true"], True)])
def test_inject_hosts_env_decides_the_hosts_variables(flags: list[str], injected: bool) -> None:
    for pod in pods_for(job(flags)):
        containers = pod["spec"]["containers"] + pod["spec"].get("initContainers", [])
        names = {e["name"] for c in containers for e in c.get("env") or []}
        assert {"VC_TASK_HOSTS", "VC_TASK_NUM"} <= names if injected else not names & {"VC_TASK_HOSTS", "VC_TASK_NUM"}
        assert any(v.get("configMap") for v in pod["spec"]["volumes"])  # the hosts file is there either way
