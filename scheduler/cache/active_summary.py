"""Layer `cache`: with `--active-shards N`, what each shard's holder publishes on the shard's Lease for the others
(cache/active.py), and what it reads there of theirs.

A replica passes over its pods of other replicas' jobs undecoded (cache/scope.py), so no replica's cache holds
every shard's jobs. What the holder of shard 0 once read from them, each shard's holder now publishes, as one JSON
annotation (`scheduling.volcano-py.io/shard-summary`, api/active_shards.py `ShardSummary`) written with each
renewal of the shard's Lease (`LeaderElector.publish`: no request added), worked out again at most twice a retry
period:

- what the shard's jobs hold per queue: the holder of shard 0 writes the Queues' `status.allocated` as its own
  session's figures plus the other shards' (`allocated_elsewhere`);
- the shard's gangs larger than their shard (cache/active_plan.py `Loans`), each with when it was first seen
  waiting: the holder of shard 0 lends them nodes, the longest waiting first (`loans_elsewhere`);
- on shard 0's Lease, the plan's node weights per shard without loans, against which the other holders weigh
  their gangs (`active_plan.offers_of`).

Each shard's summary as last read is kept while its Lease carries none (a new holder before its first session)
or one that cannot be read (said once per streak): a Lease is writable by whoever may write Leases in its
namespace, so every value is parsed with bounds. A replica's own summary of a shard is the last known of it once
it gives the shard up, until the next holder publishes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from scheduler.api.active_shards import (
    LOANS_MAX,
    SUMMARY_MAX,
    Need,
    ShardSummary,
    allocated_by_queue,
    encode_summary,
    parse_summary,
)
from scheduler.api.job import JobInfo
from scheduler.api.resources import Resource
from scheduler.api.snapshot import ClusterSnapshot
from scheduler.cache.active_plan import Loans, PlanWriter, offers_of, weight_unit

log = logging.getLogger("volcano_py.active")


class Summaries:
    def __init__(self, shards: int, period: float, plan: PlanWriter, monotonic: Callable[[], float],
                 wall: Callable[[], float], say: Callable[[str, str], None],
                 unsay: Callable[[str], None]) -> None:
        self.shards, self.period, self.plan = shards, period, plan
        self.monotonic, self.wall, self.say, self.unsay = monotonic, wall, say, unsay
        # held shard -> its summary as published (None: too large to publish), swapped whole: the round reads it
        self.texts: dict[int, str | None] = {}
        self._at: float | None = None
        self.seen: dict[int, ShardSummary] = {}  # shard -> its summary as last read (or worked out, held)
        self._seen_text: dict[int, str] = {}
        self.loans = Loans()  # this replica's gangs larger than their shard, when it does not hold shard 0

    def published(self, shard: int, active: frozenset[int]) -> str | None:
        """What a renewal of the shard's Lease carries: its summary while a session of this replica has it
        (`active`); called on the Lease round's thread (`texts` is swapped whole)."""
        return self.texts.get(shard) if shard in active else None

    def read(self, published: Sequence[str | None], active: frozenset[int]) -> None:
        """The other shards' summaries as their Leases last showed them (`published`, by shard)."""
        for i, text in enumerate(published):
            if i in active or text is None or text == self._seen_text.get(i):
                continue
            self._seen_text[i] = text
            summary = parse_summary(text)
            if isinstance(summary, str):  # said once until a readable one comes
                self.say(f"summary:{i}", f"active shards: the summary on shard {i}'s Lease {summary}; its last "
                         "readable one is kept")
                continue
            self.unsay(f"summary:{i}")
            self.seen[i] = summary

    def knows(self, active: frozenset[int]) -> bool:
        """Whether a summary of every shard not in `active` has been read."""
        return all(i in self.seen for i in range(self.shards) if i not in active)

    def loans_elsewhere(self, active: frozenset[int]) -> list[tuple[float, int, Need]]:
        """(since, shard, need) of the gangs the other shards' holders published."""
        return [(since, i, need) for i, summary in sorted(self.seen.items()) if i not in active
                for since, _, need in summary.loans]

    def allocated_elsewhere(self, active: frozenset[int]) -> dict[str, Resource]:
        """Queue -> what the other shards' jobs hold, as their holders last published."""
        held: dict[str, list[Resource]] = {}
        for i, summary in self.seen.items():
            if i not in active:
                for queue, holds in summary.allocated.items():
                    held.setdefault(queue, []).append(holds)
        return {queue: Resource.total(parts) for queue, parts in held.items()}

    def work_out(self, snapshot: ClusterSnapshot, own: dict[str, JobInfo], routes: Mapping[str, int],
                 active: frozenset[int]) -> None:
        """Each active shard's summary, from the jobs routed to it (`own`, `routes`): again at most twice a retry
        period, or at once for a shard that has none yet. Never raises: a fault costs the summaries (the last ones
        stay published), never the cycle."""
        now = self.monotonic()
        if self._at is not None and now - self._at < self.period / 2 and active <= self.texts.keys():
            return
        self._at = now
        try:
            self._work_out(snapshot, own, routes, active)
        except Exception:  # noqa: BLE001 - a job read oddly costs the summary, not every job its session
            log.exception("active shards: working out the shards' summaries failed; the last ones stay published")

    def _work_out(self, snapshot: ClusterSnapshot, own: dict[str, JobInfo], routes: Mapping[str, int],
                  active: frozenset[int]) -> None:
        held: dict[int, list[JobInfo]] = {i: [] for i in active}
        for key, job in own.items():
            held[routes[key]].append(job)
        if 0 in active:  # the plan's own gangs and weights
            base: tuple[tuple[tuple[int, int], ...], ...] | None = tuple(self.plan.base)
            loans = self.plan.loans
        else:  # this replica's gangs, weighed against the plan shard 0's holder published
            shard0 = self.seen.get(0)
            base, loans = (shard0.base if shard0 is not None else None), self.loans
            if base:
                loans.needs(replace(snapshot, jobs=own), routes.__getitem__, offers_of(base), self.shards,
                            weight_unit(snapshot), self.wall())
        texts: dict[int, str | None] = {}
        for i in sorted(active):  # (the longest waiting loans, as many as a reader takes)
            summary = ShardSummary(allocated_by_queue(held[i]), tuple(loans.entries({i})[:LOANS_MAX]),
                                   base if i == 0 else None)
            text = encode_summary(summary)
            if len(text) > SUMMARY_MAX:  # too large for a Lease: one too large would fail the renewal itself
                summary = replace(summary, loans=())
                text = encode_summary(summary)
                fits = len(text) <= SUMMARY_MAX
                self.say(f"summary-size:{i}", f"active shards: shard {i}'s summary is more than a Lease may carry "
                         f"({SUMMARY_MAX} characters); published without "
                         f"{'its loans' if fits else 'it whole (readers keep the last they read)'}")
                if not fits:
                    texts[i] = None
                    continue
            texts[i] = text
            self.seen[i], self._seen_text[i] = summary, text  # the last known of it, should this replica give it up
        self.texts = texts
