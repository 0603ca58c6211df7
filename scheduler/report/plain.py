"""Layer `report`: why a job waited, in plain words — the typed reasons (`api/reasons.py`) said as a person would
explain them, and a job's wait cut into periods, each with its reason.

`api/messages.py` renders the same reasons in Volcano's and kube-scheduler's own wording, which people search
for and tools know; the report shows that sentence too, under the plain one. A kind without a plain sentence
here falls back to that rendering, so a new reason is never hidden.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.api import reasons as R
from scheduler.api.decision import Status
from scheduler.api.messages import message, render, show
from scheduler.durations import format_duration
from scheduler.sim.report import JobRow, show_time


def _amount(resource: str, units: int) -> str:
    name = "GPUs" if resource.endswith("gpu") else resource
    return f"{show(resource, units)} {name}"


def plain(reason: R.Reason) -> str:  # noqa: C901 - one case per kind, by design
    """One reason as a sentence a newcomer reads without knowing Volcano's internals."""
    match reason:
        case R.QueueLimit(queue=q, resource=res, limit_amount=cap, total=total, short=short):
            return (f"Queue {q} was full: it may hold {_amount(res, cap)}, and with this job it would have held "
                    f"{_amount(res, total)} ({_amount(res, short)} too many). It waited for the queue's jobs to "
                    "finish.")
        case R.QueueOverused(queue=q):
            return f"Queue {q} already held its fair share of the cluster, so other queues' jobs went first."
        case R.QueueShareExceeded(queue=q):
            return f"Queue {q} would have passed its share of the cluster with this job."
        case R.QueueMissing(queue=q):
            return f"Its queue {q!r} does not exist: create the Queue or change the job's spec.queue."
        case R.QueueClosed(queue=q, state=state):
            return f"Its queue {q} is {state} and admits no new jobs."
        case R.OvercommitLimit(resource=res, capacity=cap, total=total):
            return (f"The cluster was fully booked: admitting it would have promised {_amount(res, total)} of the "
                    f"{_amount(res, cap)} the overcommit factor allows.")
        case R.GangNotReady(unschedulable=n, tasks=tasks, ready=ready, min_available=minimum):
            if tasks == 1:
                return "Its pod found no room."
            if not ready:
                return f"None of its {tasks} pods could be placed ({minimum} needed together)."
            return (f"Its gang was incomplete: {ready} of the {minimum} pods it needs together were bound; "
                    f"{n} of its {tasks} pods found no room.")
        case R.TooFewTasks(valid=valid, needed=needed):
            return f"It has {valid} pods but needs {needed} to run as a gang, so it can never start as written."
        case R.RoleNotReady(role=role, ready=ready, needed=needed):
            return f"Its task {role} had {ready} of the {needed} pods it needs ready."
        case R.SchedulingGated(tasks=n, gate=gate):
            return f"{n} of its pods are held by the scheduling gate {gate} until it is removed."
        case R.ResourceShortfall(resource=res, needed=needed, free=free):
            return f"Not enough free {_amount(res, needed).split(' ', 1)[1]}: it needed {_amount(res, needed)}, " \
                   f"{show(res, free)} were free."
        case R.Fragmented(node=node):
            return (f"Enough was free in total, but spread over nodes: no node had room for its pods (the most "
                    f"on one node was on {node}).")
        case R.NotPipelined():
            return "Not enough room even counting the pods that were on their way out."
        case R.Reserving(held=held, min_available=minimum, drained=drained):
            kept = f"; {drained} of the nodes kept their free room for it, so they could empty" if drained else ""
            return (f"It had waited long enough to be protected from starving: nodes were being reserved for it "
                    f"as running pods finished ({held} of {minimum} pods held{kept}).")
        case R.NodesUnavailable(total=total, counts=counts):
            ranked = sorted(counts, key=lambda c: -c.nodes)
            return f"None of the {total} nodes could take its next pod: " + ", ".join(
                f"{c.nodes} {render(c.filter)}" for c in ranked) + "."
        case R.MinRuntimeProtected(jobs=jobs, job=job, remaining_seconds=left, min_runtime_seconds=minimum):
            whom = f"{job}" if jobs == 1 else f"{jobs} running jobs (the first to be free is {job})"
            return (f"It could have taken the room of {whom}, but they had not yet run their guaranteed minimum "
                    f"runtime of {minimum:g}s; {left:g}s were left.")
        case R.TopologyLimit(domain=domain) | R.TopologyNoNode(domain=domain):
            return f"No single {domain} had room for the whole gang, which must stay inside one. ({render(reason)})"
    return render(reason)


