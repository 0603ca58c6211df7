"""`volcano-py queue create|delete|operate|get|list`, as `vcctl queue ...`: the Queue created, the patch and the
Commands operate sends, and the table with the PodGroups counted per queue as vcctl counts them."""

from __future__ import annotations

from typing import Any

import pytest
from vctable import cells

SCHED = "scheduling.volcano.sh/v1beta1"
QUEUES = f"/apis/{SCHED}/queues"


def queue(name: str, **spec: Any) -> dict[str, Any]:
    state = spec.pop("state", "Open")
    return {
        "apiVersion": SCHED,
        "kind": "Queue",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": spec,
        "status": {"state": state} if state else {},
    }


def podgroup(name: str, queue_name: str | None, phase: str | None, namespace: str = "ml") -> dict[str, Any]:
    return {
        "apiVersion": SCHED,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"queue": queue_name} if queue_name else {},
        "status": {"phase": phase} if phase else {},
    }


OBJECTS = [
    queue("default", weight=1),
    queue("team-a", weight=3, parent="root"),
    queue("team-b", state="Closed"),
    podgroup("a1", "team-a", "Running"),
    podgroup("a2", "team-a", "Running", "prod"),
    podgroup("a3", "team-a", "Inqueue"),
    podgroup("a4", "team-a", "Pending"),
    podgroup("b1", "team-b", "Completed"),
    podgroup("b2", "team-b", "Unknown"),
    podgroup("no-queue", None, "Running"),
    podgroup("no-phase", "default", None),
    podgroup("gone", "deleted", "Running"),
]


def test_list_counts_each_queues_podgroups_by_phase_across_namespaces(vcctl: Any) -> None:
    run, _ = vcctl("queue", "list", objects=OBJECTS)
    rows = {r["Name"]: r for r in cells(run.out)}
    assert list(rows["default"]) == [
        "Name",
        "Weight",
        "State",
        "Parent",
        "Inqueue",
        "Pending",
        "Running",
        "Unknown",
        "Completed",
    ]
    assert rows["team-a"] == {
        "Name": "team-a",
        "Weight": "3",
        "State": "Open",
        "Parent": "root",
        "Inqueue": "1",
        "Pending": "1",
        "Running": "2",
        "Unknown": "0",
        "Completed": "0",
    }
    assert [rows["team-b"][k] for k in ("Weight", "State", "Unknown", "Completed")] == ["0", "Closed", "1", "1"]
    # a PodGroup that names no queue counts for none (not even default), one without a phase for no phase
    assert [rows["default"][k] for k in ("Inqueue", "Pending", "Running", "Unknown", "Completed")] == ["0"] * 5


def test_list_columns_are_25_then_8_wide(vcctl: Any) -> None:
    run, _ = vcctl("queue", "list", objects=OBJECTS)
    header = run.out.splitlines()[0]
    assert [header.index(h) for h in ("Weight", "State", "Parent", "Inqueue", "Completed")] == [25, 33, 41, 49, 81]


def test_get_is_the_same_table_for_one_queue(vcctl: Any) -> None:
    run, _ = vcctl("queue", "get", "-n", "team-a", objects=OBJECTS)
    (row,) = cells(run.out)
    assert (row["Name"], row["Running"], row["Inqueue"]) == ("team-a", "2", "1")
    positional, _ = vcctl("queue", "get", "team-a", objects=OBJECTS)
    assert positional.out == run.out


def test_list_of_no_queues_says_no_resources_found(vcctl: Any) -> None:
    run, _ = vcctl("queue", "list", objects=OBJECTS[3:])
    assert run.out == "No resources found\n"


def test_wide_keeps_the_gpu_columns(vcctl: Any) -> None:
    run, _ = vcctl("queue", "list", "-o", "wide", objects=[queue("q", capability={"nvidia.com/gpu": "8"})])
    header, row = (line.split() for line in run.out.splitlines())
    assert dict(zip(header, row, strict=True))["GPU-CAPABILITY"] == "8"


