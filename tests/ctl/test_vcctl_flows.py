"""`volcano-py jobflow|jobtemplate create|get|list|delete|describe`, as vcctl's: one line per document of a file,
vcctl's tables, and describe's YAML or JSON that reads back as the object (issue: vcctl parity)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from vctable import cells

FLOW = "flow.volcano.sh/v1alpha1"


def flow(kind: str, name: str, namespace: str = "ml", phase: str = "") -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": FLOW,
        "kind": kind,
        "spec": {"flows": [{"name": "a"}]},
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "managedFields": [{"manager": "kubectl"}],
        },
    }
    if phase:
        obj["status"] = {"state": {"phase": phase}}
    return obj


OBJECTS = [flow("JobFlow", "etl", phase="Running"), flow("JobFlow", "nightly", "prod"), flow("JobTemplate", "tpl")]
FILE = """kind: JobFlow
metadata: {name: new, namespace: ml}
spec: {flows: [{name: a}]}
---
metadata: {name: etl, namespace: ml}
spec: {flows: [{name: b}]}
---
metadata: {name: unplaced}
spec: {flows: [{name: c}]}
"""


def test_create_makes_each_document_and_says_which_failed(vcctl: Any, tmp_path: Path) -> None:
    (tmp_path / "f.yaml").write_text(FILE)
    run, stub = vcctl("jobflow", "create", "-f", str(tmp_path / "f.yaml"), objects=OBJECTS)
    assert run.out.splitlines() == [
        "Created JobFlow: ml/new",
        'Failed to create JobFlow: jobflows "etl" already exists',
        "Created JobFlow: default/unplaced",
    ]
    assert run.code == 1  # vcctl exits 0 here; a document that was not created is a failure
    posts = [(r["path"], r["body"]["kind"], r["body"]["metadata"]["namespace"]) for r in stub.writes()]
    assert posts == [
        (f"/apis/{FLOW}/namespaces/ml/jobflows", "JobFlow", "ml"),
        (f"/apis/{FLOW}/namespaces/ml/jobflows", "JobFlow", "ml"),
        (f"/apis/{FLOW}/namespaces/default/jobflows", "JobFlow", "default"),
    ]


def test_delete_by_file_deletes_each_document(vcctl: Any, tmp_path: Path) -> None:
    (tmp_path / "f.yaml").write_text(FILE)
    run, stub = vcctl("jobflow", "delete", "-f", str(tmp_path / "f.yaml"), objects=OBJECTS)
    assert run.out.splitlines() == [
        'Failed to delete JobFlow: jobflows "new" not found',
        "Deleted JobFlow: ml/etl",
        'Failed to delete JobFlow: jobflows "unplaced" not found',
    ]
    assert [(r["method"], r["path"].rsplit("/", 1)[1]) for r in stub.writes()] == [
        ("DELETE", "new"),
        ("DELETE", "etl"),
        ("DELETE", "unplaced"),
    ]


def test_delete_by_name(vcctl: Any) -> None:
    run, stub = vcctl("jobtemplate", "delete", "-N", "tpl", "-n", "ml", objects=OBJECTS)
    assert (run.code, run.out) == (0, "Deleted JobTemplate: ml/tpl\n")
    assert [r["path"] for r in stub.writes()] == [f"/apis/{FLOW}/namespaces/ml/jobtemplates/tpl"]


def test_list_shows_name_namespace_phase_and_age(vcctl: Any) -> None:
    run, _ = vcctl("jobflow", "list", "--all-namespaces", objects=OBJECTS)
    rows = cells(run.out)
    assert [(r["Name"], r["Namespace"], r["Phase"]) for r in rows] == [
        ("etl", "ml", "Running"),
        ("nightly", "prod", ""),
    ]
    assert list(rows[0]) == ["Name", "Namespace", "Phase", "Age"]


def test_jobtemplate_tables_have_name_and_namespace(vcctl: Any) -> None:
    listed, _ = vcctl("jobtemplate", "list", "-n", "ml", objects=OBJECTS)
    got, _ = vcctl("jobtemplate", "get", "-N", "tpl", "-n", "ml", objects=OBJECTS)
    assert cells(listed.out) == cells(got.out) == [{"Name": "tpl", "Namespace": "ml"}]
    assert listed.out.splitlines()[0] == "Name    Namespace    "  # each column: its widest cell + 4


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_describe_prints_the_object_without_managed_fields(fmt: str, vcctl: Any) -> None:
    run, _ = vcctl("jobflow", "describe", "-N", "etl", "-n", "ml", "-o", fmt, objects=OBJECTS)
    shown = json.loads(run.out) if fmt == "json" else yaml.safe_load(run.out)
    expected = {k: v for k, v in OBJECTS[0].items()}
    expected["metadata"] = {k: v for k, v in OBJECTS[0]["metadata"].items() if k != "managedFields"}
    assert shown == expected


def test_describe_without_a_name_shows_every_object_of_the_namespace(vcctl: Any) -> None:
    run, _ = vcctl("jobflow", "describe", "-n", "ml", objects=[*OBJECTS, flow("JobFlow", "two")])
    # one YAML document after the other, two empty lines between them and no `---`, as vcctl prints them
    assert [yaml.safe_load(part)["metadata"]["name"] for part in run.out.split("\n\n\n")] == ["etl", "two"]


@pytest.mark.parametrize(
    "args",
    [["jobflow", "get"], ["jobflow", "delete"], ["jobtemplate", "get"], ["jobflow", "create", "-f", "missing.yaml"]],
    ids=["get without a name", "delete without a name or file", "jobtemplate get", "create from no file"],
)
def test_bad_input_is_one_line_and_status_2(args: list[str], vcctl: Any) -> None:
    run, stub = vcctl(*args, objects=OBJECTS)
    assert run.code == 2 and len(run.err.splitlines()) == 1 and stub.writes() == []
