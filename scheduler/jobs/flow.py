"""Volcano's JobFlow and JobTemplate (`flow.volcano.sh/v1alpha1`) as pure functions. Layer: jobs (pure).

A JobFlow lists `spec.flows`; each entry names a JobTemplate of the flow's namespace and becomes the Volcano Job
`<flow>-<template>`, created from the template's spec once the Job of every `dependsOn.targets` entry has
Completed. `plan()` answers, for one JobFlow and what exists now (its templates, the Jobs it owns), what the
controller does: the Jobs to create, the Jobs to delete (`jobRetainPolicy: delete` once it succeeded), the
status to write (`flow_status.py`) and the problems with the spec, each naming its field.

Volcano's rules, from pkg/controllers/jobflow/ (jobflow_controller_action.go and state/): only
`dependsOn.targets` gates a Job. Volcano's controller reads neither `dependsOn.probe` (`httpGetList`,
`tcpSocketList`, `taskStatusList`) nor `flows[].patch`; so volcano-py does not act on them either (a flow runs
in the same order under both), and says so as a problem of kind IGNORED_FIELD instead of staying silent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import networkx as nx

from scheduler.jobs import keys
from scheduler.jobs.flow_status import FlowPhase, flow_status, next_phase
from scheduler.jobs.state import Phase

FLOW_API_VERSION = "flow.volcano.sh/v1alpha1"
JOBFLOW_KIND = "JobFlow"
JOBTEMPLATE_KIND = "JobTemplate"
# The label and annotation Volcano puts on a flow's Jobs (pkg/controllers/jobflow/constant.go), valued
# `<namespace>.<name>`: the flow's Jobs are listed by the first, a template's by the second.
CREATED_BY_JOB_TEMPLATE = "volcano.sh/createdByJobTemplate"
CREATED_BY_JOB_FLOW = "volcano.sh/createdByJobFlow"
RETAIN, DELETE = "retain", "delete"  # spec.jobRetainPolicy; Volcano's default is retain
PROBES = ("httpGetList", "tcpSocketList", "taskStatusList")


class ProblemKind(StrEnum):
    MISSING_TEMPLATE = "MissingJobTemplate"
    UNKNOWN_TARGET = "UnknownTarget"
    CYCLE = "DependencyCycle"
    DUPLICATE_FLOW = "DuplicateFlow"
    IGNORED_FIELD = "IgnoredField"  # accepted by the CRD, not acted on (as in Volcano)
    NAME_TAKEN = "JobNameTaken"
    REFUSED = "JobRefused"


@dataclass(frozen=True, slots=True)
class Problem:
    """Something wrong with a JobFlow, at `field` (a path into the JobFlow). `names` are the subjects: the
    template, the target, the cycle's flows, the job, as the kind needs them."""

    kind: ProblemKind
    field: str
    names: tuple[str, ...] = ()

    def message(self) -> str:
        """One line naming the field: the text of the Event the controller writes."""
        return f"{self.field}: " + DETAILS[self.kind].format(*self.names, path=" -> ".join(self.names))


# The rest of a Problem's line, by kind; `{path}` is the names joined as a path (a cycle's flows).
DETAILS = {
    ProblemKind.MISSING_TEMPLATE: "no JobTemplate {0} in namespace {1}: job {2} is not created until it exists",
    ProblemKind.UNKNOWN_TARGET: "{0} is not the name of a flow of this JobFlow: job {1} can never start",
    ProblemKind.CYCLE: "the dependsOn targets form a cycle {path}: its jobs can never start",
    ProblemKind.DUPLICATE_FLOW: "{0} is also {1}: one job serves both entries, and the flow never reaches Succeed "
    "(every entry needs a Completed job)",
    ProblemKind.IGNORED_FIELD: "not acted on (nor by Volcano's controller): job {0} is made from its JobTemplate as "
    "it is and starts when its targets have completed",
    ProblemKind.NAME_TAKEN: "a Job {0} exists that this JobFlow does not own: it is left alone, and the flows that "
    "depend on it wait",
    ProblemKind.REFUSED: "the apiserver refused job {0}: {1}",
}


