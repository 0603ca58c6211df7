"""Layer `dra`: CEL device selectors (a DeviceClass's, a request's), compiled once per expression and evaluated
once per (expression, device), with the `cel-expr-python` runtime (Google's cel-cpp).

The variable is `device` with `driver`, `attributes` (domain -> id -> bool, int, or string; a version is its
semver text) and `capacity` (domain -> id -> integer in base units), as Kubernetes declares it. As Kubernetes
defines it, a domain the device lacks reads as an empty map, so `"model" in device.attributes["x.io"]` is false
rather than an error (this holds for domains written as a literal key, `device.attributes["x.io"]`, the form
selectors use); an attribute the device lacks is an error. An error or a non-boolean result aborts the claim's
allocation (Kubernetes: "any other result is an error and causes allocation of devices to abort").

Kubernetes' quantity library is offered on capacities, which are integers here: `quantity("80Gi")` (the integer,
rounded up), and the members `compareTo`, `isGreaterThan`, `isLessThan`, `asInteger`. `semver()` and the other
Kubernetes CEL libraries are not offered yet: a selector that uses them fails to compile, with a typed reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import ROUND_CEILING
from typing import Any

from scheduler.api.dra import Device
from scheduler.api.resources import QuantityError, parse_quantity

DEVICES_KEPT_MAX = 100_000  # devices whose inputs and results are kept; past it, all are dropped and recomputed
PROGRAMS_KEPT_MAX = 10_000  # compiled expressions kept (claims come and go with their selectors); past it, dropped
_DOMAIN_KEY = re.compile(r"""device\s*\.\s*(attributes|capacity)\s*\[\s*(?:"([^"\\]*)"|'([^'\\]*)')\s*\]""")


class SelectorError(Exception):
    """A selector that does not compile, or that gave an error or a non-boolean for a device."""


def _quantity(text: str) -> int:
    try:
        value = parse_quantity(text, field="quantity")
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    return int(value.to_integral_value(rounding=ROUND_CEILING))


def _compare(a: int, b: int) -> int:
    return (a > b) - (a < b)


def _cel() -> Any:
    """The CEL runtime, imported on the first selector compiled: it loads protobuf, ~15 ms of every scheduler's
    start (a restart's first bind waits for the imports) on a cluster that may have no DRA claim at all."""
    from cel_expr_python import cel

    return cel


def _env() -> Any:
    cel = _cel()
    t = cel.Type

    def member(name: str, result: Any, impl: Any) -> Any:
        return cel.FunctionDecl(name, [cel.Overload(f"int_{name}_int", result, [t.INT, t.INT], is_member=True,
                                                    impl=impl)])

    functions = [
        cel.FunctionDecl("quantity", [cel.Overload("quantity_string", t.INT, [t.STRING], impl=_quantity)]),
        member("compareTo", t.INT, _compare),
        member("isGreaterThan", t.BOOL, lambda a, b: a > b),
        member("isLessThan", t.BOOL, lambda a, b: a < b),
        cel.FunctionDecl("asInteger", [cel.Overload("int_asInteger", t.INT, [t.INT], is_member=True,
                                                    impl=lambda a: a)]),
    ]
    return cel.NewEnv(variables={"device": t.DYN}, functions=functions)


class _Compiled:
    __slots__ = ("program", "problem", "domains")

    def __init__(self, program: Any, problem: str, domains: tuple[tuple[str, str], ...]) -> None:
        self.program, self.problem, self.domains = program, problem, domains


class Selectors:
    """The CEL programs of one scheduler: each expression compiled once (`compiled` counts compilations), each
    (expression, device) evaluated once per snapshot of devices (`forget_devices` drops those results)."""

    def __init__(self) -> None:
        self._env: Any = None  # made on the first compile (`_cel`)
        self._programs: dict[str, _Compiled] = {}
        self._results: dict[tuple[str, int], bool | str] = {}
        self._inputs: dict[int, tuple[Device, dict[str, Any]]] = {}
        self.compiled = 0

    def problem(self, expression: str) -> str:
        """"" when the expression compiles, else why not."""
        return self._compile(expression).problem

    def _compile(self, expression: str) -> _Compiled:
        done = self._programs.get(expression)
        if done is None:
            if len(self._programs) >= PROGRAMS_KEPT_MAX:  # results stay valid: they are keyed by the text
                self._programs.clear()
            self.compiled += 1
            domains = tuple((m[1], m[2] if m[2] is not None else m[3]) for m in _DOMAIN_KEY.finditer(expression))
            if self._env is None:
                self._env = _env()
            try:
                done = _Compiled(self._env.compile(expression), "", domains)
            except (RuntimeError, ValueError, TypeError) as exc:  # TypeError: text the binding cannot take
                done = _Compiled(None, f"does not compile: {_short(str(exc))}", domains)
            self._programs[expression] = done
        return done

    def matches(self, expression: str, device: Device, driver: str) -> bool:
        """Whether `device` (of `driver`) satisfies `expression`; SelectorError when it cannot be told."""
        key = (expression, id(device))
        result = self._results.get(key)
        if result is None:
            if len(self._results) >= 8 * DEVICES_KEPT_MAX:
                self.forget_devices()
            result = self._results[key] = self._evaluate(expression, device, driver)
        if isinstance(result, str):
            raise SelectorError(result)
        return result

    def _evaluate(self, expression: str, device: Device, driver: str) -> bool | str:
        compiled = self._compile(expression)
        if compiled.program is None:
            return compiled.problem
        data = self._input(device, driver)
        missing = [(k, d) for k, d in compiled.domains if d not in data[k]]
        if missing:  # a domain the device lacks reads as an empty map
            data = {**data, "attributes": dict(data["attributes"]), "capacity": dict(data["capacity"])}
            for k, d in missing:
                data[k][d] = {}
        try:
            value = compiled.program.eval(data={"device": data})
            result = value.value()
        except (RuntimeError, ValueError, TypeError) as exc:
            return f"failed: {_short(str(exc))}"
        if value.type() == _cel().Type.ERROR:
            return f"failed: {_short(str(result))}"
        if not isinstance(result, bool):
            return f"gave {type(result).__name__}, not a boolean"
        return result

    def _input(self, device: Device, driver: str) -> dict[str, Any]:
        held = self._inputs.get(id(device))
        if held is None or held[0] is not device:
            if len(self._inputs) >= DEVICES_KEPT_MAX:  # slices replaced over time: forget the old devices' results
                self.forget_devices()
            data = {"driver": driver, "attributes": _plain(device.attributes),
                    "capacity": _plain(device.capacity), "allowMultipleAllocations": False}
            held = self._inputs[id(device)] = (device, data)
        return held[1]

    def forget_devices(self) -> None:
        """Drop per-device results and inputs (the devices changed); compiled programs are kept."""
        self._results.clear()
        self._inputs.clear()


def _plain(value: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    return {k: dict(v) for k, v in value.items()}


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 160 else text[:157] + "..."
