"""The controllers' ConfigMap entry reader: a missing, non-text, oversized or non-YAML entry is the caller's own
error with one clear message; a good entry is its YAML."""

from __future__ import annotations

import pytest

from scheduler.controllers.configmap import entry_text, load_yaml


class OwnError(Exception):
    pass


@pytest.mark.parametrize("cm", [{}, {"data": None}, {"data": ["x"]}, {"data": {"other": "a"}}, {"data": {"k": 3}}])
def test_a_configmap_without_a_text_entry_is_the_callers_error(cm: dict[str, object]) -> None:
    with pytest.raises(OwnError, match="no key k in the ConfigMap"):
        entry_text(cm, "k", OwnError)


def test_an_entry_is_read_as_yaml_within_its_bound() -> None:
    assert load_yaml(entry_text({"data": {"k": "a: [1, 2]"}}, "k", OwnError), what="k", limit=100,
                     error=OwnError) == {"a": [1, 2]}
    with pytest.raises(OwnError, match="k is 101 bytes, more than a ConfigMap holds"):
        load_yaml("#" * 101, what="k", limit=100, error=OwnError)
    with pytest.raises(OwnError, match="k is not YAML: "):
        load_yaml("a: [1,\n", what="k", limit=100, error=OwnError)