@dataclass(frozen=True, slots=True)
class FlowStep:
    """One entry of `spec.flows`: the template it names and the entries whose Jobs must complete first."""

    index: int
    name: str
    targets: tuple[str, ...] = ()

    @property
    def path(self) -> str:
        return f"spec.flows[{self.index}]"


@dataclass(frozen=True, slots=True)
class FlowPlan:
    create: tuple[dict[str, Any], ...] = ()  # Job manifests
    delete: tuple[Mapping[str, Any], ...] = ()  # Jobs
    status: dict[str, Any] | None = None  # the whole new status; None when it stays as it is
    entered: FlowPhase | None = None  # the phase the flow enters with this status, if it changes
    problems: tuple[Problem, ...] = ()
    steps: Mapping[str, FlowStep] = field(default_factory=dict)  # Job name -> the first entry that makes it


# ---------------------------------------------------------------------------------------------- reading


def object_string(namespace: str, name: str) -> str:
    """`<namespace>.<name>`, the value of Volcano's createdBy labels (GenerateObjectString)."""
    return f"{namespace}.{name}"


def job_name(jobflow: Mapping[str, Any], step: str) -> str:
    """`<flow>-<template>`, as Volcano names a flow's Job (getJobName)."""
    return f"{jobflow['metadata']['name']}-{step}"


def flow_steps(jobflow: Mapping[str, Any]) -> tuple[FlowStep, ...]:
    steps = []
    for index, entry in enumerate((jobflow.get("spec") or {}).get("flows") or ()):
        depends = entry.get("dependsOn") or {}
        steps.append(FlowStep(index, str(entry.get("name") or ""), tuple(str(t) for t in depends.get("targets") or ())))
    return tuple(steps)


def template_names(jobflow: Mapping[str, Any]) -> list[str]:
    """The JobTemplates a JobFlow names, each once, in spec order."""
    return list(dict.fromkeys(s.name for s in flow_steps(jobflow) if s.name))


def retain_policy(jobflow: Mapping[str, Any]) -> str:
    return str((jobflow.get("spec") or {}).get("jobRetainPolicy") or RETAIN)


def flow_phase(jobflow: Mapping[str, Any]) -> str:
    return str(((jobflow.get("status") or {}).get("state") or {}).get("phase") or "")


def job_phase(job: Mapping[str, Any]) -> str:
    return str(((job.get("status") or {}).get("state") or {}).get("phase") or "")


def controlled_by(obj: Mapping[str, Any], uid: str) -> bool:
    """`obj`'s controller is the JobFlow with this uid (a namesake of an earlier flow's is not its Job)."""
    return any(
        ref.get("controller") and ref.get("kind") == JOBFLOW_KIND and ref.get("uid") == uid
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or ()
    )


def flow_owner(obj: Mapping[str, Any]) -> str | None:
    """The name of the JobFlow that controls `obj` (Volcano's isControlledBy + getJobFlowNameByJob)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") == JOBFLOW_KIND and ref.get("apiVersion") == FLOW_API_VERSION:
            return str(ref.get("name"))
    return None


def template_of(job: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) of the JobTemplate a Job was made from, by its label; a value that is not exactly
    `<namespace>.<name>` is none (Volcano's addJob splits it on "." and wants two parts)."""
    value = ((job.get("metadata") or {}).get("labels") or {}).get(CREATED_BY_JOB_TEMPLATE) or ""
    parts = value.split(".")
    return (parts[0], parts[1]) if len(parts) == 2 and all(parts) else None


# ---------------------------------------------------------------------------------------------- the graph


