"""CEL device selectors: Kubernetes' semantics on attributes and capacities, one compilation per expression."""

from __future__ import annotations

import pytest

from scheduler.api.dra import Device
from scheduler.dra.cel import SelectorError, Selectors

DRV = "gpu.example.com"
A100 = Device("gpu-0", {DRV: {"model": "a100", "index": 0, "mig": False}, "numa.io": {"node": 1}},
              {DRV: {"memory": 80 * 2**30}})
_LIST = "[" + ",".join(map(str, range(60))) + "]"


@pytest.mark.parametrize("expression, expected", [
    (f'device.driver == "{DRV}"', True),
    ('device.driver == "other"', False),
    (f'device.attributes["{DRV}"].model == "a100"', True),
    (f'device.attributes["{DRV}"].index > 0', False),
    (f'device.attributes["{DRV}"].mig', False),
    ('device.attributes["numa.io"].node == 1', True),
    # a domain the device lacks is an empty map, not an error
    ('"model" in device.attributes["absent.io"]', False),
    ('"memory" in device.capacity["absent.io"]', False),
    (f'"model" in device.attributes["{DRV}"] && device.attributes["{DRV}"].model.startsWith("a1")', True),
    (f'device.capacity["{DRV}"].memory.compareTo(quantity("40Gi")) >= 0', True),
    (f'device.capacity["{DRV}"].memory.isGreaterThan(quantity("80Gi"))', False),
    (f'device.capacity["{DRV}"].memory.isLessThan(quantity("81Gi"))', True),
    (f'device.capacity["{DRV}"].memory.asInteger() == 85899345920', True),
])
def test_selector_semantics(expression: str, expected: bool) -> None:
    assert Selectors().matches(expression, A100, DRV) is expected


@pytest.mark.parametrize("expression, problem", [
    (f'device.attributes["{DRV}"].absent == 1', "failed"),  # an attribute the device lacks is an error
    ('device.driver', "not a boolean"),
    ('device.driver ==', "does not compile"),
    ('semver("1.0.0") == semver("1.0.0")', "does not compile"),
    ('quantity("lots") == 1', "failed"),
    # hostile selectors: bounded by the runtime, each a reason rather than an exception or a stall
    ("'\ud800' == 'a'", "does not compile"),  # a lone surrogate: valid JSON, not UTF-8
    ("(" * 3000 + "true" + ")" * 3000, "does not compile"),  # nesting past the parser's limit
    (_LIST + ".all(a, " + _LIST + ".all(b, " + _LIST + ".all(c, true)))", "failed"),  # 216,000 iterations
])
def test_errors_abort(expression: str, problem: str) -> None:
    with pytest.raises(SelectorError, match=problem):
        Selectors().matches(expression, A100, DRV)


def test_each_expression_compiles_once_and_results_are_kept_per_device() -> None:
    sel = Selectors()
    devices = [Device(f"d{i}", {DRV: {"index": i}}) for i in range(50)]
    picked = [d.name for d in devices for _ in range(3) if sel.matches(f'device.attributes["{DRV}"].index % 7 == 0',
                                                                       d, DRV)]
    assert picked == [f"d{i}" for i in range(0, 50, 7) for _ in range(3)]
    assert sel.compiled == 1
    assert sel.problem("1 +") and sel.problem("1 +") and sel.compiled == 2


def test_results_of_replaced_devices_are_not_kept_without_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    import scheduler.dra.cel as cel

    monkeypatch.setattr(cel, "DEVICES_KEPT_MAX", 10)
    sel = Selectors()
    for i in range(35):  # each version of a slice is new device objects
        assert sel.matches("true", Device(f"d{i}"), DRV)
        assert len(sel._inputs) <= 10 and len(sel._results) <= 10


def test_capacities_are_integers_so_plain_comparisons_also_work() -> None:
    """A difference from Kubernetes, where a capacity is a Quantity that only `compareTo` and friends compare."""
    assert Selectors().matches(f'device.capacity["{DRV}"].memory > quantity("40Gi")', A100, DRV)


def test_compiled_programs_are_not_kept_without_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every distinct selector ever seen (claims come and go, each may carry its own) would stay compiled."""
    import scheduler.dra.cel as cel

    monkeypatch.setattr(cel, "PROGRAMS_KEPT_MAX", 10)
    sel = Selectors()
    for i in range(35):
        assert sel.matches(f"{i} >= 0", A100, DRV)
        assert len(sel._programs) <= 10
    assert sel.compiled == 35 and sel.matches("0 >= 0", A100, DRV)  # a dropped program's result is still known
