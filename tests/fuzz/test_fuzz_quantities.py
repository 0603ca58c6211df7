"""Fuzz: resource quantities, as users write them in pods, nodes, queues and PodGroups.

Whatever the text, the parsers either return a value or raise QuantityError (a ValueError that names the field),
never anything else: that is what lets the cache skip one bad object instead of failing a whole cycle.
"""

from __future__ import annotations

from hypothesis import given, strategies as st
from strategies import FUZZ, json_values, quantity_text, resource_maps, scalars

from scheduler.api.resources import QuantityError, Resource, parse_quantity, pod_request


@FUZZ
@given(st.one_of(quantity_text, scalars, json_values))
def test_parse_quantity_returns_a_number_or_raises_quantity_error(value):
    try:
        parse_quantity(value, field="spec.x")
    except QuantityError as exc:
        assert "spec.x" in str(exc)


@FUZZ
@given(resource_maps)
def test_resource_from_quantities_raises_only_quantity_error(quantities):
    try:
        r = Resource.from_quantities(quantities, field="status.allocatable")
    except QuantityError as exc:
        assert "status.allocatable" in str(exc)
        return
    # A parsed Resource round-trips through the quantities the scheduler writes back (Queue status.allocated).
    assert Resource.from_quantities(r.to_quantities()) == r


@FUZZ
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "containers": st.one_of(
                st.lists(st.fixed_dictionaries({}, optional={"resources": st.one_of(
                    st.fixed_dictionaries({}, optional={"requests": resource_maps, "limits": resource_maps}),
                    json_values)}), max_size=3),
                json_values),
            "initContainers": st.one_of(
                st.lists(st.fixed_dictionaries({}, optional={
                    "resources": st.fixed_dictionaries({}, optional={"requests": resource_maps}),
                    "restartPolicy": st.one_of(st.just("Always"), json_values)}), max_size=2),
                json_values),
            "overhead": resource_maps,
            "resources": st.one_of(st.fixed_dictionaries({}, optional={"requests": resource_maps}), json_values),
        },
    )
)
def test_pod_request_raises_only_quantity_error(spec):
    try:
        pod_request(spec, field="pod ns/p: spec")
    except QuantityError as exc:
        assert "pod ns/p" in str(exc)
