"""Users may run vcjobs with Kubernetes' own roles: the chart's ClusterRoles carry the aggregation labels that
Kubernetes' `admin`, `edit` and `view` select (their aggregationRule: rbac.authorization.k8s.io/aggregate-to-X),
so what `edit` aggregates lets a user create a vcjob and `view` lets one read it but not create it.

The aggregation is done here as kube-controller-manager's clusterrole-aggregation controller does it: the union
of the rules of every ClusterRole whose labels match the selector. helm is `make helm-bin`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helm_chart import manifest_objects, of_kind, render

# Kubernetes' bootstrap roles (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go): each selects these.
AGGREGATED_BY = {
    "admin": "rbac.authorization.k8s.io/aggregate-to-admin",
    "edit": "rbac.authorization.k8s.io/aggregate-to-edit",
    "view": "rbac.authorization.k8s.io/aggregate-to-view",
}
WRITE = ("create", "update", "patch", "delete")
READ = ("get", "list", "watch")


def aggregated(roles: dict[str, dict[str, Any]], role: str) -> list[dict[str, Any]]:
    label = AGGREGATED_BY[role]
    return [rule for r in roles.values() if (r["metadata"].get("labels") or {}).get(label) == "true"
            for rule in r.get("rules") or []]


def allows(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(group in rule.get("apiGroups", ()) and resource in rule.get("resources", ())
               and verb in rule.get("verbs", ()) for rule in rules)


@pytest.fixture(scope="module")
def roles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return of_kind(render(tmp_path_factory.mktemp("users")), "ClusterRole")


@pytest.mark.parametrize("role", ["edit", "admin"])
@pytest.mark.parametrize(("group", "resource"), [
    ("batch.volcano.sh", "jobs"), ("batch.volcano.sh", "cronjobs"), ("flow.volcano.sh", "jobflows"),
    ("scheduling.volcano.sh", "podgroups"),
])
def test_edit_and_admin_may_create_change_and_delete(roles: dict[str, dict[str, Any]], role: str, group: str,
                                                     resource: str) -> None:
    rules = aggregated(roles, role)
    assert [v for v in READ + WRITE if not allows(rules, group, resource, v)] == []


def test_edit_may_suspend_a_job_with_a_command(roles: dict[str, dict[str, Any]]) -> None:
    assert allows(aggregated(roles, "edit"), "bus.volcano.sh", "commands", "create")


@pytest.mark.parametrize(("group", "resource"), [
    ("batch.volcano.sh", "jobs"), ("batch.volcano.sh", "jobs/status"), ("scheduling.volcano.sh", "podgroups"),
    ("bus.volcano.sh", "commands"), ("flow.volcano.sh", "jobflows"),
])
def test_view_may_read_and_not_write(roles: dict[str, dict[str, Any]], group: str, resource: str) -> None:
    rules = aggregated(roles, "view")
    assert ([v for v in READ if not allows(rules, group, resource, v)],
            [v for v in WRITE if allows(rules, group, resource, v)]) == ([], [])


def test_no_user_role_grants_queues_or_secrets(roles: dict[str, dict[str, Any]]) -> None:
    """Cluster-scoped queues are the administrator's; a namespace's edit must not reach them (nor Secrets)."""
    for role in AGGREGATED_BY:
        rules = aggregated(roles, role)
        assert not any(allows(rules, g, r, v) for g, r in (("scheduling.volcano.sh", "queues"), ("", "secrets"))
                       for v in READ + WRITE), role


def test_user_roles_create_false_renders_none(tmp_path: Path) -> None:
    objs = of_kind(render(tmp_path, {"userRoles": {"create": False}}), "ClusterRole")
    assert [name for name in objs if aggregated({name: objs[name]}, "edit") + aggregated({name: objs[name]}, "view")
            ] == []


def test_the_manifests_carry_the_same_roles(roles: dict[str, dict[str, Any]]) -> None:
    shipped = of_kind(manifest_objects(), "ClusterRole")
    assert {n: shipped.get(n) for n in ("volcano-py-vcjob-editor", "volcano-py-vcjob-viewer")} == {
        n: roles[n] for n in ("volcano-py-vcjob-editor", "volcano-py-vcjob-viewer")}
