"""Layer `plugins`: proportion's deserved shares as a function, and the room each queue's share leaves it.

Not a plugin: `proportion`'s water-filling (with or without time-based fair share), so that `overcommit` can ask,
with `shareBoundReservations`, how much of what a queue's admitted jobs still wait for that queue may take at all.

- `water_fill(book, weights)`: each queue's deserved share, the cluster water-filled by weight among the queues'
  requests (proportion's rule; `weights` instead of the queues' own, for history).
- `history_fill(usage_args, usage)`: the same with the weights time-based fair share moves.
- `share_rooms(ssn)`: per queue, what it may still take: its deserved share (as the conf's `proportion` computes
  it, with its `usage.*` arguments; no `proportion` in the conf: the cluster) capped by its real capability, less
  what it holds. A job of the queue asking more than that is held by its own queue, not by the cluster.
"""

from __future__ import annotations

from scheduler.api.resources import Resource
from scheduler.api.usage import history_weights
from scheduler.framework.fair_share import UsageArgs, fold_queues
from scheduler.framework.plugin import SessionAPI
from scheduler.plugins.shares import QueueBook, QueueDemand, deserved_shares, dimensions, without_pods

PROPORTION = "proportion"


def water_fill(book: QueueBook, weights: dict[str, int] | None = None) -> None:
    """Each queue's deserved share: the cluster water-filled by weight among the queues' requests (`weights`
    instead of the queues' own, with history)."""
    demands = [
        QueueDemand(a.queue.name, a.queue.weight if weights is None else weights.get(a.queue.name, a.queue.weight),
                    a.request, without_pods(a.queue.guarantee), a.limit)
        for a in book.attrs.values()
    ]
    for name, deserved in deserved_shares(book.total, demands).items():
        book.attrs[name].deserved = deserved


def history_fill(book: QueueBook, args: UsageArgs, usage_shares: dict[str, float]) -> None:
    """`water_fill` with each requesting queue's weight moved by its usage fraction (`usage_shares`)."""
    weights = {name: a.queue.weight for name, a in book.attrs.items() if not a.request.is_zero()}
    shares = {name: usage_shares[name] for name in weights if name in usage_shares}
    water_fill(book, history_weights(weights, shares, args.weight))


def proportion_usage(ssn: SessionAPI) -> UsageArgs | None:
    """The `usage.*` arguments of the conf's `proportion` entry; None when the conf has no `proportion`."""
    for tier in ssn.conf.tiers:
        for option in tier.plugins:
            if option.name == PROPORTION:
                usage = getattr(option.args, "usage", None)
                return usage if isinstance(usage, UsageArgs) else UsageArgs()
    return None


def share_rooms(ssn: SessionAPI) -> dict[str, dict[str, int]]:
    """Per queue, per resource its share or real capability bounds, what the queue may still take (at least 0),
    at session open; a resource not listed is not bounded for that queue."""
    usage_args = proportion_usage(ssn)
    held: dict[str, Resource] = {}
    history = usage_args is not None and usage_args.on

    def deserve(book: QueueBook) -> None:
        if usage_args is not None and history:
            folded = fold_queues(ssn.queues, held, book.total, ssn.now, usage_args)
            history_fill(book, usage_args, {name: usage.share for name, usage in folded.items()})
        else:
            water_fill(book)

    book = QueueBook(ssn, deserve)
    book.count_jobs()  # as proportion does: a queue without jobs has no attr (it deserves nothing either way)
    held.update({name: attr.allocated for name, attr in book.attrs.items()})
    deserved = book.deserved() if usage_args is not None else {}
    rooms: dict[str, dict[str, int]] = {}
    for name, attr in book.attrs.items():
        bound = dict(attr.limit)
        if name in deserved:
            for resource in dimensions(book.total):
                bound[resource] = min(bound.get(resource, deserved[name].get(resource)),
                                      deserved[name].get(resource))
        rooms[name] = {resource: max(0, units - attr.allocated.get(resource)) for resource, units in bound.items()}
    return rooms
