"""Layer `framework`: room held for jobs the `consolidate` action moved, kept from one cycle to the next.

A moved job's pods are evicted (deleted with their grace period), recreated by its controller, and placed by a
later cycle on the nodes its plan chose. Between the plan and that placement the room is held: every cycle
that runs `consolidate` first honours the holds (`actions/holds.py`), so no other job takes the room.

The holds live in the scheduler's memory, in the `CycleMemo` the runner and the simulator hand every cycle
(`memo.py`): a restarted scheduler or a new leader starts without them, and a moved job is then placed as any
pending job is. A hold ends when its job runs whole again, when its job is gone, or after its `until`.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field

from scheduler.api.resources import Resource


@dataclass(frozen=True, slots=True)
class HeldPod:
    """One pod of a moved job: its key (namespace/name, as its controller recreates it), the node it is held on,
    and what it requests there."""

    pod: str
    node: str
    request: Resource


@dataclass(frozen=True, slots=True)
class Hold:
    """The room held for `job`, moved at `since` to make room for `preemptor`; given up after `until`."""

    job: str
    preemptor: str
    pods: tuple[HeldPod, ...]
    since: float
    until: float

    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted({p.node for p in self.pods}))


@dataclass(slots=True)
class DrainBook:
    """For the starvation guard's held idle room (`actions/starvation.py`, 5.): per gang and node the least the node
    lacked to hold the gang's task, when it last lacked less, and when the gang last reserved it, so a node that
    frees nothing more is let go."""

    best: dict[str, dict[str, tuple[float, float, float]]] = field(default_factory=dict)  # (lacking, since, seen)
    swept: float = float("-inf")  # when every gang's entries were last swept

    def progressing(self, job: str, node: str, lacking: float, now: float, limit: float) -> bool:
        """Whether the node lacked less than ever before for `job` within the last `limit` seconds."""
        nodes = self.best.setdefault(job, {})
        seen = nodes.get(node)
        least, since = (lacking, now) if seen is None or lacking < seen[0] else seen[:2]
        nodes[node] = (least, since, now)
        return now - since <= limit

    def forget(self, job: str, nodes: set[str], now: float, limit: float,
               live: Container[str] | None = None) -> None:
        """Drop `job`'s nodes it no longer reserves; once every `limit`, also every gang not in `live` (gone from the
        cluster; None: all live) and every other gang's node it has not reserved for `limit` (it started or reserves
        elsewhere). So the book holds what reservations used in the last two limits, and a call costs the gang's
        own nodes but for that sweep."""
        own = self.best.get(job)
        if own is not None:
            for node in [n for n in own if n not in nodes]:
                del own[node]
        if now - self.swept <= limit:
            return
        self.swept = now
        for key in list(self.best):
            gone = live is not None and key != job and key not in live
            kept = {} if gone else {n: entry for n, entry in self.best[key].items()
                                    if key == job or now - entry[2] <= limit}
            if kept:
                self.best[key] = kept
            else:
                del self.best[key]


@dataclass(slots=True)
class HoldBook:
    """The holds in force, by the moved job's key, and what became of the ones that ended (for tests and logs)."""

    holds: dict[str, Hold] = field(default_factory=dict)
    ended: list[tuple[str, str]] = field(default_factory=list)  # (job, why): placed | gone | expired | refused
    drains: DrainBook = field(default_factory=DrainBook)  # the starvation guard's held nodes (`DrainBook`)

    ENDED_MAX = 1000

    def end(self, job: str, why: str) -> None:
        if self.holds.pop(job, None) is not None:
            self.ended.append((job, why))
            del self.ended[: max(0, len(self.ended) - self.ENDED_MAX)]