def dependency_graph(steps: Iterable[FlowStep]) -> nx.DiGraph:
    """An edge target -> step for every target that is a flow of this JobFlow."""
    steps = list(steps)
    graph = nx.DiGraph()
    graph.add_nodes_from(s.name for s in steps)
    names = set(graph.nodes)
    graph.add_edges_from((t, s.name) for s in steps for t in s.targets if t in names)
    return graph


def cycles(graph: nx.DiGraph, order: Sequence[str]) -> list[tuple[str, ...]]:
    """One cycle per group of flows that wait on each other: the shortest one through the group's first flow in
    `order`, which it starts and ends with. The groups come in that order too."""
    rank = {name: i for i, name in reversed(list(enumerate(order)))}
    found = []
    for component in nx.strongly_connected_components(graph):
        start = min(component, key=lambda n: rank.get(n, len(rank)))
        if len(component) == 1 and not graph.has_edge(start, start):
            continue
        group = graph.subgraph(component)
        back = min((nx.shortest_path(group, s, start) for s in group.successors(start)), key=len)
        found.append((rank.get(start, len(rank)), (start, *back)))
    return [path for _, path in sorted(found)]


def spec_problems(jobflow: Mapping[str, Any]) -> list[Problem]:
    """What is wrong with the spec alone: duplicate entries, unknown targets, cycles, ignored fields. The
    admission webhook refuses unknown targets and cycles, as Volcano's /jobflows/validate does (not a DAG)."""
    steps = flow_steps(jobflow)
    problems: list[Problem] = []
    first: dict[str, FlowStep] = {}
    for step in steps:
        if step.name in first:
            problems.append(
                Problem(ProblemKind.DUPLICATE_FLOW, f"{step.path}.name", (step.name, first[step.name].path))
            )
        first.setdefault(step.name, step)
    for step in steps:
        for i, target in enumerate(step.targets):
            if target not in first:
                problems.append(
                    Problem(
                        ProblemKind.UNKNOWN_TARGET,
                        f"{step.path}.dependsOn.targets[{i}]",
                        (target, job_name(jobflow, step.name)),
                    )
                )
    for path in cycles(dependency_graph(steps), [s.name for s in steps]):
        problems.append(Problem(ProblemKind.CYCLE, "spec.flows", path))
    problems.extend(ignored_fields(jobflow, steps))
    return problems


def ignored_fields(jobflow: Mapping[str, Any], steps: Sequence[FlowStep]) -> list[Problem]:
    out: list[Problem] = []
    for step, entry in zip(steps, (jobflow.get("spec") or {}).get("flows") or (), strict=True):
        probe = (entry.get("dependsOn") or {}).get("probe") or {}
        job = job_name(jobflow, step.name)
        out.extend(
            Problem(ProblemKind.IGNORED_FIELD, f"{step.path}.dependsOn.probe.{p}", (job,))
            for p in PROBES
            if probe.get(p)
        )
        if entry.get("patch"):
            out.append(Problem(ProblemKind.IGNORED_FIELD, f"{step.path}.patch", (job,)))
    return out


# ---------------------------------------------------------------------------------------------- deciding


def ready_steps(jobflow: Mapping[str, Any], jobs: Mapping[str, Mapping[str, Any]]) -> list[FlowStep]:
    """The entries whose Job does not exist yet and whose every target's Job has Completed (Volcano's deployJob
    and judge). `jobs` are the flow's Jobs by name. Each Job name is considered once, at its first entry."""
    ready, seen = [], set()
    for step in flow_steps(jobflow):
        name = job_name(jobflow, step.name)
        if not step.name or name in seen or name in jobs:
            seen.add(name)
            continue
        seen.add(name)
        targets = [jobs.get(job_name(jobflow, t)) for t in step.targets]
        if all(t is not None and job_phase(t) == Phase.COMPLETED for t in targets):
            ready.append(step)
    return ready


