"""Least privilege as one table: docs/rbac.md lists every verb the chart's RBAC grants, each with the feature that
needs it and the code that does it. The chart, rendered with every optional part on, grants exactly the table's
rows; so do manifests/ for the accounts they hold; every row's evidence string is in its code file, outside a
comment. A verb granted that no row lists, a row the chart does not grant, and a row whose code no longer does
it each fail here, by name.

helm is the one `make helm-bin` builds (`make unit` depends on it); without it these tests fail, never skip.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from helm_chart import ROOT, SYSTEM_NS, Key, manifest_objects, probe_chart, render

TABLE = ROOT / "docs" / "rbac.md"
HEADER = ("ServiceAccount", "Scope", "API group", "Resource", "Name", "Verbs", "Feature", "Code", "Evidence")
ACCOUNTS = frozenset({"volcano-py-scheduler", "volcano-py-controllers", "volcano-py-webhook",
                      "volcano-py-metrics-reader"})
SCOPES = frozenset({"cluster", "namespace"})
VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"})
# Every optional part of the chart on: the webhook brings its own ClusterRole; secure metrics the reviews and a
# reader account for the monitors; active shards the Lease and NodeShard writes.
ALL_ON = {"webhook": {"enabled": True}, "createNamespace": True, "scheduler": {"activeShards": 2}, "metrics": {
    "secure": True, "prometheusRule": {"enabled": True}, "serviceMonitor": {"enabled": True},
    "podMonitor": {"enabled": True}}}


@dataclass(frozen=True, slots=True)
class Grant:
    """One verb on one resource (and resource name, "" for any), for one ServiceAccount, cluster-wide or in the
    release's namespace only."""

    account: str
    scope: str
    group: str  # "" for the core group
    resource: str  # with its subresource: pods/binding
    name: str
    verb: str

    def __str__(self) -> str:
        name = f"/{self.name}" if self.name else ""
        return (f"{self.account} ({self.scope}): {self.verb} "
                f"{self.resource}{name}.{self.group or 'core'}")


@dataclass(frozen=True, slots=True)
class Row:
    line: int
    account: str
    scope: str
    group: str
    resource: str
    name: str
    verbs: tuple[str, ...]
    feature: str
    code: str
    evidence: str

    def grants(self) -> set[Grant]:
        return {Grant(self.account, self.scope, self.group, self.resource, self.name, v) for v in self.verbs}


def _cells(line: str) -> list[str]:
    """A table line's cells (no cell holds a `|`: an evidence string with one cannot be a row)."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _unquote(cell: str) -> str:
    return cell[1:-1] if len(cell) >= 2 and cell[0] == cell[-1] == "`" else cell


def table_rows(text: str) -> list[Row]:
    """The rows of the table headed HEADER (the first such table; the lines after it that start with `|`)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("|") and tuple(_cells(line)) == HEADER), None)
    assert start is not None, f"no table headed {' | '.join(HEADER)}"
    rows = []
    for i in range(start + 2, len(lines)):  # past the header and its |---| line
        if not lines[i].startswith("|"):
            break
        cells = _cells(lines[i])
        assert len(cells) == len(HEADER), f"line {i + 1}: {len(cells)} cells, not {len(HEADER)}: {lines[i]}"
        account, scope, group, resource, name, verbs, feature, code, evidence = cells
        rows.append(Row(i + 1, account, scope, "" if group == "core" else group, resource, name,
                        tuple(v.strip() for v in verbs.split(",") if v.strip()), feature, code, _unquote(evidence)))
    return rows


def row_problems(rows: list[Row]) -> list[str]:
    """What makes a row unreadable: an unknown account, scope or verb, no feature, no evidence."""
    problems = []
    for r in rows:
        if r.account not in ACCOUNTS:
            problems.append(f"line {r.line}: unknown ServiceAccount {r.account!r}")
        if r.scope not in SCOPES:
            problems.append(f"line {r.line}: scope {r.scope!r} is neither cluster nor namespace")
        if not r.verbs or set(r.verbs) - VERBS:
            problems.append(f"line {r.line}: verbs {r.verbs} are not Kubernetes API verbs")
        if not r.feature or not r.evidence:
            problems.append(f"line {r.line}: no feature or no evidence")
    return problems


