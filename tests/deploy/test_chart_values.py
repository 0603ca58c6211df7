"""The chart's per-component values reach the Deployments (scheduler, controllers, webhook): log level, API
QPS/burst and extra arguments as flags the component itself parses to those values; pod labels and annotations;
securityContext overrides merged over the defaults; and nameOverride/fullnameOverride renaming every object
consistently (selectors, ServiceAccounts, bindings, Leases, Services, alerts), so two releases share no name.

helm is `make helm-bin`'s; without it these tests fail, never skip.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helm_chart import SYSTEM_NS, Key, of_kind, render

from scheduler.flags import parse_controllers, parse_scheduler, parse_webhook

COMPONENTS = ("scheduler", "controllers", "webhook")
PARSERS: dict[str, Callable[[list[str]], Any]] = {
    "scheduler": parse_scheduler, "controllers": parse_controllers, "webhook": parse_webhook}
WEBHOOK_ON = {"webhook": {"enabled": True}}
ALL_ON = {"webhook": {"enabled": True}, "createNamespace": True, "userRoles": {"create": True},
          "grafana": {"dashboard": {"enabled": True}}, "metrics": {
              "secure": True, "prometheusRule": {"enabled": True}, "serviceMonitor": {"enabled": True},
              "podMonitor": {"enabled": True}}}


def merged(*parts: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def deployments(tmp: Path, values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return of_kind(render(tmp, merged(WEBHOOK_ON, values)), "Deployment")


def pod(deploy: dict[str, Any]) -> dict[str, Any]:
    return deploy["spec"]["template"]


def options(component: str, deploy: dict[str, Any]) -> Any:
    args = pod(deploy)["spec"]["containers"][0]["args"]
    assert args[0] == component
    opts = PARSERS[component](args[1:])
    assert opts.ignored == (), f"{component}: flags without effect {opts.ignored}"
    return opts


# ---- log level, API QPS/burst, extra arguments ------------------------------------------------------------------
def test_by_default_no_log_level_or_rate_limit_flag_is_passed(tmp_path: Path) -> None:
    for name, deploy in deployments(tmp_path, {}).items():
        args = pod(deploy)["spec"]["containers"][0]["args"]
        assert not [a for a in args if a.startswith(("--log-level", "--kube-api-"))], name


def test_log_level_qps_and_burst_are_the_components_flags(tmp_path: Path) -> None:
    values = {c: {"logLevel": "debug", "kubeApiQps": 30 + i, "kubeApiBurst": 60 + i} for i, c in enumerate(COMPONENTS)}
    deploys = deployments(tmp_path, values)
    for i, component in enumerate(COMPONENTS):
        opts = options(component, deploys[f"volcano-py-{component}"])
        assert (opts.log_level, opts.kube_api_qps, opts.kube_api_burst) == ("debug", 30.0 + i, 60 + i), component


def test_the_schedulers_trace_level_and_a_fractional_qps(tmp_path: Path) -> None:
    deploys = deployments(tmp_path, {"scheduler": {"logLevel": "trace", "kubeApiQps": 0.5}})
    opts = options("scheduler", deploys["volcano-py-scheduler"])
    assert (opts.log_level, opts.kube_api_qps) == ("trace", 0.5)


@pytest.mark.parametrize(("values", "path"), [
    ({"controllers": {"logLevel": "trace"}}, "/controllers/logLevel"),
    ({"scheduler": {"logLevel": "verbose"}}, "/scheduler/logLevel"),
    ({"webhook": {"kubeApiBurst": 1.5}}, "/webhook/kubeApiBurst"),
    ({"scheduler": {"extraArgs": ["debug"]}}, "/scheduler/extraArgs/0"),
    ({"fullnameOverride": "Not_A_Name"}, "/fullnameOverride"),
], ids=["trace is the scheduler's only", "an unknown level", "a fractional burst", "an argument that is no flag",
        "a name Kubernetes refuses"])
def test_a_wrong_value_is_refused_naming_it(values: dict[str, Any], path: str, tmp_path: Path) -> None:
    from helm_chart import CHART, run_helm, values_file
    from test_chart import refused_paths
    r = run_helm("template", "volcano-py", str(CHART), *values_file(tmp_path, values), check=False)
    assert (r.returncode != 0, refused_paths(r.stderr)) == (True, {path}), r.stderr


def test_extra_args_are_appended_and_parsed(tmp_path: Path) -> None:
    values = {"scheduler": {"extraArgs": ["--partial-gang-timeout=2m", "--default-queue=batch"]},
              "controllers": {"extraArgs": ["--worker-threads=7"]},
              "webhook": {"extraArgs": ["--max-pods-per-job=64"]}}
    deploys = deployments(tmp_path, values)
    scheduler = options("scheduler", deploys["volcano-py-scheduler"])
    assert (scheduler.partial_gang_timeout, scheduler.default_queue) == (120.0, "batch")
    assert options("controllers", deploys["volcano-py-controllers"]).worker_threads == 7
    assert options("webhook", deploys["volcano-py-webhook"]).max_pods_per_job == 64
    args = pod(deploys["volcano-py-scheduler"])["spec"]["containers"][0]["args"]
    assert args[-2:] == ["--partial-gang-timeout=2m", "--default-queue=batch"]


# ---- pod labels and annotations ---------------------------------------------------------------------------------
def test_pod_labels_and_annotations_chart_wide_and_per_component(tmp_path: Path) -> None:
    values = {"podLabels": {"team": "batch", "tier": "all"}, "podAnnotations": {"a": "chart"},
              "scheduler": {"podLabels": {"tier": "sched"}, "podAnnotations": {"a": "mine", "b": "x"}}}
    deploys = deployments(tmp_path, values)
    for component in COMPONENTS:
        meta = pod(deploys[f"volcano-py-{component}"])["metadata"]
        own = component == "scheduler"
        assert meta["labels"] == {"app.kubernetes.io/name": f"volcano-py-{component}",
                                  "app.kubernetes.io/part-of": "volcano-py", "team": "batch",
                                  "tier": "sched" if own else "all"}, component
        annotations = {k: v for k, v in meta["annotations"].items() if k != "checksum/tls"}
        assert annotations == ({"a": "mine", "b": "x"} if own else {"a": "chart"}), component
    assert "checksum/tls" in pod(deploys["volcano-py-webhook"])["metadata"]["annotations"]


def test_pod_labels_cannot_take_the_selectors_label(tmp_path: Path) -> None:
    deploys = deployments(tmp_path, {"podLabels": {"app.kubernetes.io/name": "other"},
                                     "controllers": {"podLabels": {"app.kubernetes.io/name": "other"}}})
    for name, deploy in deploys.items():
        assert pod(deploy)["metadata"]["labels"]["app.kubernetes.io/name"] == name
        assert deploy["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": name}


# ---- securityContext -------------------------------------------------------------------------------------------
def test_the_default_security_contexts(tmp_path: Path) -> None:
    for name, deploy in deployments(tmp_path, {}).items():
        spec = pod(deploy)["spec"]
        assert spec["securityContext"] == {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                                           "seccompProfile": {"type": "RuntimeDefault"}}, name
        assert spec["containers"][0]["securityContext"] == {
            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}, name


def test_security_contexts_merge_chart_wide_then_per_component_and_null_drops_a_key(tmp_path: Path) -> None:
    values = {"podSecurityContext": {"runAsUser": None, "runAsGroup": None, "fsGroup": 2000},
              "containerSecurityContext": {"seLinuxOptions": {"level": "s0:c123,c456"}},
              "webhook": {"podSecurityContext": {"runAsUser": 1001},
                          "containerSecurityContext": {"readOnlyRootFilesystem": False}}}
    deploys = deployments(tmp_path, values)
    for component in COMPONENTS:
        spec = pod(deploys[f"volcano-py-{component}"])["spec"]
        hook = component == "webhook"
        expected_pod = {"runAsNonRoot": True, "fsGroup": 2000, "seccompProfile": {"type": "RuntimeDefault"}}
        assert spec["securityContext"] == expected_pod | ({"runAsUser": 1001} if hook else {}), component
        assert spec["containers"][0]["securityContext"] == {
            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": not hook, "capabilities": {"drop": ["ALL"]},
            "seLinuxOptions": {"level": "s0:c123,c456"}}, component


# ---- nameOverride / fullnameOverride ----------------------------------------------------------------------------
SHARED = {("Queue", "", "default"), ("Namespace", "", SYSTEM_NS)}  # the cluster's, whichever release made them


def names(objs: dict[Key, dict[str, Any]]) -> set[Key]:
    return set(objs) - SHARED


@pytest.mark.parametrize(("values", "release", "prefix"), [
    ({"fullnameOverride": "batch"}, "volcano-py", "batch"),
    ({"nameOverride": "gpu"}, "team-a", "team-a-gpu"),
    ({"nameOverride": "gpu"}, "gpu-sched", "gpu-sched"),
    ({}, "anything", "volcano-py"),
], ids=["fullnameOverride", "nameOverride", "a release name holding nameOverride", "neither: the names as before"])
def test_every_object_is_named_with_the_prefix_and_refers_to_its_own(
        values: dict[str, Any], release: str, prefix: str, tmp_path: Path) -> None:
    from helm_chart import CHART, objects, run_helm, values_file
    out = run_helm("template", release, str(CHART), "-n", SYSTEM_NS, *values_file(tmp_path, merged(ALL_ON, values)))
    objs = objects(out.stdout)
    assert sorted(k for k in names(objs) if not k[2].startswith(f"{prefix}-") and k[2] != prefix) == []
    sas = set(of_kind(objs, "ServiceAccount"))
    roles = {(k[0], k[2]) for k in objs if k[0] in ("Role", "ClusterRole")}
    for (kind, _, name), o in objs.items():
        if kind in ("RoleBinding", "ClusterRoleBinding"):
            assert (o["roleRef"]["kind"], o["roleRef"]["name"]) in roles, name
            assert {s["name"] for s in o["subjects"]} <= sas, name
    pods = {name: pod(d) for name, d in of_kind(objs, "Deployment").items()}
    for name, d in of_kind(objs, "Deployment").items():
        assert d["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": name}
        assert pods[name]["spec"]["serviceAccountName"] in sas
    for kind in ("Service", "PodDisruptionBudget"):
        for name, o in of_kind(objs, kind).items():
            selector = o["spec"]["selector"].get("matchLabels", o["spec"]["selector"])
            assert any(selector.items() <= p["metadata"]["labels"].items() for p in pods.values()), (kind, name)
    # The Leases the components take are the ones their Roles may update.
    leases = {r for (kind, _, _), o in objs.items() if kind == "Role" for rule in o["rules"]
              for r in rule.get("resourceNames", ())}
    for component in ("scheduler", "controllers"):
        opts = options(component, of_kind(objs, "Deployment")[f"{prefix}-{component}"])
        assert opts.leader_elect_lease_name == f"{prefix}-{component}" and opts.leader_elect_lease_name in leases
    # The alerts watch this release's scrape jobs (the monitors' jobLabel: the Service's / pods' name label).
    exprs = {r["alert"]: r["expr"] for g in of_kind(objs, "PrometheusRule")[prefix]["spec"]["groups"]
             for r in g["rules"]}
    assert f'.*{prefix}-scheduler.*' in exprs["VolcanoPySchedulerDown"]
    assert f'.*{prefix}-controllers.*' in exprs["VolcanoPyControllersDown"]
    hook = of_kind(objs, "ValidatingWebhookConfiguration")[f"{prefix}-validate-job"]["webhooks"][0]
    assert hook["clientConfig"]["service"]["name"] in of_kind(objs, "Service")


def test_two_releases_share_no_cluster_scoped_name(tmp_path: Path) -> None:
    from helm_chart import CHART, objects, run_helm, values_file
    first = objects(run_helm("template", "one", str(CHART), "-n", "ns-one", *values_file(tmp_path, ALL_ON)).stdout)
    second = objects(run_helm("template", "two", str(CHART), "-n", "ns-two", *values_file(
        tmp_path, merged(ALL_ON, {"fullnameOverride": "second", "schedulerName": "second"}))).stdout)
    cluster_scoped = {k for k in names(first) | names(second) if k[1] == ""} - {("Namespace", "", "ns-one"),
                                                                             ("Namespace", "", "ns-two")}
    assert {k for k in cluster_scoped if k in first and k in second} == set()


# ---- sharding ----------------------------------------------------------------------------------------------------
def test_sharding_is_off_by_default_and_the_values_turn_on_each_side(tmp_path: Path) -> None:
    (tmp_path / "off").mkdir()
    (tmp_path / "on").mkdir()
    plain = deployments(tmp_path / "off", {})
    assert options("scheduler", plain["volcano-py-scheduler"]).sharding is None
    assert "sharding-controller" not in options("controllers", plain["volcano-py-controllers"]).controllers.volcano_py
    on = deployments(tmp_path / "on", {"scheduler": {"sharding": {"mode": "hard", "name": "batch"}},
                                       "controllers": {"sharding": {"enabled": True}}})
    assert options("scheduler", on["volcano-py-scheduler"]).sharding == ("hard", "batch")
    controllers = options("controllers", on["volcano-py-controllers"])
    assert "sharding-controller" in controllers.controllers.volcano_py
    assert (controllers.sharding_configmap, controllers.sharding_configmap_namespace) == (
        "volcano-sharding-configmap", "volcano-py-system")
