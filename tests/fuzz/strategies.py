"""Hypothesis strategies for what users write: quantities, JSON values, objects with one field gone wrong."""

from __future__ import annotations

import copy
import os
from typing import Any

from hypothesis import HealthCheck, settings, strategies as st

SUFFIXES = ["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "u", "n", "e3", "E-2",
            "e99999", "e-99999", "i", "K", "mi"]

# Quantity-shaped text: mostly near-valid, so the parser's inner branches are reached, not only the regex.
quantity_text = st.one_of(
    st.builds(
        lambda sign, digits, frac, suffix: f"{sign}{digits}{frac}{suffix}",
        st.sampled_from(["", "+", "-", " ", "--"]),
        st.from_regex(r"[0-9]{0,30}", fullmatch=True),
        st.sampled_from(["", ".", ".5", ".000001", ".9999999999"]),
        st.sampled_from(SUFFIXES),
    ),
    st.text(max_size=40),
    st.text(alphabet="0123456789.eE+-mkKMGTPi ", max_size=30),
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    quantity_text,
)

json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=12), st.sampled_from(["cpu", "memory", "nvidia.com/gpu",
                                                                          "requests", "limits", "key",
                                                                          "operator", "values", "effect",
                                                                          "type", "status", "name"])),
                        inner, max_size=4),
    ),
    max_leaves=12,
)

resource_maps = st.one_of(
    st.dictionaries(st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu", "ephemeral-storage", "x/y", ""]),
                    st.one_of(quantity_text, scalars), max_size=5),
    json_values,
)


def set_path(obj: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    """A deep copy of obj with the value at path replaced (intermediate containers created as dicts)."""
    out = copy.deepcopy(obj)
    cur: Any = out
    for step in path[:-1]:
        if isinstance(cur, list):
            if not cur:
                return out
            cur = cur[min(int(step), len(cur) - 1)]
            continue
        nxt = cur.get(step)
        if not isinstance(nxt, (dict, list)):
            nxt = cur[step] = {}
        cur = nxt
    last = path[-1]
    if isinstance(cur, list):
        if cur:
            cur[min(int(last), len(cur) - 1)] = value
    else:
        cur[last] = value
    return out


# `make test` runs every target with a small budget (~100 examples); `make fuzz` sets
# VOLCANO_FUZZ_EXAMPLES=10000. No deadline: a slow example is a question for RELIABILITY.md, not a crash.
# Applied per test (`@FUZZ`), so other suites keep hypothesis' defaults.
FUZZ = settings(
    max_examples=int(os.environ.get("VOLCANO_FUZZ_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    derandomize=os.environ.get("VOLCANO_FUZZ_RANDOM") != "1",
    print_blob=True,
)
