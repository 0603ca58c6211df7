"""Hostile input at the edge: any JSON in any field of the DRA objects gives a value or a typed refusal
(FieldError), never another exception."""

from __future__ import annotations

import copy
from typing import Any

from dra_objects import DRIVER, claim, device, device_class, pod, request, slice_, template
from hypothesis import given, settings, strategies as st

from scheduler.api.dra_parse import (
    claim_from_object,
    class_from_object,
    pod_claims_from_object,
    slice_from_object,
    template_from_object,
)
from scheduler.api.field_parsers import FieldError

JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                   max_size=4), max_leaves=12)

SELECTOR = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}
ALLOCATED = {"allocation": {"devices": {"results": [{"request": "g", "driver": DRIVER, "pool": "p", "device": "d"}]},
                            "nodeSelector": SELECTOR},
             "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}
CASES = [
    (slice_from_object, slice_("s", "n", [device("gpu-0", model="a", index=1, memory="1Gi")])),
    (slice_from_object, {**slice_("s", "", [device("d")]), "spec": {"driver": DRIVER, "nodeSelector": SELECTOR,
                                                                     "pool": {"name": "p"}, "devices": [device("d")]}}),
    (class_from_object, device_class("c", "true")),
    (claim_from_object, claim("c", request("a", "gpu", "true", count=2), match=[(f"{DRIVER}/m", ["a"])],
                              status=ALLOCATED)),
    (template_from_object, template("t", request("a", "gpu"))),
    (pod_claims_from_object, pod("p", [("a", "c", ""), ("b", "", "t")], generated=[("b", "p-b")])),
]


def paths(obj: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [here]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += paths(v, (*here, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += paths(v, (*here, i))
    return out


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.sampled_from(range(len(CASES))), st.data(), JSON)
def test_any_value_anywhere_is_read_or_refused_with_a_reason(case: int, data: st.DataObject, junk: Any) -> None:
    parse, base = CASES[case]
    obj = copy.deepcopy(base)
    where = data.draw(st.sampled_from(paths(obj)[1:]))
    target = obj
    for step in where[:-1]:
        target = target[step]
    target[where[-1]] = junk
    try:
        parse(obj)
    except FieldError as err:
        assert err.reason.path and err.reason.problem
