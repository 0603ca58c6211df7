"""The simulator on a DRA cluster: a cluster file's ResourceSlices, DeviceClasses, ResourceClaims and
ResourceClaimTemplates are modelled (sim/devices.py), so a conf can be tried on a cluster whose GPUs are published
by a DRA driver rather than as nvidia.com/gpu: gangs bind only on the devices their claims get, a job that cannot
get its devices waits with the DynamicResources reason, claims made for pods are deleted when the pods finish
(which frees their devices), and a shared claim is allocated once and reserved for each pod."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.api.messages import message
from scheduler.api.reasons import DYNAMIC_RESOURCES, NodesUnavailable
from scheduler.cycle import conf_from_text
from scheduler.sim.errors import InputError
from scheduler.sim.replay import replay
from scheduler.sim.report import totals
from scheduler.sim.workload import load_cluster, load_workload
from scheduler.testing import cluster, pod_object

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"
DRA_CONF = conf_from_text((EXAMPLES / "dra.conf").read_text(), source="dra.conf")
OFF_CONF = conf_from_text((EXAMPLES / "dra.conf").read_text().replace(
    "DynamicResourceAllocationEnable: true", "DynamicResourceAllocationEnable: false"), source="off.conf")
DRIVER = "gpu.example.com"


def _dra_reasons(status) -> list[str]:
    """The details of a published decision's node filters, each a DynamicResources one."""
    assert status is not None
    out = []
    for r in status.reasons:
        if isinstance(r, NodesUnavailable):
            assert {c.filter.filter for c in r.counts} == {DYNAMIC_RESOURCES}
            out += [c.filter.detail for c in r.counts]
    return out


def test_the_example_dra_cluster_runs_two_gangs_on_its_8_gpus_and_the_third_waits_for_the_first_to_end() -> None:
    spec = load_cluster(EXAMPLES / "dra-cluster.yaml")
    slices = [o for o in spec.dra if o["kind"] == "ResourceSlice"]  # one per node of the pool of 4
    assert sorted((s["metadata"]["name"], s["spec"]["nodeName"], s["spec"]["pool"]["name"]) for s in slices) == \
        [(f"gpus-gpu-{i}", f"gpu-{i}", f"gpu-{i}") for i in range(4)]
    outcome = replay(spec, load_workload(EXAMPLES / "dra-workload.yaml"), DRA_CONF)
    runs = {r.item.name: r for r in outcome.runs}
    assert totals(outcome).finished == 3
    assert runs["llama-a"].started == runs["llama-b"].started  # 4 + 4 of the 8 GPUs, at once
    assert runs["llama-a"].ended is not None and runs["llama-c"].started is not None
    assert runs["llama-c"].started >= runs["llama-a"].ended  # its 4 GPUs are llama-a's, freed when it ended
    assert runs["llama-c"].started < runs["llama-b"].ended
    details = _dra_reasons(runs["llama-c"].decision)
    assert details and all(d.endswith("1 device(s) of class gpu.nvidia.com needed, 0 free, 1 short")
                           for d in details)
    assert "gpu.nvidia.com needed, 0 free, 1 short" in message(runs["llama-c"].decision)


def test_without_the_argument_the_claims_are_ignored_and_all_three_run_at_once() -> None:
    outcome = replay(load_cluster(EXAMPLES / "dra-cluster.yaml"), load_workload(EXAMPLES / "dra-workload.yaml"),
                     OFF_CONF)
    runs = {r.item.name: r for r in outcome.runs}
    assert runs["llama-c"].started is not None and runs["llama-a"].ended is not None
    assert runs["llama-c"].started < runs["llama-a"].ended  # 12 pods on 8 GPUs: what DRA is there to prevent


def test_a_dra_object_that_cannot_be_read_is_an_input_error_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("""nodes: [{name: n}]
deviceClasses:
- metadata: {name: gpu}
  spec: {selectors: [{cel: {expression: 3}}]}
""")
    with pytest.raises(InputError) as err:
        load_cluster(path)
    assert err.value.where == "deviceClasses[0]"
    assert "spec.selectors[0].cel.expression" in err.value.problem


def _slice(node: str, *devices: tuple[str, str]) -> dict:
    return {"kind": "ResourceSlice", "metadata": {"name": f"{node}-devs"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                  "resourceSliceCount": 1},
                     "devices": [{"name": n, "attributes": {"type": {"string": t}}} for n, t in devices]}}


def _claimed(name: str, group: str, *, claim: str = "", template: str = "") -> dict:
    pod = pod_object(name, group=group)
    pod["metadata"]["uid"] = f"uid-{name}"
    ref = {"name": "gpu", **({"resourceClaimName": claim} if claim else {"resourceClaimTemplateName": template})}
    pod["spec"]["resourceClaims"] = [ref]
    return pod


