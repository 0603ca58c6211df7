"""Reasons are values: every kind renders, is published as the PodGroup annotation, and is read back by
`explain` to the same values, large quantities included (16Ti of memory, 1e3 GPUs)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from hypothesis import given, strategies as st

from scheduler.api import reasons as R, reasons_dra as D
from scheduler.api.decision import REASONS_ANNOTATION, Code, Status, publish, read_published
from scheduler.api.job import Condition
from scheduler.api.messages import message, render
from scheduler.api.phases import PodGroupPhase
from scheduler.api.reasons import ReasonError
from scheduler.api.resources import GPU, MEMORY, Resource, display_amount, to_units
from scheduler.api.snapshot import PodGroupStatus, reasons_annotation
from scheduler.cli.ctl.explain import Facts, Gate, explain
from scheduler.testing import cluster

TI16 = 16 * 2**40  # 16Ti of memory, in bytes
GPU1000 = 1000 * 1000  # 1e3 GPUs, in milli-GPUs


@dataclass(frozen=True)
class Sample:
    reason: R.Reason
    gate: Gate  # what explain says holds a PodGroup that published only this reason


SAMPLES = [
    Sample(R.QueueMissing("q"), Gate.QUEUE_MISSING),
    Sample(R.QueueClosed("q", "Closed"), Gate.QUEUE_CLOSED),
    Sample(R.QueueNotLeaf("q", ("a", "b")), Gate.QUEUE_NOT_LEAF),
    Sample(R.QueueParentMissing("q", "q", "org"), Gate.QUEUE_TREE),
    Sample(R.QueueParentCycle("q", "a", "b"), Gate.QUEUE_TREE),
    Sample(R.QueueLimit("q", R.CAPABILITY, GPU, GPU1000, 1_200_000, 300_000, 900_000, 0, 0), Gate.QUEUE_CAPABILITY),
    Sample(R.QueueLimit("q", R.REAL_CAPABILITY, MEMORY, TI16, TI16 + 2**30, 2**30, TI16, 0, 0, cluster=2 * TI16,
                        guaranteed_to_others=TI16), Gate.QUEUE_CAPABILITY),
    Sample(R.QueueLimit("q", R.PARENT_CAPABILITY, GPU, 8000, 9000, 1000, 8000, 500, 500, parent="org"),
           Gate.QUEUE_CAPABILITY),
    Sample(R.QueueLimit("q", R.DESERVED, GPU, 4000, 5000, 1000, 4000), Gate.QUEUE_SHARE),
    Sample(R.QueueOverused("q"), Gate.QUEUE_SHARE),
    Sample(R.QueueShareExceeded("q", ((GPU, GPU1000), (MEMORY, TI16))), Gate.QUEUE_SHARE),
    Sample(R.OvercommitLimit(MEMORY, TI16, 1.2, 21110623253299, TI16, 0, TI16, 2 * TI16), Gate.OVERCOMMIT),
    Sample(R.ResourceQuotaExceeded("ml", "compute", "requests.memory", TI16 * 10**9, TI16 * 10**9, 2**30 * 10**9,
                                   TI16 * 10**9), Gate.WAITING),
    Sample(R.GangNotReady(3, 8, 5, 8), Gate.GANG_SHORTFALL),
    Sample(R.TooFewTasks("", 2, 4), Gate.GANG_TASKS),
    Sample(R.TooFewTasks("ps", 0, 1), Gate.GANG_TASKS),
    Sample(R.SchedulingGated(2, "example.com/g1"), Gate.SCHEDULING_GATED),
    Sample(R.RoleNotReady("worker", 1, 4), Gate.WAITING),
    Sample(R.ResourceShortfall(MEMORY, 2 * TI16, TI16, R.NODES, 4, 2), Gate.GANG_SHORTFALL),
    Sample(R.ResourceShortfall(GPU, GPU1000, 999_500, R.CLUSTER), Gate.GANG_SHORTFALL),
    Sample(R.Fragmented(((GPU, 8000), (MEMORY, TI16)), ((GPU, 3000), (MEMORY, 2**40)), "n1"), Gate.FRAGMENTED),
    Sample(R.NotPipelined(4), Gate.WAITING),
    Sample(R.Reserving(301.5, 2, 3, 4), Gate.RESERVING),
    Sample(R.Reserving(301.5, 2, 0, 2, 2), Gate.RESERVING),
    Sample(R.PlacementStale("g-0", "n1"), Gate.WAITING),
    Sample(R.PartialGangTimeout(2, 4, 600.0, 1, 1), Gate.PARTIAL),
    Sample(R.ScheduleTimeout(600.0, 601.0, 8, 4), Gate.WAITING),
    Sample(R.NodeFilter(R.TAINT_TOLERATION, "dedicated: infer"), Gate.WAITING),
    Sample(R.NodesUnavailable(5, (R.FilterCount(R.NodeFilter(R.INSUFFICIENT, GPU), 3),
                                  R.FilterCount(R.NodeFilter(R.NODE_AFFINITY), 2))), Gate.WAITING),
    Sample(R.TopologyLimit(2, "rack", GPU, GPU1000, 600_000, 400_000, "zone:z/rack:a"), Gate.TOPOLOGY),
    Sample(R.TopologyNoNode(1, "hypernode", GPU, 8000), Gate.TOPOLOGY),
    Sample(R.TopologyNoFit(1), Gate.TOPOLOGY),
    Sample(R.SubGroupNoDomain("stage-1", 4, 1, "rack"), Gate.WAITING),  # explain.py has no room for a gate
    Sample(R.SubGroupsShort("stage", 1, 2, True), Gate.WAITING),
    Sample(R.SubGroupsShort("stage", 1, 2, False), Gate.WAITING),
    Sample(R.PluginError("gang", "allocate", "OverflowError", "cannot convert float infinity to integer"),
           Gate.SCHEDULER_ERROR),
    Sample(R.MinRuntimeProtected(2, "ml/train", 240.0, 600.0, R.MIN_RUNTIME_QUEUE), Gate.WAITING),
    Sample(R.FieldInvalid("PodGroup", "ml/train", "metadata.annotations[volcano-py.io/fallback-min-available]",
                          "not a whole number in 0..2147483647", "'1e999'", "no smaller minimum"), Gate.WAITING),
    # Dynamic Resource Allocation (api/reasons_dra.py)
    Sample(D.ClaimDevicesShort("ml/w0-gpu", "gpu", "gpu.nvidia.com", 2, 1, "n3"), Gate.WAITING),
    Sample(D.ClaimConstraintUnmet("ml/w0-gpu", "gpu.nvidia.com/pcieRoot", ("a", "b"), "n3"), Gate.WAITING),
    Sample(D.ClaimMissing("ml/w0", "shared"), Gate.WAITING),
    Sample(D.DeviceClassMissing("ml/w0-gpu", "gpu", "gpu.nvidia.com"), Gate.WAITING),
    Sample(D.ClaimSelectorInvalid("ml/w0-gpu", "gpu", "device.x", "does not compile", ""), Gate.WAITING),
    Sample(D.AdminAccessRefused("ml/mon", "gpu"), Gate.WAITING),
    Sample(D.ClaimNotReachable("ml/shared", "n2"), Gate.WAITING),
    Sample(D.ClaimUnusable("ml/shared", "is being deleted"), Gate.WAITING),
]


def test_every_reason_kind_has_a_sample() -> None:
    assert {s.reason.kind for s in SAMPLES} == set(R.KINDS)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.reason.kind + ":" + json.dumps(s.reason.to_json())[:40])
def test_a_reason_survives_json_exactly(sample: Sample) -> None:
    text = json.dumps(sample.reason.to_json())
    again = R.from_json(json.loads(text))
    assert again == sample.reason and type(again) is type(sample.reason)
    assert render(again)  # every kind has a sentence


def podgroup_publishing(status: PodGroupStatus) -> dict[str, object]:
    """A PodGroup as the status writer leaves it: condition and annotation (through `reasons_annotation`)."""
    patch = reasons_annotation(status, {})
    assert patch is not None
    conditions = [{"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
                  for c in status.conditions]
    return {"metadata": {"name": "train", "namespace": "ml", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {k: v for k, v in patch.items() if v is not None}},
            "spec": {"queue": "q", "minMember": 4}, "status": {"phase": status.phase.value, "conditions": conditions}}


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.reason.kind + ":" + json.dumps(s.reason.to_json())[:40])
def test_explain_reads_back_what_the_scheduler_published(sample: Sample) -> None:
    decision = Status(Code.UNSCHEDULABLE, (sample.reason,), "gang")
    phase = PodGroupPhase.PENDING if sample.gate == Gate.QUEUE_CLOSED else PodGroupPhase.INQUEUE
    status = PodGroupStatus("ml/train", phase, (Condition("Unschedulable", "True", "NotEnoughResources",
                                                          message(decision)),), 0, 0, 0, decision=decision)
    state = "Closed" if sample.gate == Gate.QUEUE_CLOSED else "Open"
    queue = None if sample.gate == Gate.QUEUE_MISSING else {"metadata": {"name": "q"}, "status": {"state": state}}
    ex = explain(Facts("job ml/train", "ml", podgroup=podgroup_publishing(status), queue=queue))
    assert ex.reasons == (sample.reason,)
    assert ex.gate == sample.gate


def test_all_reasons_at_once_round_trip_through_the_annotation() -> None:
    decision = Status(Code.UNSCHEDULABLE, tuple(s.reason for s in SAMPLES), "proportion")
    assert read_published(publish(decision)) == decision


def test_quantities_are_exact_integers_in_the_annotation_and_read_as_people_write_them() -> None:
    short = R.ResourceShortfall(MEMORY, TI16 + 1, 1, R.NODES, 2, 1)
    published = json.loads(publish(Status(Code.UNSCHEDULABLE, (short,))))["reasons"][0]
    assert published["needed"] == 17592186044417 and published["free"] == 1  # bytes, not a rounded float
    assert display_amount(MEMORY, TI16) == "16Ti"
    assert display_amount(GPU, to_units(GPU, "1e3")) == "1000"
    assert display_amount(GPU, 1_000_500) == "1000.5"
    assert "e+" not in message([s.reason for s in SAMPLES])


@pytest.mark.parametrize("text", ['{"version": 1, "code": "Nope"}', '{"version": 1, "code": "Unschedulable", '
                                  '"reasons": [{"kind": "QueueLimit", "queue": "q"}]}', "not json",
                                  '{"version": 1, "code": "Unschedulable", "reasons": [{"kind": "Unknown"}]}',
                                  '{"version": 1, "code": "Unschedulable", "reasons": [{"kind": "QueueMissing", '
                                  '"queue": 3}]}'])
def test_what_cannot_be_read_is_an_error_not_a_guess(text: str) -> None:
    with pytest.raises(ReasonError):
        read_published(text)


# ---- through a scheduling cycle on the simulator ---------------------------------------------------------


def test_a_gang_short_of_16ti_of_memory_publishes_the_exact_shortfall_and_explain_reads_it() -> None:
    c = cluster().nodes("n", 2, cpu="64", memory="8Ti").job("train", replicas=4, memory="8Ti", cpu="1")
    c.cycle()
    assert c.sim.bound("train") == {}
    reasons = c.sim.reasons("train")
    assert R.ResourceShortfall(MEMORY, 4 * 8 * 2**40, TI16, R.NODES, 4, 2) in reasons
    ex = explain(Facts("job default/train", "default", podgroup=c.sim.podgroup("train"),
                       queue={"metadata": {"name": "default"}, "status": {"state": "Open"}}))
    assert ex.gate == Gate.GANG_SHORTFALL and ex.reasons == reasons
    assert dict(ex.numbers)[MEMORY].endswith("short 16Ti")


def test_a_queue_capped_at_1e3_gpus_publishes_the_limit_in_milli_gpus() -> None:
    c = cluster().nodes("n", 2, gpu=800).queue("big", capability={GPU: "1e3"})
    c.job("train", queue="big", replicas=1, gpu=1, min_resources={GPU: "1200"})
    c.cycle()
    decision = c.sim.decision("train")
    assert decision is not None and decision.plugin == "proportion"
    assert decision.reasons == (R.QueueLimit("big", R.CAPABILITY, GPU, GPU1000, 1_200_000, 1_200_000),)
    ex = explain(Facts("job default/train", "default", podgroup=c.sim.podgroup("train"),
                       queue={"metadata": {"name": "big"}, "spec": {"capability": {GPU: "1e3"}}}))
    assert ex.gate == Gate.QUEUE_CAPABILITY and ex.reasons == decision.reasons


def test_the_annotation_goes_when_the_gang_is_scheduled() -> None:
    c = cluster().node("n1", gpu=4).job("train", replicas=2, gpu=4)
    c.cycle()
    assert c.sim.reasons("train")
    c.node("n2", gpu=4)
    c.cycle()
    assert len(c.sim.bound("train")) == 2
    assert REASONS_ANNOTATION not in (c.sim.podgroup("train")["metadata"].get("annotations") or {})


def test_a_reserving_reason_published_before_drained_existed_reads_as_none_drained() -> None:
    old = {"kind": "Reserving", "waited_seconds": 301.5, "nodes": 2, "held": 3, "min_available": 4}
    assert R.from_json(old) == R.Reserving(301.5, 2, 3, 4, 0)


def _misfit_by_shortfall(request: Resource, free: Resource) -> R.NodeFilter | None:
    """The rule as the shortfall states it: the first dimension of `Resource.items` that `free` lacks."""
    for name, units in request.shortfall(free).items():
        if units:
            return R.NodeFilter(R.TOO_MANY_PODS) if name == "pods" else R.NodeFilter(R.INSUFFICIENT, name)
    return None


_units = st.integers(min_value=-3, max_value=8)
_scalars = st.dictionaries(st.sampled_from(["example.com/fpga", GPU, "hugepages-2Mi", "rdma/ib"]), _units,
                           max_size=3)


@given(st.tuples(_units, _units, _units, _scalars), st.tuples(_units, _units, _units, _scalars))
def test_a_nodes_resource_misfit_is_the_first_dimension_its_free_room_lacks(
        want: tuple[int, int, int, dict[str, int]], free: tuple[int, int, int, dict[str, int]]) -> None:
    """Compared dimension by dimension (nothing built: allocate asks it of every node for every task that fits
    none), it names what the shortfall's first dimension names, over negative (over-committed) room too."""
    request, room = (Resource(c, m, p, tuple(sorted(s.items()))) for c, m, p, s in (want, free))
    assert R.resource_misfit(request, room) == _misfit_by_shortfall(request, room)
