"""Kubernetes' own user roles cover Volcano's kinds once manifests/08-user-roles.yaml (the chart's
templates/rbac-users.yaml) is applied: kube-controller-manager's clusterrole-aggregation controller adds the
editor's rules to `edit` and the viewer's to `view`, so a user bound to `edit` in a namespace creates a vcjob and a
Command there, and a user bound to `view` reads them but cannot create one. The users are impersonated (`--as`)
by the control plane's admin."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from controlplane import REPO_ROOT, wait_for

JOBS = "jobs.batch.volcano.sh"


def vcjob(name: str, namespace: str) -> str:
    return f"""apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  schedulerName: volcano-py
  minAvailable: 1
  tasks:
  - name: worker
    replicas: 1
    template:
      spec:
        restartPolicy: Never
        containers: [{{name: worker, image: busybox, command: [sleep, "1"]}}]
"""


@pytest.fixture
def users(control_plane, namespace):
    """alice bound to `edit` and bob to `view` in the namespace, with the user roles applied."""
    control_plane.kubectl("apply", "-f", str(REPO_ROOT / "manifests" / "08-user-roles.yaml"))
    tag = uuid.uuid4().hex[:6]
    alice, bob = f"alice-{tag}", f"bob-{tag}"
    control_plane.kubectl("-n", namespace, "create", "rolebinding", "alice-edit", "--clusterrole=edit",
                          f"--user={alice}")
    control_plane.kubectl("-n", namespace, "create", "rolebinding", "bob-view", "--clusterrole=view",
                          f"--user={bob}")
    return alice, bob


def can(control_plane, user: str, verb: str, resource: str, namespace: str) -> bool:
    r = control_plane.kubectl("auth", "can-i", verb, resource, f"--as={user}", "-n", namespace, check=False)
    return r.stdout.strip() == "yes"


def test_edit_creates_a_vcjob_and_view_reads_it_but_cannot_create(control_plane, namespace, users,
                                                                   tmp_path: Path) -> None:
    alice, bob = users
    wait_for(lambda: can(control_plane, alice, "create", JOBS, namespace)
             and can(control_plane, bob, "list", JOBS, namespace), 60,
             what="edit and view aggregating the vcjob roles")
    (tmp_path / "job.yaml").write_text(vcjob("by-alice", namespace))
    created = control_plane.kubectl("create", "-f", str(tmp_path / "job.yaml"), f"--as={alice}", check=False)
    assert created.returncode == 0, created.stderr
    listed = control_plane.kubectl("-n", namespace, "get", JOBS, "-o", "name", f"--as={bob}", check=False)
    assert (listed.returncode, listed.stdout.split()) == (0, ["job.batch.volcano.sh/by-alice"]), listed.stderr
    (tmp_path / "job2.yaml").write_text(vcjob("by-bob", namespace))
    refused = control_plane.kubectl("create", "-f", str(tmp_path / "job2.yaml"), f"--as={bob}", check=False)
    assert refused.returncode != 0 and "forbidden" in refused.stderr.lower(), refused.stderr + refused.stdout
    assert can(control_plane, alice, "create", "commands.bus.volcano.sh", namespace)
    assert can(control_plane, alice, "create", "podgroups.scheduling.volcano.sh", namespace)
    assert not can(control_plane, bob, "delete", JOBS, namespace)
    assert not can(control_plane, alice, "create", "queues.scheduling.volcano.sh", namespace)