def evidence_problems(rows: list[Row], root: Path = ROOT) -> list[str]:
    """Rows whose code file does not exist or does not hold the evidence string on a line that is code (a
    comment naming a path proves nothing)."""
    problems = []
    for r in rows:
        path = root / r.code
        if not path.is_file():
            problems.append(f"line {r.line}: no file {r.code}")
            continue
        code_lines = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]
        if not any(r.evidence in line for line in code_lines):
            problems.append(f"line {r.line}: {r.code} does not contain {r.evidence!r}")
    return problems


def granted(objs: dict[Key, dict[str, Any]], namespace: str = SYSTEM_NS) -> set[Grant]:
    """What the rendered objects grant each ServiceAccount of `namespace`: every binding's subjects times its
    role's rules (a RoleBinding grants in its namespace only, whichever kind of role it names)."""
    roles = {(kind, ns, name): o.get("rules") or [] for (kind, ns, name), o in objs.items()
             if kind in ("ClusterRole", "Role")}
    out: set[Grant] = set()
    for (kind, ns, name), binding in objs.items():
        if kind not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        ref = binding["roleRef"]
        role_key = (ref["kind"], "" if ref["kind"] == "ClusterRole" else ns, ref["name"])
        assert role_key in roles, f"{kind} {name} binds {ref['kind']} {ref['name']}, which the chart does not render"
        scope = "cluster" if kind == "ClusterRoleBinding" else "namespace"
        for subject in binding.get("subjects") or []:
            assert subject["kind"] == "ServiceAccount" and subject.get("namespace") == namespace, (
                f"{kind} {name} binds {subject}: only the release's ServiceAccounts are bound")
            for rule in roles[role_key]:
                # A non-resource URL or an aggregation has no row form: it shows as a grant no row can match.
                for url in rule.get("nonResourceURLs") or []:
                    out |= {Grant(subject["name"], scope, "", f"nonResourceURL {url}", "", v) for v in rule["verbs"]}
                out |= {Grant(subject["name"], scope, group, resource, res_name, verb)
                        for group in rule.get("apiGroups") or [] for resource in rule.get("resources") or []
                        for res_name in rule.get("resourceNames") or [""] for verb in rule["verbs"]}
    return out


def differences(rows: list[Row], grants: set[Grant], accounts: frozenset[str] = ACCOUNTS) -> list[str]:
    """Grants no row lists, and rows (of `accounts`) that grant nothing the chart grants."""
    listed = {g for r in rows for g in r.grants()}
    problems = [f"granted, not in docs/rbac.md: {g}" for g in sorted(grants - listed, key=str)]
    for r in rows:
        if r.account in accounts:
            problems += [f"docs/rbac.md line {r.line}: not granted: {g}" for g in sorted(r.grants() - grants, key=str)]
    return problems


@pytest.fixture(scope="module")
def rows() -> list[Row]:
    return table_rows(TABLE.read_text())


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> dict[Key, dict[str, Any]]:
    return render(tmp_path_factory.mktemp("rbac"), ALL_ON)


# ---- the table against the chart, the manifests and the code ----------------------------------------------------
def test_every_row_is_readable_and_every_account_has_rows(rows: list[Row]) -> None:
    assert row_problems(rows) == []
    assert {r.account for r in rows} == ACCOUNTS


def test_every_rows_evidence_is_in_its_code_file(rows: list[Row]) -> None:
    assert evidence_problems(rows) == []


def test_the_chart_grants_exactly_the_tables_verbs(rows: list[Row], chart: dict[Key, dict[str, Any]]) -> None:
    grants = granted(chart)
    assert {g.account for g in grants} == ACCOUNTS
    assert differences(rows, grants) == []


SECURE_METRICS = "`--metrics-secure`"  # how a row that only the chart's metrics.secure grants says so
ACTIVE_SHARDS = "`--active-shards`"  # likewise, scheduler.activeShards above 1


def test_the_manifests_grant_exactly_the_tables_verbs_of_their_accounts(rows: list[Row]) -> None:
    """manifests/ holds no webhook (it needs a certificate), no secure metrics and no active shards (off by
    default): the scheduler's and the controllers' other rows only."""
    grants = granted(manifest_objects())
    accounts = frozenset(g.account for g in grants)
    assert accounts == {"volcano-py-scheduler", "volcano-py-controllers"}
    default = [r for r in rows if not r.feature.startswith((SECURE_METRICS, ACTIVE_SHARDS))]
    assert differences(default, grants, accounts) == []


