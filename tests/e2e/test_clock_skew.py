"""One clock rule (issue 31): a timeout that starts at an apiserver timestamp runs on the apiserver's clock, read
from the Date header of its answers (`scheduler/cache/clock.py`), not on the scheduler machine's.

A gang partly bound (2 of its 4 pods bound by the test, the other 2 cannot fit) is given up after the scheduler's
partial-gang timeout. With the scheduler's clock 60 s ahead, it was given up in the first cycle; 60 s behind, a
minute late. Here it is given up neither before the timeout nor long after it, either way.
"""

from __future__ import annotations

import time
import uuid

import pytest
from controlplane import bind_pod, wait_for
from inprocess import running_scheduler
from test_scheduler import gang_pod, podgroup

from scheduler.adapter.partial import REASON

GROUP = "scheduling.volcano.sh"
TIMEOUT = 60


def given_up(core_v1, namespace: str) -> bool:
    return any(e.reason == REASON for e in core_v1.list_namespaced_event(namespace).items)


@pytest.mark.parametrize(("skew", "timeout"), [(60.0, 15.0), (-60.0, 5.0)], ids=["ahead-60s", "behind-60s"])
def test_a_partial_gang_timeout_runs_on_the_apiservers_clock(
    control_plane, core_v1, custom, namespace, node_set, skew: float, timeout: float
) -> None:
    node = node_set(gpus=2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    custom.create_namespaced_custom_object(GROUP, "v1beta1", namespace, "podgroups", podgroup(group, 4))
    names = [f"{group}-{i}" for i in range(4)]
    for name in names:
        core_v1.create_namespaced_pod(namespace, gang_pod(name, group, node_set.tag, gpus=1))
    created = time.monotonic()
    for name in names[:2]:  # partly bound by someone else: the scheduler finds the gang torn
        bind_pod(core_v1.api_client, namespace, name, node)
    with running_scheduler(control_plane, local_clock=lambda: time.time() + skew,
                           partial_gang_timeout=timeout) as running:
        wait_for(lambda: len(running.results) >= 5 or given_up(core_v1, namespace), TIMEOUT,
                 what="five cycles")
        offset = running.cache.kube.clock.offset
        assert abs(offset + skew) < 2.0, offset  # it read the apiserver's clock: 60 s off this one's
        if skew > 0:
            assert not given_up(core_v1, namespace), "given up before its timeout: the local clock ruled"
        wait_for(lambda: given_up(core_v1, namespace), TIMEOUT, what="the torn gang given up")
        waited = time.monotonic() - created
    # Timestamps are whole seconds and the offset is read to about a second: allow 2 s early; late only by the
    # cycles and watches of a busy 2-core machine, far below the 60 s skew.
    assert timeout - 2.0 <= waited <= timeout + 20.0, (waited, offset)
