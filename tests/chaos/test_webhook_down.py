"""The admission webhook down (issue 31): SIGKILL `volcano-py webhook` while its configurations route Job creates
to it, with `failurePolicy: Fail` (the chart's) and `Ignore`.

Fail: a Job create is refused with a clear error naming the webhook, and nothing is half made (no Job object);
once the webhook is back on the same address, the same create goes through, with the webhook's defaults.
Ignore: creates go on while it is down (without the webhook's defaults: that is what Ignore trades), and the
webhook's work resumes when it is back. Each case first asserts the fault struck (the process is gone, its
/healthz unreachable, the configuration in place).
"""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from chaos_helpers import TIMEOUT
from controlplane import REPO_ROOT, free_port, wait_for
from test_webhook import BATCH, SCHEDULING, _healthy, job, job_hook


class Webhook:
    """`volcano-py webhook` on fixed loopback ports, so a restart serves the same configuration's URL."""

    def __init__(self, control_plane, log_dir: Path):
        self.control_plane, self.log_dir = control_plane, log_dir
        self.port, self.health = free_port(), free_port()
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        with open(self.log_dir / f"webhook-{self.starts}.log", "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "scheduler.cli", "webhook", "--kubeconfig", str(self.control_plane.kubeconfig),
                 f"--tls-cert-file={self.control_plane.serving_crt}",
                 f"--tls-private-key-file={self.control_plane.serving_key}", "--listen-address=127.0.0.1",
                 f"--port={self.port}", "--enable-healthz", f"--healthz-address=127.0.0.1:{self.health}",
                 "--enabled-admission=/jobs/validate,/jobs/mutate", "--scheduler-name=volcano"],
                stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
        wait_for(lambda: self.proc.poll() is None and self.healthy(), TIMEOUT, what="the webhook's /healthz")

    def healthy(self) -> bool:
        return _healthy(f"http://127.0.0.1:{self.health}/healthz")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(TIMEOUT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(TIMEOUT)


@pytest.fixture
def routed(control_plane, api_client, new_namespace, tmp_path, request):
    """A webhook and configurations (with the test's failurePolicy) routing this namespace's Jobs to it."""
    from kubernetes import client

    policy = request.param
    try:  # the validating hook wants the Job's queue to exist
        client.CustomObjectsApi(api_client).create_cluster_custom_object(SCHEDULING, "v1beta1", "queues", {
            "apiVersion": f"{SCHEDULING}/v1beta1", "kind": "Queue", "metadata": {"name": "default"},
            "spec": {"weight": 1}})
    except client.ApiException as exc:
        assert exc.status == 409, exc
    ns = new_namespace("webhook-down")
    hook = Webhook(control_plane, tmp_path)
    hook.start()
    admission = client.AdmissionregistrationV1Api(api_client)
    name = f"volcano-py-down-{uuid.uuid4().hex[:6]}"
    ca_bundle = base64.b64encode(control_plane.serving_ca.crt.read_bytes()).decode()

    def webhook(kind: str, operations: list[str]) -> dict:
        return job_hook(kind, operations, hook.port, ca_bundle, ns, policy=policy, timeout=5)

    admission.create_mutating_webhook_configuration({"metadata": {"name": name},
                                                      "webhooks": [webhook("mutate", ["CREATE"])]})
    admission.create_validating_webhook_configuration({"metadata": {"name": name},
                                                        "webhooks": [webhook("validate", ["CREATE", "UPDATE"])]})
    try:
        yield hook, ns, policy
    finally:
        for delete in (admission.delete_validating_webhook_configuration,
                       admission.delete_mutating_webhook_configuration):
            with contextlib.suppress(client.ApiException):
                delete(name)
        hook.stop()


def mutated(custom, ns: str, name: str) -> bool:
    """The webhook's defaults are on the Job: /jobs/mutate gives a Job that names no scheduler its
    --scheduler-name."""
    spec = custom.get_namespaced_custom_object(BATCH, "v1alpha1", ns, "jobs", name)["spec"]
    return spec.get("schedulerName") == "volcano"


def unnamed(name: str) -> dict:
    manifest = job(name, "default")
    del manifest["spec"]["schedulerName"]
    return manifest


@pytest.mark.parametrize("routed", ["Fail", "Ignore"], indirect=True)
def test_job_creates_while_the_webhook_is_down_fail_clearly_or_go_on_and_work_again_when_it_is_back(routed, custom):
    from kubernetes import client

    hook, ns, policy = routed

    def create(name: str) -> None:
        custom.create_namespaced_custom_object(BATCH, "v1alpha1", ns, "jobs", unnamed(name))

    def jobs() -> set[str]:
        return {j["metadata"]["name"] for j in custom.list_namespaced_custom_object(BATCH, "v1alpha1", ns, "jobs")
                ["items"]}

    # The configuration takes effect within a moment: wait until a create is mutated by the webhook.
    wait_for(lambda: (create(f"up-{uuid.uuid4().hex[:4]}"), any(mutated(custom, ns, j) for j in jobs()))[1],
             TIMEOUT, interval=0.5, what="a Job create mutated by the webhook")
    before = jobs()
    hook.kill()
    assert not hook.healthy()  # the fault struck: the webhook is gone, its configurations still route to it

    if policy == "Fail":
        with pytest.raises(client.ApiException) as refused:
            create("while-down")
        message = json.loads(refused.value.body)["message"]
        assert refused.value.status == 500, message
        assert 'failed calling webhook "mutatejob.volcano.sh"' in message, message
        assert jobs() == before  # nothing half made
    else:
        create("while-down")
        assert jobs() == before | {"while-down"}
        assert not mutated(custom, ns, "while-down")  # admitted without the webhook, as Ignore means

    hook.start()  # back, on the same address
    wait_for(lambda: (create(f"back-{uuid.uuid4().hex[:4]}"), True)[1], TIMEOUT, interval=0.5,
             what="a Job create admitted once the webhook is back")
    back = {j for j in jobs() if j.startswith("back-")}
    assert back and all(mutated(custom, ns, j) for j in back)
    assert before <= jobs()  # nothing lost
