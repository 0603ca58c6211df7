"""Layer `ctl`: `volcano-py job run|list|view|suspend|resume|delete`, as `vcctl job ...` (pkg/cli/job).

The flags are vcctl's (same long and short names, same defaults); the Job that `run` creates is the one vcctl
creates for the same flags; the tables are vcctl's to the byte, so scripts that cut vcctl's columns read ours.
volcano-py adds `-o json|yaml|wide` and takes the job's name as a positional argument too.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from scheduler.api.objects import MutableObj
from scheduler.api.resources import QuantityError
from scheduler.cli.ctl import connect
from scheduler.cli.ctl.client import JOBS
from scheduler.cli.ctl.connect import (
    UsageError,
    all_namespaces,
    common,
    label_selector,
    name_of,
    positional_or_flag,
    reporting,
    watch_flag,
)
from scheduler.cli.ctl.gofmt import canonical_quantity, go_int, local_date, pad
from scheduler.cli.ctl.jobview import render_job
from scheduler.cli.ctl.output import is_object_format, print_objects, render_objects
from scheduler.cli.ctl.schedulers import VOLCANO_PY_DEFAULT, claims, unclaimed_warning
from scheduler.cli.ctl.tables import job_table
from scheduler.cli.ctl.watching import watch

JOB_TYPE_LABEL = "volcano.sh/job-type"  # v1alpha1.JobTypeKey
TEMPLATE_LABEL = "job.volcano.sh"  # pkg/cli/job/run.go: jobName
NO_RESOURCES = "No resources found"
JOB_RESOURCE = "job.batch.volcano.sh"


# ---- run (pure) ---------------------------------------------------------------------------------------------


def resource_list(spec: str) -> dict[str, str] | None:
    """`cpu=1000m,memory=100Mi` -> {cpu: "1", memory: "100Mi"} (canonical, as a Go client sends it); None for an
    empty spec (pkg/cli/util/util.go PopulateResourceListV1)."""
    if spec == "":
        return None
    result: dict[str, str] = {}
    for statement in spec.split(","):
        parts = statement.split("=")
        if len(parts) != 2:
            raise UsageError(f"invalid argument syntax {statement}, expected <resource>=<value>")
        try:
            result[parts[0]] = canonical_quantity(parts[1])
        except QuantityError as exc:
            raise UsageError(f"{parts[0]}={parts[1]}: {parts[1]!r} is not a quantity") from exc
    return result


def job_from_flags(
    name: str,
    namespace: str,
    image: str,
    min_available: int,
    replicas: int,
    requests: dict[str, str] | None,
    limits: dict[str, str] | None,
    scheduler: str,
) -> MutableObj:
    """The Job vcctl's constructLaunchJobFlagsJob builds (pkg/cli/job/run.go), as its JSON (empty fields left out
    as Go's omitempty leaves them out)."""
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    container: dict[str, Any] = {"name": name, "imagePullPolicy": "IfNotPresent", "resources": resources}
    if image:
        container["image"] = image
    meta: dict[str, Any] = {"labels": {TEMPLATE_LABEL: name}}
    if name:
        meta["name"] = name
    task: dict[str, Any] = {
        "template": {"metadata": meta, "spec": {"containers": [container], "restartPolicy": "Never"}}
    }
    if replicas:
        task["replicas"] = replicas
    spec: dict[str, Any] = {"tasks": [task]}
    if min_available:
        spec["minAvailable"] = min_available
    if scheduler:
        spec["schedulerName"] = scheduler
    job_meta: dict[str, Any] = {"namespace": namespace}
    if name:
        job_meta["name"] = name
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": job_meta, "spec": spec}


def job_from_file(path: str) -> MutableObj:
    """The Job of a YAML file, as vcctl reads it (readFile): a `.yaml`/`.yml` name, the first document, the kind
    set by the client, quantities in canonical form."""
    if ".yaml" not in path and ".yml" not in path:
        raise UsageError("only support yaml file")
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UsageError(f"failed to read file, err: {exc}") from exc
    try:
        doc = next(iter(yaml.safe_load_all(text)), None)
    except yaml.YAMLError as exc:
        raise UsageError(f"failed to unmarshal file, err: {exc}") from exc
    if not isinstance(doc, dict):
        raise UsageError(f"failed to unmarshal file, err: {path} holds no Job")
    job = copy.deepcopy(doc)
    job["apiVersion"], job["kind"] = "batch.volcano.sh/v1alpha1", "Job"
    for task in (job.get("spec") or {}).get("tasks") or ():
        _canonical_resources(((task or {}).get("template") or {}).get("spec") or {})
    return job


def _canonical_resources(pod_spec: MutableObj) -> None:
    """A Go client parses every quantity of a pod template and sends it back in canonical form."""
    for key in ("containers", "initContainers"):
        for container in pod_spec.get(key) or ():
            for kind in ("limits", "requests"):
                values = ((container or {}).get("resources") or {}).get(kind)
                if isinstance(values, dict):
                    values.update({k: _canonical(v) for k, v in values.items()})
    if isinstance(pod_spec.get("overhead"), dict):
        pod_spec["overhead"] = {k: _canonical(v) for k, v in pod_spec["overhead"].items()}