# ---- the checks catch what they are for ---------------------------------------------------------------------
EXTRA_ROLE = """apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: probe-extra
rules:
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list]
- nonResourceURLs: [/metrics]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: probe-extra
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: probe-extra
subjects:
- kind: ServiceAccount
  name: volcano-py-controllers
  namespace: {{ .Release.Namespace }}
"""


def test_a_verb_the_chart_grants_that_no_row_lists_is_named(rows: list[Row], tmp_path: Path) -> None:
    objs = render(tmp_path, ALL_ON, chart=probe_chart(tmp_path, {"zz-extra-role.yaml": EXTRA_ROLE}))
    assert differences(rows, granted(objs)) == [
        "granted, not in docs/rbac.md: volcano-py-controllers (cluster): get nonResourceURL /metrics.core",
        "granted, not in docs/rbac.md: volcano-py-controllers (cluster): get secrets.core",
        "granted, not in docs/rbac.md: volcano-py-controllers (cluster): list secrets.core",
    ]


def test_a_row_the_chart_does_not_grant_is_named(rows: list[Row], chart: dict[Key, dict[str, Any]]) -> None:
    secrets = next(r for r in rows if r.account == "volcano-py-controllers" and r.resource == "secrets")
    wider = replace(secrets, line=999, verbs=("create", "get"))
    namespaced = replace(secrets, line=1000, scope="namespace")
    assert differences([*rows, wider, namespaced], granted(chart)) == [
        "docs/rbac.md line 999: not granted: volcano-py-controllers (cluster): get secrets.core",
        "docs/rbac.md line 1000: not granted: volcano-py-controllers (namespace): create secrets.core",
    ]


def test_a_row_whose_code_does_not_do_it_is_named(rows: list[Row], tmp_path: Path) -> None:
    """Evidence only in a comment, evidence in no line, and a code file that does not exist."""
    (tmp_path / "mod.py").write_text('# GET /api/v1/secrets, once\nPATH = "/api/v1/pods"\n')
    row = replace(rows[0], line=1, code="mod.py")
    assert evidence_problems([replace(row, evidence="/api/v1/pods"), replace(row, evidence="/api/v1/secrets"),
                              replace(row, evidence="/api/v1/nodes"), replace(row, code="gone.py")], tmp_path) == [
        "line 1: mod.py does not contain '/api/v1/secrets'",
        "line 1: mod.py does not contain '/api/v1/nodes'",
        "line 1: no file gone.py",
    ]


def test_a_row_with_an_unknown_account_scope_or_verb_is_named(rows: list[Row]) -> None:
    row = replace(rows[0], line=7)
    assert row_problems([replace(row, account="default"), replace(row, scope="everywhere"),
                         replace(row, verbs=("*",)), replace(row, feature="")]) == [
        "line 7: unknown ServiceAccount 'default'",
        "line 7: scope 'everywhere' is neither cluster nor namespace",
        "line 7: verbs ('*',) are not Kubernetes API verbs",
        "line 7: no feature or no evidence",
    ]


def test_the_table_parses_as_written() -> None:
    """A row as docs/rbac.md writes one: core for "", an empty name, a quoted evidence string with a pipe-free
    path, comma-separated verbs."""
    text = "\n".join([
        "intro", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER),
        "| volcano-py-scheduler | namespace | core | pods/status | | get, patch | f | a.py | `x(\"/p\")` |",
        "| volcano-py-webhook | cluster | coordination.k8s.io | leases | lease-a | update | g | b.py | `y` |",
        "", "| not | part | of | it |",
    ])
    assert table_rows(text) == [
        Row(4, "volcano-py-scheduler", "namespace", "", "pods/status", "", ("get", "patch"), "f", "a.py", 'x("/p")'),
        Row(5, "volcano-py-webhook", "cluster", "coordination.k8s.io", "leases", "lease-a", ("update",), "g", "b.py",
            "y"),
    ]


def test_the_controllers_may_only_create_secrets_and_no_other_account_touches_them(
    chart: dict[Key, dict[str, Any]],
) -> None:
    """The ssh plugin's key pair is the one Secret volcano-py writes; it never reads one back."""
    on_secrets = {(g.account, g.scope, g.verb, g.name) for g in granted(chart)
                  if (g.group, g.resource) == ("", "secrets")}
    assert on_secrets == {("volcano-py-controllers", "cluster", "create", "")}