def _builder(*pods: dict):
    c = cluster().node("n0").node("n1")
    c.sim.add_dra(_slice("n0", ("gpu-0", "gpu"), ("mig-0", "mig")))
    c.sim.add_dra(_slice("n1", ("gpu-0", "gpu")))
    c.sim.add_dra({"kind": "DeviceClass", "metadata": {"name": "mig"}, "spec": {"selectors": [
        {"cel": {"expression": f'device.attributes["{DRIVER}"].type == "mig"'}}]}})
    c.sim.add_dra({"kind": "DeviceClass", "metadata": {"name": "gpu"}, "spec": {"selectors": [
        {"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    c.sim.add_dra({"kind": "ResourceClaim", "metadata": {"name": "shared"}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "mig"}}]}}})
    c.sim.add_dra({"kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"}, "spec": {"spec": {"devices": {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}})
    groups: dict[str, int] = {}
    for pod in pods:
        group = pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
        groups[group] = groups.get(group, 0) + 1
    for group, members in groups.items():
        c.sim.add_podgroup({"metadata": {"name": group}, "spec": {"minMember": members, "queue": "default"}})
    for pod in pods:
        c.sim.add_pod(pod)
    return c


def test_a_shared_claim_is_allocated_once_on_the_device_its_class_selects_and_reserved_for_each_pod() -> None:
    c = _builder(*(_claimed(f"s{i}", "share", claim="shared") for i in range(3)))
    c.cycle(DRA_CONF)
    assert c.sim.bound("share") == {"s0": "n0", "s1": "n0", "s2": "n0"}  # the one MIG device is on n0
    assert c.sim.devices is not None
    claim = c.sim.devices.claims["default/shared"]
    assert claim.allocation is not None and claim.allocation.node == "n0"
    assert [str(r.device) for r in claim.allocation.results] == [f"{DRIVER}/n0/mig-0"]
    assert sorted((x.name, x.uid) for x in claim.reserved_for) == [(f"s{i}", f"uid-s{i}") for i in range(3)]
    for i in range(3):  # done: they leave reservedFor; a named claim keeps its allocation until it is deleted
        c.sim.finish_pod(f"default/s{i}")
    c.sim.add_pod(_claimed("late", "late-share", claim="shared"))
    c.sim.add_podgroup({"metadata": {"name": "late-share"}, "spec": {"minMember": 1, "queue": "default"}})
    c.cycle(DRA_CONF)
    assert c.sim.bound("late-share") == {"late": "n0"}
    again = c.sim.devices.claims["default/shared"]
    assert [x.name for x in again.reserved_for] == ["late"]  # the finished pods left it
    assert again.allocation == claim.allocation  # kept: no finalizer asks the claim controller to deallocate it


def test_claims_from_templates_are_made_named_in_the_pod_and_deleted_with_it_which_frees_the_devices() -> None:
    c = _builder(*(_claimed(f"w{i}", "train", template="one-gpu") for i in range(3)))
    assert c.sim.pods["default/w0"].manifest["status"]["resourceClaimStatuses"] == \
        [{"name": "gpu", "resourceClaimName": "w0-gpu"}]  # made when the pod was added, as the controller would
    c.cycle(DRA_CONF)
    bound = c.sim.bound("train")
    assert sorted(bound.values()) == ["n0", "n0", "n1"]  # 3 devices (class gpu takes any), one per pod
    assert c.sim.devices is not None
    held = set()
    for i in range(3):
        made = c.sim.devices.claims[f"default/w{i}-gpu"]
        assert made.owner_pod == f"uid-w{i}"
        assert made.allocation is not None and made.allocation.node == bound[f"w{i}"]
        assert [(x.name, x.uid) for x in made.reserved_for] == [(f"w{i}", f"uid-w{i}")]
        held |= {r.device for r in made.allocation.results}
    assert len(held) == 3

    for i in range(2):
        c.sim.add_pod(_claimed(f"x{i}", "next", template="one-gpu"))
    c.sim.add_podgroup({"metadata": {"name": "next"}, "spec": {"minMember": 2, "queue": "default"}})
    c.cycle(DRA_CONF)
    assert c.sim.bound("next") == {}
    details = _dra_reasons(c.sim.decision("next"))
    assert details and all(d.endswith("1 device(s) of class gpu needed, 0 free, 1 short") for d in details)

    for i in range(3):
        c.sim.finish_pod(f"default/w{i}")
    c.cycle(DRA_CONF)
    assert sorted(c.sim.bound("next")) == ["x0", "x1"]  # on the freed devices
    assert not {f"default/w{i}-gpu" for i in range(3)} & set(c.sim.devices.claims)  # deleted with their pods


def test_a_claim_made_from_a_template_never_takes_the_name_of_an_existing_claim() -> None:
    c = _builder()
    c.sim.add_dra({"kind": "ResourceClaim", "metadata": {"name": "w0-gpu"}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}})
    c.sim.add_podgroup({"metadata": {"name": "train"}, "spec": {"minMember": 1, "queue": "default"}})
    c.sim.add_pod(_claimed("w0", "train", template="one-gpu"))
    assert c.sim.pods["default/w0"].manifest["status"]["resourceClaimStatuses"] == \
        [{"name": "gpu", "resourceClaimName": "w0-gpu-1"}]
    assert c.sim.devices is not None
    assert c.sim.devices.claims["default/w0-gpu"].owner_pod == ""  # the user's claim is left as it was
    assert c.sim.devices.claims["default/w0-gpu-1"].owner_pod == "uid-w0"