def _canonical(value: object) -> object:
    try:
        return canonical_quantity(str(value)) if isinstance(value, str | int) else value
    except QuantityError as exc:
        raise UsageError(f"failed to unmarshal file, err: quantity {value!r}: {exc}") from exc


# ---- list (pure) --------------------------------------------------------------------------------------------

LIST_HEADER = (
    "Name",
    "Creation",
    "Phase",
    "JobType",
    "Replicas",
    "Min",
    "Pending",
    "Running",
    "Succeeded",
    "Failed",
    "Unknown",
    "RetryCount",
)
LIST_WIDTHS = (15, 12, 12, 12, 6, 10, 10, 12, 10, 12, 10)  # after Name: pkg/cli/job/list.go PrintJobs


def list_table(jobs: Sequence[MutableObj], all_namespaces: bool) -> str:
    """vcctl's `job list` table: Name as wide as the longest name + 3, then fixed widths; with
    `--all-namespaces` a Namespace column first, as wide as the longest namespace + 3."""
    name_width = max([len("Name"), *(len(str(_meta(j).get("name", ""))) for j in jobs)]) + 3
    ns_width = max([len("Namespace"), *(len(str(_meta(j).get("namespace", ""))) for j in jobs)]) + 3
    widths = (name_width, *LIST_WIDTHS)
    lines = [_row(LIST_HEADER, widths, all_namespaces and ("Namespace", ns_width))]
    for job in jobs:
        meta, status = _meta(job), job.get("status") or {}
        replicas = sum(go_int((t or {}).get("replicas")) for t in (job.get("spec") or {}).get("tasks") or ())
        cells = (
            meta.get("name", ""),
            local_date(meta.get("creationTimestamp")),
            (status.get("state") or {}).get("phase") or "",
            (meta.get("labels") or {}).get(JOB_TYPE_LABEL) or "Batch",
            replicas,
            *(
                go_int(status.get(k))
                for k in ("minAvailable", "pending", "running", "succeeded", "failed", "unknown", "retryCount")
            ),
        )
        lines.append(_row(cells, widths, all_namespaces and (meta.get("namespace", ""), ns_width)))
    return "".join(lines)


def _row(cells: Sequence[object], widths: Sequence[int], namespace: object) -> str:
    first = pad(namespace[0], namespace[1]) if isinstance(namespace, tuple) else ""
    return first + "".join(pad(c, w) for c, w in zip(cells, widths, strict=True)) + "\n"


def _meta(obj: MutableObj) -> MutableObj:
    return obj.get("metadata") or {}


def select(jobs: Sequence[MutableObj], queue: str, scheduler: str, selector: str) -> list[MutableObj]:
    """vcctl's filters: the queue and the scheduler name exactly, `--selector` as a substring of the name."""
    spec = [(j, j.get("spec") or {}) for j in jobs]
    return [
        j
        for j, s in spec
        if (not queue or s.get("queue", "") == queue)
        and (not scheduler or s.get("schedulerName", "") == scheduler)
        and (not selector or selector in str(_meta(j).get("name", "")))
    ]


# ---- commands (I/O) -------------------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    if not args.name and not args.filename:
        raise UsageError("job name cannot be left blank")
    requests, limits = resource_list(args.requests), resource_list(args.limits)
    job = (
        job_from_file(args.filename)
        if args.filename
        else job_from_flags(
            args.name, args.namespace, args.image, args.min, args.replicas, requests, limits, args.scheduler
        )
    )
    client = connect.client(args)
    created = client.create(f"{JOBS}/namespaces/{args.namespace}/jobs", job)
    name = str(_meta(created).get("name", ""))
    print(f"run job {name} successfully")
    scheduler = (created.get("spec") or {}).get("schedulerName")
    if scheduler:
        warning = unclaimed_warning(str(scheduler), claims(client), f"{args.namespace}/{name}")
        if warning is not None:
            print(warning, file=sys.stderr)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    everywhere = args.all_namespaces
    client = connect.client(args)
    path = f"{JOBS}/jobs" if everywhere else f"{JOBS}/namespaces/{args.namespace}/jobs"
    listed = client.listing(path, args.label_selector)
    jobs = select(listed.items, args.queue, args.scheduler, args.selector)
    if is_object_format(args.output):
        print_objects(jobs, args.output, JOB_RESOURCE)
    elif not jobs and not args.watch:
        print(NO_RESOURCES)
    elif args.output == "wide":
        print(job_table(jobs, time.time(), everywhere))
    else:
        sys.stdout.write(list_table(jobs, everywhere))
    if args.watch:
        def row(job: MutableObj) -> str:
            if not select([job], args.queue, args.scheduler, args.selector):
                return ""
            if is_object_format(args.output):
                return render_objects(job, args.output, JOB_RESOURCE)
            if args.output == "wide":
                return job_table([job], time.time(), everywhere).split("\n", 1)[1] + "\n"
            return list_table([job], everywhere).split("\n", 1)[1]

        watch(client, path, args.label_selector, listed.resource_version, row)
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    name = name_of(args, "job name (specified by --name or -N) is mandatory to view a particular job")
    client = connect.client(args)
    job = client.kube.request("GET", f"{JOBS}/namespaces/{args.namespace}/jobs/{name}")
    if is_object_format(args.output):
        print_objects(job, args.output, JOB_RESOURCE)
        return 0
    events = [e for e in client.events(args.namespace) if str(_meta(e).get("name", "")).startswith(f"{name}.")]
    sys.stdout.write(render_job(job, events, time.time()))
    return 0


