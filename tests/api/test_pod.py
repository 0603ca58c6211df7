"""Pod constraints as the session keys its caches by them."""

from __future__ import annotations

from scheduler.api.pod import Constraints, constraints_of


def test_equal_constraints_are_one_shared_instance_with_a_stable_hash() -> None:
    spec = {"nodeSelector": {"zone": "a"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]}
    first, second = constraints_of(spec), constraints_of(dict(spec))
    assert first is second
    assert first == Constraints(first.node_selector, tolerations=first.tolerations)
    assert hash(first) == hash(Constraints(first.node_selector, tolerations=first.tolerations))
    assert constraints_of({"nodeSelector": {"zone": "b"}}) != first
