"""Layer `cache`: with `--active-shards N`, the shard each job is routed to beyond its hash (cache/active.py): a
PodGroup's pin annotation, read once per resourceVersion, and the shard a started gang's pods were bound under."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from scheduler.api.active_shards import parse_pin
from scheduler.api.job import JobInfo
from scheduler.cache.leader import LEASE_ANNOTATION


class Pins:
    def __init__(self, shards: int, lease_prefix: str, podgroups: Callable[[], int],
                 say: Callable[[str, str], None]) -> None:
        self.shards, self.podgroups, self.say = shards, podgroups, say
        self._pins: dict[str, tuple[str, int | None]] = {}  # PodGroup -> (resourceVersion, pin)
        # job -> (the job as read, the shard its bound pods were bound under): unchanged jobs are the same objects
        self.bound: dict[str, tuple[JobInfo, int | None]] = {}
        self._lease_prefix = lease_prefix  # a shard's bind fence, as on its pods: `<namespace>/<lease>-shard-`

    def pin(self, key: str, podgroup: Mapping[str, Any] | None) -> int | None:
        """The shard the PodGroup's annotation pins the job to (None: not pinned, or no PodGroup), read once per
        resourceVersion; an unreadable pin is said once and ignored."""
        meta = podgroup.get("metadata") if isinstance(podgroup, Mapping) else None
        meta = meta if isinstance(meta, Mapping) else {}
        version = str(meta.get("resourceVersion") or "")
        if not version:  # an implicit gang of one (no PodGroup): nothing to read, nothing to keep
            return None
        cached = self._pins.get(key)
        if cached is None or cached[0] != version:
            if len(self._pins) > 4 * max(1024, self.podgroups()):
                self._pins.clear()  # bounded: PodGroups come and go
            pin = parse_pin(meta.get("annotations"), self.shards)
            if not isinstance(pin, int) and pin is not None:
                self.say(f"pin:{key}:{version}", pin.describe(key))
                pin = None
            cached = self._pins[key] = (version, pin)
        return cached[1]

    def pin_bound(self, jobs: Mapping[str, JobInfo], pins: dict[str, int | None]) -> None:
        """A gang (minMember above 1) its PodGroup does not pin keeps to the shard its pods were bound under:
        each bind carries the Lease of its node's shard (`ActiveShards.fence_for`), copied onto the pod, and every
        replica reads the same pods, so no write is needed and a change of the shard count never moves a gang that
        has started. Pods bound under several shards (a survivor binding on its own shard's nodes too): the
        lowest."""
        bound = self.bound
        if len(bound) > 2 * len(jobs) + 1024:
            self.bound = bound = {k: v for k, v in bound.items() if k in jobs}
        prefix, shards = self._lease_prefix, self.shards
        for key, job in jobs.items():
            if pins[key] is not None or job.min_available <= 1:
                continue
            known = bound.get(key)
            if known is None or known[0] is not job:
                lowest: int | None = None
                for task in job.tasks.values():
                    fence = task.annotations.get(LEASE_ANNOTATION) if task.node_name else None
                    if type(fence) is str and fence.startswith(prefix):
                        tail = fence[len(prefix):]
                        if tail.isascii() and tail.isdigit() and len(tail) <= 3 and int(tail) < shards:
                            lowest = int(tail) if lowest is None else min(lowest, int(tail))
                known = bound[key] = (job, lowest)
            pins[key] = known[1]