def plain_status(status: Status) -> str:
    """The status's reasons as sentences, each ending with a full stop, repeated ones said once."""
    said = dict.fromkeys(_sentence(plain(r)) for r in status.reasons)
    return " ".join(said) or message(status)


def _sentence(text: str) -> str:
    text = text.strip()
    return text if not text or text[-1] in ".!?)" else f"{text}."


@dataclass(frozen=True, slots=True)
class Period:
    """Part of a job's wait: from `start` to `end` (None: it never started), and why, plainly and as the
    scheduler said it (`said`: api/messages.py's sentence, "" when the scheduler said nothing)."""

    start: float
    end: float | None
    why: str
    said: str = ""
    kinds: str = ""  # the reasons' kinds, space-separated (what a tool or a test reads)


PIPELINE = 5.0  # seconds from arrival before the scheduler's first word that are not shown as a stretch apart
QUICK = "Admitted, placed and started without a hold-up (the controller, one scheduling period, the pods' start)."
NOTHING_SAID = "Waiting to be admitted and placed; the scheduler gave no reason for this stretch."
BROKEN = ("Its gang was broken: evictions took it below its minimum while it ran, its work since the last start "
          "was lost, and it waited to run whole again.")


def periods(row: JobRow, end: float) -> list[Period]:
    """The job's first wait (arrival to its whole gang running; to `end` if it never started), cut where what
    the scheduler said changed; evictions made room for it are a period of their own. Then each later wait (its
    gang broken by evictions while it ran, until it ran whole again), cut the same way."""
    stop = row.started
    until = stop if stop is not None else end
    marks: list[tuple[float, str, str, str]] = []
    for at, status in row.said:
        if stop is None or at < stop:
            marks.append((at, plain_status(status), message(status), " ".join(r.kind for r in status.reasons)))
    if row.room is not None:
        at, action, pods = row.room
        if stop is None or at < stop:
            marks.append((at, f"{action} evicted {pods} pods of other jobs to make room for it; it waited for them "
                          "to leave (their notice and grace period).", "", "RoomMade"))
    marks.sort(key=lambda m: m[0])
    out: list[Period] = []
    first = marks[0][0] if marks else until
    if marks and first - row.arrival <= PIPELINE:
        marks[0] = (row.arrival, *marks[0][1:])  # the first cycles' admission and placement: not a stretch of its own
        first = row.arrival
    if first > row.arrival or not marks:
        quick = stop is not None and not marks
        out.append(Period(row.arrival, first if marks or stop is not None else None,
                          QUICK if quick else NOTHING_SAID))
    for i, (at, why, said, kinds) in enumerate(marks):
        nxt = marks[i + 1][0] if i + 1 < len(marks) else stop
        out.append(Period(max(at, row.arrival), nxt, why, said, kinds))
    for broke, again in row.rewaits:  # each later wait: the gang broken by evictions, until it ran whole again
        out.append(Period(broke, again, BROKEN, "", "GangBroken"))
        inside = [(at, status) for at, status in row.said if at >= broke and (again is None or at < again)]
        for i, (at, status) in enumerate(inside):
            nxt = inside[i + 1][0] if i + 1 < len(inside) else again
            out.append(Period(at, nxt, plain_status(status), message(status),
                              " ".join(r.kind for r in status.reasons)))
    return out


def span(start: float, end: float | None) -> str:
    return f"{show_time(start)} to {show_time(end)}" if end is not None else f"from {show_time(start)}, never ended"


def story(row: JobRow, end: float, stalled: bool) -> str:
    """One line: what became of the job."""
    if row.started is None and row.ended is None:
        bound = f"{row.bound}/{row.pods} bound, {row.min_available} needed"
        return (f"never started: {bound}" if stalled else f"not started by {show_time(end)}: {bound}")
    if row.started is None:
        return f"{row.phase} at {show_time(row.ended)} before it ran"
    waited = format_duration(round(row.wait or 0.0))
    ran = f"ran {show_time(row.ended - row.started)}" if row.ended is not None else "still running at the end"
    return f"waited {waited}, then {ran}"
