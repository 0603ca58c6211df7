"""The controllers' fallback when the webhook is off (issue 31): the `default` queue is created again whenever it
is deleted, not once per scheduler process."""

from __future__ import annotations

from typing import Any

from scheduler.cache.kube import KubeError
from scheduler.controllers.queue import QueueController


class QueueApi:
    def __init__(self, failures: int = 0) -> None:
        self.created: list[dict[str, Any]] = []
        self.failures = failures

    def create_queue(self, queue: dict[str, Any]) -> dict[str, Any] | None:
        if self.failures:
            self.failures -= 1
            raise KubeError(500, "POST", "queues", b'{"message": "injected"}')
        self.created.append(queue)
        return queue


def deleted(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"weight": 3}, "status": {"state": "Open"}}


def test_default_is_created_again_each_time_it_is_deleted() -> None:
    api = QueueApi()
    ctl = QueueController(api)  # type: ignore[arg-type]
    for _ in range(2):
        ctl.on_queue("DELETED", deleted("default"))
    assert api.created == [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                            "metadata": {"name": "default"}, "spec": {"weight": 1, "reclaimable": True}}] * 2


def test_other_queues_stay_deleted() -> None:
    api = QueueApi()
    ctl = QueueController(api)  # type: ignore[arg-type]
    ctl.on_queue("DELETED", deleted("team-a"))
    assert api.created == []


def test_a_failed_recreate_is_retried_with_backoff() -> None:
    api = QueueApi(failures=1)
    ctl = QueueController(api)  # type: ignore[arg-type]
    ctl.retries.timers.arm = lambda key, purpose, delay, action: armed.append((key, purpose, delay, action))  # type: ignore[method-assign]
    armed: list[Any] = []
    ctl.on_queue("DELETED", deleted("default"))
    assert api.created == [] and [(k, p, d) for k, p, d, _ in armed] == [("default", "retry", 0.5)]
    armed[0][3]()
    assert [q["metadata"]["name"] for q in api.created] == ["default"]