def test_create_sends_vcctls_queue(vcctl: Any) -> None:
    run, stub = vcctl("queue", "create", "-n", "q1", "-w", "3", "-S", "Closed")
    (post,) = stub.writes()
    assert (post["method"], post["path"]) == ("POST", QUEUES)
    assert post["body"] == {
        "apiVersion": SCHED,
        "kind": "Queue",
        "metadata": {"name": "q1"},
        "spec": {"weight": 3},
        "status": {"state": "Closed"},
    }
    assert (run.code, run.out) == (0, "")


def test_create_defaults_are_vcctls(vcctl: Any) -> None:
    _, stub = vcctl("queue", "create")
    assert stub.writes()[0]["body"] == {
        "apiVersion": SCHED,
        "kind": "Queue",
        "metadata": {"name": "test"},
        "spec": {"weight": 1},
        "status": {"state": "Open"},
    }


def test_delete_deletes_the_queue(vcctl: Any) -> None:
    run, stub = vcctl("queue", "delete", "-n", "team-a", objects=OBJECTS)
    assert [(r["method"], r["path"]) for r in stub.writes()] == [("DELETE", f"{QUEUES}/team-a")]
    assert (run.code, run.out) == (0, "")


def test_update_patches_the_weight(vcctl: Any) -> None:
    run, stub = vcctl("queue", "operate", "-n", "team-a", "-a", "update", "-w", "7", objects=OBJECTS)
    (patch,) = stub.writes()
    assert (patch["method"], patch["path"], patch["body"]) == ("PATCH", f"{QUEUES}/team-a", {"spec": {"weight": 7}})
    assert patch["content_type"] == "application/merge-patch+json"
    assert run.out == ""


@pytest.mark.parametrize(
    ("args", "action"),
    [
        (["operate", "-n", "team-b", "-a", "open"], "OpenQueue"),
        (["operate", "--name", "team-a", "--action", "close"], "CloseQueue"),
        (["open", "team-b"], "OpenQueue"),
        (["close", "-n", "team-a"], "CloseQueue"),
    ],
    ids=["operate -a open", "operate --action close", "open NAME", "close -n NAME"],
)
def test_open_and_close_create_a_command_in_default(args: list[str], action: str, vcctl: Any) -> None:
    run, stub = vcctl("queue", *args, objects=OBJECTS)
    (post,) = stub.writes()
    name = args[-1] if args[0] != "operate" else args[2]
    ref = {
        "apiVersion": SCHED,
        "kind": "Queue",
        "name": name,
        "uid": f"uid-{name}",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert post["path"] == "/apis/bus.volcano.sh/v1alpha1/namespaces/default/commands"
    assert (post["body"]["action"], post["body"]["target"], post["body"]["metadata"]["ownerReferences"]) == (
        action,
        ref,
        [ref],
    )
    assert post["body"]["metadata"]["generateName"] == f"{name}-{action.lower()}-"
    assert run.out == ""


@pytest.mark.parametrize(
    "args",
    [
        ["operate", "-n", "team-a", "-a", "update"],
        ["operate", "-n", "team-a"],
        ["operate", "-n", "team-a", "-a", "drain"],
        ["operate", "-a", "open"],
        ["delete"],
        ["get"],
        ["create", "-w", "many"],
    ],
    ids=[
        "update without a weight",
        "no action",
        "an unknown action",
        "no name",
        "delete without a name",
        "get without a name",
        "a weight that is no number",
    ],
)
def test_bad_input_is_one_line_and_status_2_before_any_request(args: list[str], vcctl: Any) -> None:
    run, stub = vcctl("queue", *args, objects=OBJECTS)
    assert run.code == 2 and len(run.err.splitlines()) == 1
    assert stub.requests == []


def test_a_missing_queue_is_the_apiservers_line_and_status_1(vcctl: Any) -> None:
    run, stub = vcctl("queue", "operate", "-n", "nope", "-a", "close", objects=OBJECTS)
    assert run.code == 1 and run.err.splitlines() == ['volcano-py: error: queues "nope" not found']
    assert stub.writes() == []
