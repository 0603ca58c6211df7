from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, strategies as st

from scheduler.api.resources import ZERO, QuantityError, Resource, parse_quantity, pod_request, to_units


@dataclass(frozen=True)
class Q:
    name: str
    resource: str
    text: Any
    units: int


QUANTITIES = [
    Q("millicores stay millicores", "cpu", "100m", 100),
    Q("a decimal cpu becomes millicores", "cpu", "1.5", 1500),
    Q("binary memory suffixes are exact bytes", "memory", "200Gi", 200 * 2**30),
    Q("an exponent is a power of ten", "cpu", "1e3", 1_000_000),
    Q("decimal memory suffixes are powers of ten", "memory", "64M", 64_000_000),
    Q("a plain integer gpu count becomes milli-units", "nvidia.com/gpu", 1, 1000),
    Q("a fractional gpu share is kept exactly", "nvidia.com/gpu", "0.25", 250),
    Q("sub-milli cpu rounds up as Kubernetes does", "cpu", "1u", 1),
    Q("pods are a count", "pods", "110", 110),
]


@pytest.mark.parametrize("case", QUANTITIES, ids=lambda c: c.name)
def test_quantities_parse_to_integer_units(case: Q) -> None:
    assert to_units(case.resource, case.text) == case.units


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "10Xi", "--1", "1e", "Gi", True, None, [1]])
def test_malformed_quantities_are_rejected_with_the_field_named(text: Any) -> None:
    with pytest.raises(QuantityError, match="spec.containers\\[0\\]"):
        parse_quantity(text, field="spec.containers[0]")


def test_negative_requests_are_rejected() -> None:
    with pytest.raises(QuantityError, match="negative"):
        to_units("cpu", "-1")


def test_arithmetic_comparison_and_shortfall() -> None:
    a = Resource.from_quantities({"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": 3})
    b = Resource.from_quantities({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": 1})
    assert (a + b).gpu == 4000
    assert (a - b) == Resource.from_quantities({"cpu": "1", "memory": "3Gi", "nvidia.com/gpu": 2})
    assert b <= a and not a <= b
    need = Resource.from_quantities({"nvidia.com/gpu": 8, "cpu": "1"})
    assert need.shortfall(a) == Resource.from_quantities({"nvidia.com/gpu": 5})
    assert b.shortfall(a) == ZERO
    assert not Resource.from_quantities({"example.com/fpga": 1}) <= a


def test_summing_a_large_cluster_of_memory_stays_exact() -> None:
    node = Resource.from_quantities({"memory": "2Ti"})
    total = ZERO
    for _ in range(10_000):
        total = total + node
    assert total.memory == 10_000 * 2 * 2**40


@dataclass(frozen=True)
class PodCase:
    name: str
    spec: dict[str, Any]
    expected: dict[str, Any]


def c(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if requests is not None:
        res["requests"] = requests
    if limits is not None:
        res["limits"] = limits
    return {"name": "c", "resources": res, **extra}


POD_CASES = [
    PodCase("containers are summed", {"containers": [c({"cpu": "1"}), c({"cpu": "500m"})]}, {"cpu": "1500m"}),
    PodCase(
        "a container with only limits requests its limits",
        {"containers": [c(limits={"nvidia.com/gpu": 1, "cpu": "2"})]},
        {"nvidia.com/gpu": 1, "cpu": "2"},
    ),
    PodCase(
        "requests win over limits where both are set",
        {"containers": [c({"cpu": "1"}, {"cpu": "4", "memory": "1Gi"})]},
        {"cpu": "1", "memory": "1Gi"},
    ),
    PodCase(
        "a larger init container sets the request",
        {"containers": [c({"cpu": "1"})], "initContainers": [c({"cpu": "3"})]},
        {"cpu": "3"},
    ),
    PodCase(
        "sidecar init containers add to the containers",
        {"containers": [c({"cpu": "1"})], "initContainers": [c({"cpu": "1"}, restartPolicy="Always"), c({"cpu": "1"})]},
        {"cpu": "2"},
    ),
    PodCase(
        "pod-level resources replace the containers' sum (seed 004)",
        {"containers": [c({"cpu": "100m"}), c({"cpu": "100m"})], "resources": {"requests": {"cpu": "1"}}},
        {"cpu": "1"},
    ),
    PodCase(
        "pod-level resources keep container GPUs",
        {"containers": [c(limits={"nvidia.com/gpu": 2})], "resources": {"limits": {"cpu": "4"}}},
        {"cpu": "4", "nvidia.com/gpu": 2},
    ),
    PodCase(
        "overhead is added",
        {"containers": [c({"cpu": "1"})], "overhead": {"cpu": "250m"}},
        {"cpu": "1250m"},
    ),
]


@pytest.mark.parametrize("case", POD_CASES, ids=lambda c: c.name)
def test_pod_request_follows_kubernetes_rules(case: PodCase) -> None:
    expected = Resource.from_quantities({**case.expected, "pods": 1})
    assert pod_request(case.spec) == expected


def test_a_bad_container_quantity_names_the_container() -> None:
    with pytest.raises(QuantityError, match=r"spec.containers\[1\].resources.requests.cpu"):
        pod_request({"containers": [c({"cpu": "1"}), c({"cpu": "lots"})]})


def test_total_of_many_resources_equals_adding_them_one_by_one() -> None:
    parts = [
        Resource.from_quantities({"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": 1}),
        Resource.from_quantities({"cpu": "2", "pods": 1}),
        Resource.from_quantities({"memory": "3Gi", "example.com/fpga": 2, "nvidia.com/gpu": 2}),
    ]
    one_by_one = parts[0] + parts[1] + parts[2]
    assert Resource.total(parts) == one_by_one
    assert Resource.total([]) is ZERO
    assert Resource.total([parts[0], Resource() - parts[0]]) == ZERO


_amount = st.integers(-(10**12), 10**12)
_resources = st.builds(lambda cpu, mem, pods, scalars: Resource.of(cpu, mem, pods, scalars), _amount, _amount,
                       _amount, st.dictionaries(st.sampled_from(["nvidia.com/gpu", "example.com/fpga"]), _amount))


@given(_resources, _resources)
def test_min_with_is_the_smaller_of_each_dimension(a: Resource, b: Resource) -> None:
    low = a.min_with(b)
    for name in {*a.names(), *b.names()}:
        assert low.get(name) == min(a.get(name), b.get(name)), name
    assert low == b.min_with(a) and low <= a and low <= b
    assert all(units for _, units in low.scalars)  # no zeros kept, as every Resource
