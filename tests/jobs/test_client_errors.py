"""The controllers' API client: a create refused because the namespace is terminating is not an error."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler.cache.kube import KubeError
from scheduler.controllers.client import Api

TERMINATING = {
    "kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403,
    "message": 'pods "j-w-0" is forbidden: unable to create new content in namespace ns because it is being '
               "terminated",
    "details": {"name": "j-w-0", "kind": "pods",
                "causes": [{"reason": "NamespaceTerminating", "message": "namespace ns is being terminated",
                            "field": "metadata.namespace"}]},
}


class Refusing:
    def __init__(self, status: int, body: dict[str, Any]):
        self.status, self.body = status, json.dumps(body).encode()

    def request(self, method: str, path: str, **_: Any) -> Any:
        raise KubeError(self.status, method, path, self.body)


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j-w-0", "namespace": "ns"}}


def test_a_create_in_a_terminating_namespace_is_dropped() -> None:
    assert Api(Refusing(403, TERMINATING)).create(POD) is None  # type: ignore[arg-type]


def test_any_other_forbidden_create_still_raises() -> None:
    other = dict(TERMINATING, details={"causes": [{"reason": "FieldValueForbidden"}]})
    with pytest.raises(KubeError) as refused:
        Api(Refusing(403, other)).create(POD)  # type: ignore[arg-type]
    assert refused.value.status == 403
