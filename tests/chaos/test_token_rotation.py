"""A service-account token rotated under a running scheduler (issue 31).

The scheduler runs with a kubeconfig whose user is a `tokenFile`, as a kubelet-projected token is used: the file
is rewritten with a new token while the process runs, and the old token is then revoked (each token is bound to
a Secret; deleting the Secret invalidates it, as the apiserver's service-account authenticator looks the bound
object up). The test first checks that the fault struck (the old token is refused, 401; the new one accepted),
then the invariant: the process picks the new token up and goes on scheduling, within the minute client-go
takes (its tokenFile source re-reads the file every minute: k8s.io/client-go/transport/token_source.go), plus a
margin.
"""

from __future__ import annotations

import os
import time

import yaml
from chaos_helpers import TIMEOUT, bound_pods, create_gangs, gang_counts, make_nodes, start_scheduler
from controlplane import wait_for

RELOAD_WITHIN = 75.0  # seconds: client-go's one-minute re-read of a tokenFile, plus a margin


def bound_token(core_v1, namespace: str, account: str, secret: str) -> str:
    """A token of the service account, valid for an hour, bound to (revoked with) the Secret `secret`."""
    obj = core_v1.create_namespaced_secret(namespace, {"metadata": {"name": secret}, "type": "Opaque"})
    body = {"spec": {"audiences": [], "expirationSeconds": 3600,
                     "boundObjectRef": {"apiVersion": "v1", "kind": "Secret", "name": secret,
                                        "uid": obj.metadata.uid}}}
    return core_v1.create_namespaced_service_account_token(account, namespace, body).status.token


def write_atomically(path, text: str) -> None:
    """As the kubelet updates a projected token: a new file renamed over the old one."""
    tmp = path.with_suffix(".new")
    tmp.write_text(text)
    os.replace(tmp, path)


def answers(control_plane, token: str) -> int:
    """The HTTP status the apiserver gives a request authenticated with `token` alone."""
    import ssl
    import urllib.error
    import urllib.request

    ctx = ssl.create_default_context(cafile=str(control_plane.serving_ca.crt))
    req = urllib.request.Request(f"{control_plane.server}/api/v1/nodes?limit=1",
                                 headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_a_rotated_token_file_is_picked_up_by_the_running_scheduler(control_plane, core_v1, custom, new_namespace,
                                                                    tmp_path):
    from kubernetes import client

    ns = new_namespace("token")
    account = "volcano-py"
    core_v1.create_namespaced_service_account(ns, {"metadata": {"name": account}})
    rbac = client.RbacAuthorizationV1Api(core_v1.api_client)
    binding = f"chaos-token-{ns}"
    rbac.create_cluster_role_binding({
        "metadata": {"name": binding},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}]})
    old, new = (bound_token(core_v1, ns, account, s) for s in ("token-old", "token-new"))
    token_file = tmp_path / "token"
    token_file.write_text(old)
    admin = yaml.safe_load(control_plane.kubeconfig.read_text())
    kubeconfig = tmp_path / "token.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": admin["clusters"],
        "users": [{"name": "sa", "user": {"tokenFile": str(token_file)}}],
        "contexts": [{"name": "sa", "context": {"cluster": admin["clusters"][0]["name"], "user": "sa"}}]}))
    tag = os.urandom(3).hex()
    nodes = make_nodes(core_v1, tag, 1)
    scheduler = start_scheduler(control_plane, tmp_path, kubeconfig=kubeconfig)
    try:
        first = {"a": ["a-0", "a-1"]}
        create_gangs(core_v1, custom, ns, tag, first)
        wait_for(lambda: gang_counts(bound_pods(core_v1, ns), first) == {"a": 2}, TIMEOUT, interval=0.2,
                 what="gang a bound with the first token")

        write_atomically(token_file, new)
        core_v1.delete_namespaced_secret("token-old", ns)
        wait_for(lambda: answers(control_plane, old) == 401, TIMEOUT, interval=0.2, what="the old token revoked")
        assert answers(control_plane, new) == 200  # the fault struck: only the file's new token works
        rotated = time.monotonic()

        second = {"b": ["b-0", "b-1"]}
        create_gangs(core_v1, custom, ns, tag, second)
        try:
            wait_for(lambda: gang_counts(bound_pods(core_v1, ns), second) == {"b": 2}, RELOAD_WITHIN, interval=0.5,
                     what="gang b bound after the token was rotated")
        except AssertionError as exc:
            unauthorized = sum("401" in line or "Unauthorized" in line for line in scheduler.log().splitlines())
            raise AssertionError(
                f"{exc}: {time.monotonic() - rotated:.0f}s after the rotation the scheduler still uses the revoked "
                f"token ({unauthorized} log lines with 401/Unauthorized; alive={scheduler.alive()})") from exc
        print(f"\nthe rotated token was picked up; gang b bound {time.monotonic() - rotated:.1f}s after the rotation")
        assert scheduler.alive(), scheduler.log()[-3000:]
    finally:
        scheduler.stop()
        rbac.delete_cluster_role_binding(binding)
        core_v1.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        for name in nodes:
            core_v1.delete_node(name)
