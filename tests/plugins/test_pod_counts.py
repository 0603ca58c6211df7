"""The counts inter-pod affinity and spread judge by stay equal to a recount of the nodes, whatever a
Statement does (allocate, pipeline, evict, discard, commit), with the first question asked before or after."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from scheduler.api.job import TaskInfo
from scheduler.api.phases import TaskStatus
from scheduler.api.pod import LabelSelector, PodAffinityTerm
from scheduler.cycle import builtin_default_conf
from scheduler.framework.session import Session
from scheduler.plugins.pod_counts import COUNTED, PlacedPods, Selection, SpreadSelection, TermSelection
from scheduler.plugins.predicates import PredicatesPlugin
from scheduler.plugins.registry import PLUGINS
from scheduler.testing import cluster, pod_object

HOST, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"
APPS = ("train", "serve")


def term(app: str, key: str, namespaces: tuple[str, ...] = ()) -> PodAffinityTerm:
    return PodAffinityTerm(LabelSelector((("app", app),)), key, namespaces)


def anti_affinity(app: str, key: str) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}]}}


def session(seed: int) -> Session:
    rng = random.Random(seed)
    c = cluster()
    for i in range(6):
        labels = {HOST: f"n{i}"} | ({ZONE: "ab"[i % 2]} if i != 5 else {})  # n5 is in no zone
        c.node(f"n{i}", cpu="64", labels=labels)
    for i in range(10):
        namespace = "default" if i % 3 else "other"
        app = APPS[i % 2]
        pod = pod_object(f"p{i}", namespace=namespace, affinity=anti_affinity(app, rng.choice((HOST, ZONE))))
        pod["metadata"]["labels"]["app"] = app
        if i < 5:  # running at the snapshot
            pod["spec"]["nodeName"] = f"n{rng.randrange(6)}"
            pod["status"] = {"phase": "Running"}
        c.sim.add_pod(pod)
    return Session(c.sim.snapshot(), builtin_default_conf(), PLUGINS)


def placed_pods(ssn: Session) -> PlacedPods:
    return next(p for _, p in ssn.plugins if isinstance(p, PredicatesPlugin))._topology.placed


def recount(ssn: Session, selection: Selection, me: TaskInfo) -> Counter[str]:
    """Matching counted pods per label value, by walking every node (what the predicates did before)."""
    out: Counter[str] = Counter()
    for node in ssn.node_list:
        value = node.labels.get(selection.key)
        for other in node.tasks.values():
            if value is not None and other.status in COUNTED and other.key != me.key and selection.selects(other):
                out[value] += 1
    return out


def repelled_recount(ssn: Session, task: TaskInfo) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for node in ssn.node_list:
        for other in node.tasks.values():
            if other.status not in COUNTED or other.key == task.key:
                continue
            for t in other.constraints.pod_anti_affinity:
                value = node.labels.get(t.topology_key)
                if value is not None and t.selects(other.namespace, task.namespace, task.labels):
                    out.add((t.topology_key, value))
    return out


def asked(placed: PlacedPods, selection: Selection, me: TaskInfo) -> Counter[str]:
    domains, counts = placed.counts(selection, me)
    assert counts[-1] == 0  # the slot nodes without the label read stays empty
    return Counter({domains.values[d]: int(n) for d, n in enumerate(counts[:-1].tolist()) if n})


def repelled(placed: PlacedPods, task: TaskInfo) -> set[tuple[str, str]]:
    return {(domains.key, domains.values[d]) for domains, hit in placed.repelled(task)
            for d in hit[:-1].nonzero()[0].tolist()}


SELECTIONS: tuple[Selection, ...] = (
    TermSelection(term("train", HOST), "default"),
    TermSelection(term("serve", ZONE), "other"),
    TermSelection(term("train", ZONE, ("default", "other")), "default"),
    SpreadSelection(LabelSelector((("app", "serve"),)), "default", ZONE),
)


@dataclass(frozen=True)
class Case:
    name: str
    seed: int
    first_question_after: int  # operations made before anything is asked


CASES = [
    Case("asked from the start, then kept current through 60 random operations", 1, 0),
    Case("first asked after 20 operations: the nodes are read as they are then", 2, 20),
    Case("another random history, asked from the start", 3, 0),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_counts_equal_a_recount_after_every_operation(case: Case) -> None:
    ssn = session(case.seed)
    rng = random.Random(case.seed)
    placed = placed_pods(ssn)
    tasks = sorted((t for job in ssn.jobs.values() for t in job.tasks.values()), key=lambda t: t.key)
    statement = ssn.statement()
    for step in range(60):
        _operate(ssn, statement, rng, tasks)
        if step < case.first_question_after:
            continue
        for me in tasks:
            for selection in SELECTIONS:
                assert asked(placed, selection, me) == recount(ssn, selection, me), (step, me.name, selection)
            assert repelled(placed, me) == repelled_recount(ssn, me), (step, me.name)


def _operate(ssn: Session, statement: Any, rng: random.Random, tasks: list[TaskInfo]) -> None:
    roll = rng.random()
    pending = [t for t in tasks if t.status == TaskStatus.PENDING]
    occupying = [t for t in tasks if t.status in {TaskStatus.RUNNING, TaskStatus.ALLOCATED}]
    if roll < 0.5 and pending:
        place = statement.allocate if rng.random() < 0.7 else statement.pipeline
        place(rng.choice(pending), rng.choice(ssn.node_list))
    elif roll < 0.75 and occupying:
        statement.evict(rng.choice(occupying), "test")
    elif roll < 0.9:
        statement.discard()
    else:
        statement.commit()