def _command(action: str, verb: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        name = name_of(args, f"job name is mandatory to {verb} a particular job")
        client = connect.client(args)
        job = client.kube.request("GET", f"{JOBS}/namespaces/{args.namespace}/jobs/{name}")
        command = client.command(
            args.namespace, {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", **job}, action
        )
        # vcctl prints nothing; the Command's name goes to stderr, where a script reading stdout will not see it
        print(f"job {args.namespace}/{name}: Command {_meta(command).get('name')} ({action}) created", file=sys.stderr)
        return 0

    return run


def cmd_delete(args: argparse.Namespace) -> int:
    name = name_of(args, "job name is mandatory to delete a particular job")
    connect.client(args).kube.request(
        "DELETE", f"{JOBS}/namespaces/{args.namespace}/jobs/{name}", body={"propagationPolicy": "Background"}
    )
    print(f"delete job {name} successfully")
    return 0


# ---- argparse ---------------------------------------------------------------------------------------------


def add_parsers(sub: Any) -> None:
    job = sub.add_parser("job", help="run, list, view, suspend, resume or delete Volcano Jobs (vcctl job)",
                         description="Day-two commands for Volcano Jobs (batch.volcano.sh/v1alpha1), with vcctl "
                         "job's flags and tables: run one from flags or a YAML file, list, view, suspend, resume, "
                         "delete.")
    jobs = job.add_subparsers(dest="job_command", required=True)

    run = jobs.add_parser("run", help="run job by parameters from the command line",
                          description="Create a Volcano Job from flags (one task of --replicas pods, at least "
                          "--min of them together) or from a YAML file (-f). It names volcano-py's scheduler unless "
                          "-S says otherwise, and warns when no scheduler in the cluster claims that name.")
    common(run)
    run.add_argument("-N", "--name", default="", help="the name of job")
    run.add_argument("-i", "--image", default="busybox", help="the container image of job (default busybox)")
    run.add_argument("-m", "--min", type=int, default=1, help="the minimal available tasks of job (default 1)")
    run.add_argument("-r", "--replicas", type=int, default=1, help="the total tasks of job (default 1)")
    run.add_argument(
        "-R",
        "--requests",
        default="cpu=1000m,memory=100Mi",
        help="the resource request of the task (default cpu=1000m,memory=100Mi)",
    )
    run.add_argument(
        "-L",
        "--limits",
        default="cpu=1000m,memory=100Mi",
        help="the resource limit of the task (default cpu=1000m,memory=100Mi)",
    )
    run.add_argument(
        "-S",
        "--scheduler",
        default=VOLCANO_PY_DEFAULT,
        help="the scheduler for this job (default volcano-py, the name volcano-py's scheduler claims; vcctl's "
        "default is volcano, Volcano's scheduler)",
    )
    run.add_argument("-f", "--filename", default="", help="the yaml file of job")
    run.set_defaults(func=reporting(cmd_run))

    lst = jobs.add_parser("list", help="list job information",
                          description="List the Volcano Jobs of a namespace (-A: of all) in vcctl's table; -o for "
                          "kubectl's formats, -l to select by label, --watch to follow changes.")
    common(lst, output=("json", "yaml", "wide"))
    all_namespaces(lst, "jobs")
    lst.add_argument("-q", "--queue", default="", help="list job with specified queue name")
    lst.add_argument("-S", "--scheduler", default="", help="list job with specified scheduler name")
    lst.add_argument("--selector", default="", help="fuzzy matching jobName (vcctl's: a part of the name; for "
                     "labels use -l)")
    label_selector(lst)
    watch_flag(lst)
    lst.set_defaults(func=reporting(cmd_list))

    view = jobs.add_parser("view", help="show job information")
    common(view, output=("json", "yaml"))
    positional_or_flag(view, ("-N", "--name"), "the name of job")
    view.set_defaults(func=reporting(cmd_view))

    for name, action, verb, help_ in (
        ("suspend", "AbortJob", "suspend", "abort a job (AbortJob Command)"),
        ("resume", "ResumeJob", "resume", "resume a job (ResumeJob Command)"),
    ):
        p = jobs.add_parser(name, help=help_)
        common(p)
        positional_or_flag(p, ("-N", "--name"), "the name of job")
        p.set_defaults(func=reporting(_command(action, verb)))

    delete = jobs.add_parser("delete", help="delete a job (its pods and PodGroup go with it)")
    common(delete)
    positional_or_flag(delete, ("-N", "--name"), "the name of job")
    delete.set_defaults(func=reporting(cmd_delete))