def job_for(jobflow: Mapping[str, Any], step: str, template: Mapping[str, Any]) -> dict[str, Any]:
    """The Job of entry `step`: the template's spec as it is, labelled and annotated with where it comes
    from, controlled by the flow (loadJobTemplateAndSetJob: SetControllerReference sets controller and
    blockOwnerDeletion, so the Jobs go with the flow)."""
    meta = jobflow["metadata"]
    namespace = str(meta.get("namespace") or keys.DEFAULT_NAMESPACE)
    marks = {
        CREATED_BY_JOB_TEMPLATE: object_string(namespace, step),
        CREATED_BY_JOB_FLOW: object_string(namespace, str(meta["name"])),
    }
    owner = {
        "apiVersion": FLOW_API_VERSION,
        "kind": JOBFLOW_KIND,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": keys.JOB_API_VERSION,
        "kind": keys.JOB_KIND,
        "metadata": {
            "name": job_name(jobflow, step),
            "namespace": namespace,
            "labels": dict(marks),
            "annotations": dict(marks),
            "ownerReferences": [owner],
        },
        "spec": dict(template.get("spec") or {}),
    }


def plan(
    jobflow: Mapping[str, Any],
    templates: Mapping[str, Mapping[str, Any] | None],
    jobs: Sequence[Mapping[str, Any]],
    now: float,
) -> FlowPlan:
    """What to do for `jobflow` now. `templates`: each template it names, None where missing; `jobs`: the Jobs
    it controls. As Volcano's states: Failed, Terminating (and a phase they do not know) do nothing; Succeed
    with `jobRetainPolicy: delete` deletes the Jobs and writes nothing; otherwise the ready Jobs are created and
    the status is written."""
    problems = spec_problems(jobflow)
    namespace = str(jobflow["metadata"].get("namespace") or keys.DEFAULT_NAMESPACE)
    steps = {job_name(jobflow, s.name): s for s in reversed(flow_steps(jobflow))}
    for name in template_names(jobflow):
        if templates.get(name) is None:
            step = steps[job_name(jobflow, name)]
            problems.append(
                Problem(ProblemKind.MISSING_TEMPLATE, f"{step.path}.name", (name, namespace, job_name(jobflow, name)))
            )
    phase = flow_phase(jobflow)
    if phase in (FlowPhase.FAILED, FlowPhase.TERMINATING) or phase not in ("", *FlowPhase):
        return FlowPlan(problems=tuple(problems), steps=steps)
    if phase == FlowPhase.SUCCEED and retain_policy(jobflow) == DELETE:
        doomed = tuple(j for j in jobs if not (j.get("metadata") or {}).get("deletionTimestamp"))
        return FlowPlan(delete=doomed, problems=tuple(problems), steps=steps)
    create: tuple[dict[str, Any], ...] = ()
    if phase != FlowPhase.SUCCEED:
        # Volcano's succeed state deploys again, so it would make a finished flow's deleted Job anew; a flow
        # that succeeded creates nothing here.
        by_name = {str(j["metadata"]["name"]): j for j in jobs}
        create = tuple(
            job_for(jobflow, s.name, found)
            for s in ready_steps(jobflow, by_name)
            if (found := templates.get(s.name)) is not None
        )
    status = flow_status(jobflow, jobs, now)
    new_phase = next_phase(phase, status, len(flow_steps(jobflow)))
    status["state"] = {**(status.get("state") or {}), "phase": str(new_phase)}
    changed = status != (jobflow.get("status") or {})
    return FlowPlan(
        create=create,
        status=status if changed else None,
        entered=new_phase if new_phase != phase else None,
        problems=tuple(problems),
        steps=steps,
    )


def template_status(template: Mapping[str, Any], job_names: Iterable[str]) -> dict[str, Any] | None:
    """A JobTemplate's new status: `jobDependsOnList`, the Jobs made from it (Volcano's syncJobTemplate; it
    leaves the status alone when there are none). None when it stays as it is."""
    names = sorted(set(job_names))
    if not names:
        return None
    old = dict(template.get("status") or {})
    new = {**old, "jobDependsOnList": names}
    return new if new != old else None
