"""Why the large gangs of `make bench-day` wait, and where its hours are unfair: one variant's day, explained.

    .venv/bin/python bench/gpu_day_why.py [--seed 35] [--variant all | --conf FILE] [--over MIN] [--trace JOB]
                                          [--quick]

- **Large gangs over the target**: each 16-64-GPU gang that waited longer than `--over` minutes (default: half of
  the `volcano` variant's 16-64-GPU p95 wait on the same day, the target of `make bench-day`), with its wait split
  by what the scheduler said of it meanwhile (each `said` entry of the replay, `Replay.runs`, counted until the
  next one): refused at admission by overcommit or by its queue, held by its queue's share in allocate, reserving
  nodes while they drain (the starvation guard), fragmented, or no room; then the totals.
- **Unfair hours**: each hour whose fairness index (as `make bench-day` computes it) is under 0.95, with each
  queue's GPU-hours held, its max-min fair share of the hour and its demand, and which queue held the most above
  its share.
- **The bound**: the same day's large gangs alone (every job of 1-8 GPUs taken out) under the same conf: their
  p95 wait then. Far below the target, it says the small jobs' GPUs are what the large gangs wait for.
- `--trace JOB`: every 10 minutes of JOB's wait, each node's pods (job, GPUs, minutes run, minutes left by the
  workload's duration): what holds the GPUs it waits for.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_gpu_day as day  # noqa: E402
from gpu_day_metrics import HOUR, hourly, hourly_demand, hourly_fairness, max_min_fair, outcomes  # noqa: E402
from gpu_day_workload import QUEUES, DaySpec, cluster_doc, gpus_of, workload_docs  # noqa: E402

from scheduler.api.snapshot import ClusterSnapshot  # noqa: E402
from scheduler.cycle import load_conf  # noqa: E402
from scheduler.sim.replay import replay  # noqa: E402
from scheduler.sim.workload import load_cluster, workload_from_docs  # noqa: E402

BIG_GPUS = 16
FAIR = 0.95
TRACE_EVERY = 600.0
ON_NODE = frozenset({"RUNNING", "BOUND", "BINDING", "RELEASING"})
# what the scheduler said, by the first of these reason kinds present (the gate that held the gang)
CAUSES: tuple[tuple[str, str], ...] = (
    ("OvercommitLimit", "admission: overcommit"),
    ("QueueLimit", "admission: its queue"),
    ("QueueShareExceeded", "allocate: its queue's share"),
    ("QueueOverused", "allocate: its queue's share"),
    ("Reserving", "reserving: nodes draining"),
    ("Fragmented", "fragmented"),
    ("ResourceShortfall", "no room"),
)


def cause(kinds: Iterable[str]) -> str:
    """The gate a status names: the first of `CAUSES` among its reason kinds, else `other: <kinds>`."""
    present = list(kinds)
    for kind, label in CAUSES:
        if kind in present:
            return label
    return "other: " + "+".join(present) if present else "other"


def wait_breakdown(said: Sequence[tuple[float, Sequence[str]]], started: float | None,
                   end: float) -> dict[str, float]:
    """Seconds of a wait by cause: each (since, reason kinds) entry counts until the next entry, or until the
    gang first ran (`started`; None: `end`); entries after that start are not part of the wait."""
    until = started if started is not None else end
    out: dict[str, float] = {}
    for i, (since, kinds) in enumerate(said):
        if since >= until:
            break
        stop = min(said[i + 1][0] if i + 1 < len(said) else until, until)
        label = cause(kinds)
        out[label] = out.get(label, 0.0) + max(0.0, stop - since)
    return out


@dataclass(frozen=True, slots=True)
class QueueHour:
    held: float  # GPU-hours
    fair: float  # max-min fair share of the hour
    demand: float


@dataclass(frozen=True, slots=True)
class UnfairHour:
    hour: int
    index: float
    queues: Mapping[str, QueueHour]

    @property
    def over(self) -> str | None:
        """The queue that held the most GPU-hours above its fair share (None: none held a whole one above)."""
        queue = max(self.queues, key=lambda q: (self.queues[q].held - self.queues[q].fair, q))
        return queue if self.queues[queue].held - self.queues[queue].fair >= 1 else None

    @property
    def under(self) -> str | None:
        """The queue that held the most GPU-hours below its fair share (None: none a whole one below)."""
        queue = max(self.queues, key=lambda q: (self.queues[q].fair - self.queues[q].held, q))
        return queue if self.queues[queue].fair - self.queues[queue].held >= 1 else None


def unfair_hours(held: Mapping[str, Sequence[float]], demand: Mapping[str, Sequence[float]], capacity: float,
                 hours: int, below: float = FAIR) -> list[UnfairHour]:
    """The hours whose fairness index is under `below`, each queue with demand in it explained."""
    out = []
    for hour, index in hourly_fairness(held, demand, capacity, hours):
        if index >= below:
            continue
        demands = {q: d[hour] for q, d in demand.items() if d[hour] > 0}
        fair = max_min_fair(demands, capacity)
        out.append(UnfairHour(hour, index, {q: QueueHour(held.get(q, [0.0] * hours)[hour], fair[q], demands[q])
                                            for q in sorted(demands) if fair[q] > 0}))
    return out


@dataclass(frozen=True, slots=True)
class Holder:
    job: str
    gpus: int
    ran: float  # seconds on the node
    left: float  # seconds of its duration still to run (negative: it ran longer, e.g. restarted)


def holders(snapshot: ClusterSnapshot, durations: Mapping[str, float]) -> dict[str, list[Holder]]:
    """Each node's pods in a snapshot (every node, empty ones too), the job's duration from `durations` (by
    the Job's name; a PodGroup is named after its Job)."""
    out: dict[str, list[Holder]] = {name: [] for name in sorted(snapshot.nodes)}
    for job in snapshot.jobs.values():
        name = job.key.rsplit("/", 1)[-1]
        base = next((k for k in durations if name == k or name.startswith(k + "-")), name)
        for task in job.tasks.values():
            if task.node_name and task.status.name in ON_NODE:
                ran = snapshot.now - (task.scheduled_at if task.scheduled_at is not None else task.creation)
                out.setdefault(task.node_name, []).append(
                    Holder(base, task.resreq.get("nvidia.com/gpu") // 1000, ran, durations.get(base, 0.0) - ran))
    return out


def tracer(job: str, durations: Mapping[str, float], write: Callable[[str], None]) -> Callable[[ClusterSnapshot],
                                                                                               None]:
    """An `observe` for the replay: every TRACE_EVERY seconds while `job` waits, each node's holders."""
    last = [-math.inf]

    def observe(snapshot: ClusterSnapshot) -> None:
        waiting = [j for j in snapshot.jobs.values() if j.key.rsplit("/", 1)[-1].startswith(job)
                   and not j.is_started()]
        if not waiting or snapshot.now - last[0] < TRACE_EVERY:
            return
        last[0] = snapshot.now
        write(f"{snapshot.now / HOUR:.2f} h, {job} waiting:")
        for node, pods in holders(snapshot, durations).items():
            write(f"  {node}: " + ("; ".join(f"{h.job} {h.gpus} GPU, ran {h.ran / 60:.0f} min, left "
                                            f"{h.left / 60:.0f}" for h in pods) or "free"))

    return observe


def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(0.95 * len(ordered))) - 1]


def big_waits(out: Any) -> list[tuple[float, Any]]:
    """(wait, run) of each large gang of a replay, the longest first (never started: until the replay's end)."""
    waits = [((r.started if r.started is not None else out.end) - r.item.arrival, r)
             for r in out.runs if gpus_of(r.item.manifest) >= BIG_GPUS]
    return sorted(waits, key=lambda w: (-w[0], w[1].key))


def _day(spec: DaySpec, tmp: Path, keep: Callable[[dict[str, Any]], bool]) -> tuple[Any, Any]:
    path = tmp / "cluster.yaml"
    path.write_text(yaml.safe_dump(cluster_doc(spec)))
    return load_cluster(path), workload_from_docs("gpu_day_why", [d for d in workload_docs(spec) if keep(d)])


def run(argv: Sequence[str] | None = None, write: Callable[[str], None] = print) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--variant", default="all", choices=list(day.VARIANTS))
    parser.add_argument("--conf", help="a scheduler conf file to explain instead of a variant's")
    parser.add_argument("--over", type=float, help="minutes (default: half of volcano's 16-64-GPU p95)")
    parser.add_argument("--trace", help="a job's name: what the nodes hold while it waits")
    parser.add_argument("--period", type=float, default=10.0)
    parser.add_argument("--quick", action="store_true", help="a 4-node, 6-hour day (for tests)")
    args = parser.parse_args(argv)
    spec = (DaySpec(nodes=4, per_class=(8, 6, 4), seed=args.seed, day=6 * HOUR) if args.quick
            else DaySpec(nodes=10, seed=args.seed))
    gpus, hours = spec.nodes * spec.gpus_per_node, round(spec.day / HOUR)
    durations = {d["metadata"]["name"]: float(d["duration"]) for d in workload_docs(spec)}
    conf = load_conf(args.conf) if args.conf else day.VARIANTS[args.variant]()
    name = args.conf or args.variant
    with tempfile.TemporaryDirectory() as tmp:
        cluster, workload = _day(spec, Path(tmp), lambda d: True)
        big_cluster, big_workload = _day(spec, Path(tmp), lambda d: gpus_of(d) >= BIG_GPUS)
    over = args.over * 60 if args.over is not None else None
    if over is None:
        base = replay(cluster, workload, day.VARIANTS[day.BASELINE](), period=args.period, horizon=spec.day * 1.5)
        over = 0.5 * p95([w for w, _ in big_waits(base)])
    observe = tracer(args.trace, durations, write) if args.trace else None
    out = replay(cluster, workload, conf, period=args.period, horizon=spec.day * 1.5, observe=observe)
    waits = big_waits(out)
    late = [(w, r) for w, r in waits if w > over]
    write(f"\n{name}, seed {spec.seed}: 16-64-GPU p95 {p95([w for w, _ in waits]) / 60:.1f} min; "
          f"{len(late)} of {len(waits)} large gangs waited over {over / 60:.1f} min "
          f"({len(waits) - math.ceil(0.95 * len(waits))} may for a p95 under it)\n")
    write("| gang | queue | arrival (h) | wait (min) | by cause (min) |\n|---|---|---|---|---|")
    totals: dict[str, float] = {}
    for w, r in late:
        parts = wait_breakdown([(t, [x.kind for x in s.reasons]) for t, s in r.said], r.started, out.end)
        for k, v in parts.items():
            totals[k] = totals.get(k, 0.0) + v
        write(f"| {r.item.name} | {r.queue} | {r.item.arrival / HOUR:.2f} | {w / 60:.0f} | "
              + ", ".join(f"{k} {v / 60:.0f}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1])) + " |")
    write("\nTheir waiting by cause (gang-minutes): "
          + ", ".join(f"{k} {v / 60:.0f}" for k, v in sorted(totals.items(), key=lambda kv: -kv[1])))
    jobs = outcomes(out)
    held = {q: hourly(s, hours) for q, s in day.held_samples(out).items()}
    demand = hourly_demand(jobs, QUEUES, hours)
    unfair = unfair_hours(held, demand, float(gpus), hours)
    write(f"\nHours under {FAIR} (held / fair share / demand, GPU-hours):\n")
    write("| hour | index | most above its share | most below it | " + " | ".join(QUEUES) + " |")
    write("|---" * (4 + len(QUEUES)) + "|")
    for u in unfair:
        cells = [f"{u.queues[q].held:.0f} / {u.queues[q].fair:.0f} / {u.queues[q].demand:.0f}" if q in u.queues
                 else "-" for q in QUEUES]
        write(f"| {u.hour:02d}:00 | {u.index:.2f} | {u.over or '-'} | {u.under or '-'} | " + " | ".join(cells) + " |")
    alone = replay(big_cluster, big_workload, conf, period=args.period, horizon=spec.day * 1.5)
    alone_waits = [w for w, _ in big_waits(alone)]
    bound = p95(alone_waits) if alone_waits else None
    write("\nThe large gangs alone (jobs of 1-8 GPUs taken out), same conf: p95 "
          + ("n/a" if bound is None else f"{bound / 60:.1f} min") + f", {sum(w > over for w in alone_waits)} "
          f"over {over / 60:.1f} min")
    return {"over": over, "late": late, "totals": totals, "unfair": unfair, "alone_p95": bound}


def main(argv: Sequence[str] | None = None) -> int:
    run(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
