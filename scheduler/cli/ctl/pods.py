"""Layer `ctl`: `volcano-py pod list`, as `vcctl pod list` (pkg/cli/pod/pod.go): the pods of Volcano Jobs (label
`volcano.sh/job-name`), of one job (`-j`), or of one queue (`-q`: Job pods by their `volcano.sh/queue-name` label
and any other pod by its `scheduling.volcano.sh/queue-name` annotation), sorted by namespace and name.

The STATUS, READY and RESTARTS cells follow kubectl's pod printer, which vcctl copies (kubernetes
pkg/printers/internalversion/printers.go printPod); each column is as wide as its widest cell + 8, or its
header + 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from scheduler.api.objects import MutableObj
from scheduler.cli.ctl import connect
from scheduler.cli.ctl.client import CORE
from scheduler.cli.ctl.connect import UsageError, all_namespaces, common, label_selector, reporting, watch_flag
from scheduler.cli.ctl.gofmt import go_int, parse_time, since
from scheduler.cli.ctl.output import is_object_format, print_objects, render_objects
from scheduler.cli.ctl.watching import watch
from scheduler.jobs import keys

QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"  # schedulingv1beta1.QueueNameAnnotationKey
NODE_UNREACHABLE = "NodeLost"  # k8s.io/kubernetes/pkg/util/node.NodeUnreachablePodReason
COLUMN_SPACING, HEADER_SPACING = 8, 2
NO_RESOURCES = "No resources found"


# ---- selection (pure) --------------------------------------------------------------------------------------


def in_queue(pods: Sequence[MutableObj], queue: str) -> list[MutableObj]:
    """Job pods labelled with the queue, then other pods annotated with it, each pod once."""

    def meta(p: MutableObj, field: str) -> MutableObj:
        return (p.get("metadata") or {}).get(field) or {}

    chosen = [p for p in pods if meta(p, "labels").get(keys.QUEUE_NAME) == queue]
    seen = {_key(p) for p in chosen}
    chosen += [p for p in pods if meta(p, "annotations").get(QUEUE_ANNOTATION) == queue and _key(p) not in seen]
    return chosen


def job_matches_queue(pods: Sequence[MutableObj], queue: str) -> bool:
    """vcctl's matchPodsLabel: no pod of the job is labelled with another queue."""
    return all(((p.get("metadata") or {}).get("labels") or {}).get(keys.QUEUE_NAME, queue) == queue for p in pods)


def _key(pod: MutableObj) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


# ---- cells (pure) ---------------------------------------------------------------------------------------------


def pod_cells(pod: MutableObj, now: float) -> tuple[str, str, str, str, str, str]:
    """(namespace, name, ready, status, restarts, age) as kubectl prints them."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    total = len(spec.get("containers") or ())
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or ()}
    total += sum(1 for c in init_specs.values() if _restartable(c))
    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or phase)
    if any(
        c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated" for c in status.get("conditions") or ()
    ):
        reason = "SchedulingGated"

    ready = restarts = restartable_restarts = 0
    last_restart = last_restartable = None
    initializing = False
    init_statuses = status.get("initContainerStatuses") or ()
    for i, container in enumerate(init_statuses):
        restarts += go_int(container.get("restartCount"))
        finished = _finished(container)
        last_restart = _later(last_restart, finished)
        restartable = _restartable(init_specs.get(container.get("name")))
        if restartable:
            restartable_restarts += go_int(container.get("restartCount"))
            last_restartable = _later(last_restartable, finished)
        state = container.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and go_int(terminated.get("exitCode")) == 0:
            continue
        if restartable and container.get("started"):
            ready += 1 if container.get("ready") else 0
            continue
        if terminated is not None:
            if terminated.get("reason"):
                reason = f"Init:{terminated['reason']}"
            elif go_int(terminated.get("signal")):
                reason = f"Init:Signal:{go_int(terminated['signal'])}"
            else:
                reason = f"Init:ExitCode:{go_int(terminated.get('exitCode'))}"
        elif waiting is not None and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{i}/{len(spec.get('initContainers') or ())}"
        initializing = True
        break

    if not initializing or _condition_true(status, "Initialized"):
        restarts, last_restart = restartable_restarts, last_restartable
        running = False
        for container in reversed(status.get("containerStatuses") or ()):
            restarts += go_int(container.get("restartCount"))
            last_restart = _later(last_restart, _finished(container))
            state = container.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = str(waiting["reason"])
            elif terminated is not None and terminated.get("reason"):
                reason = str(terminated["reason"])
            elif terminated is not None:
                signal = go_int(terminated.get("signal"))
                reason = f"Signal:{signal}" if signal else f"ExitCode:{go_int(terminated.get('exitCode'))}"
            elif container.get("ready") and state.get("running") is not None:
                running = True
                ready += 1
        if reason == "Completed" and running:
            reason = "Running" if _condition_true(status, "Ready") else "NotReady"

    if meta.get("deletionTimestamp") and status.get("reason") == NODE_UNREACHABLE:
        reason = "Unknown"
    elif meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"

    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        restarts_text = f"{restarts} ({since(last_restart, now, apimachinery=True)} ago)"
    return (
        str(meta.get("namespace", "")),
        str(meta.get("name", "")),
        f"{ready}/{total}",
        reason,
        restarts_text,
        since(meta.get("creationTimestamp"), now, apimachinery=True),
    )


def _restartable(container: MutableObj | None) -> bool:
    return container is not None and container.get("restartPolicy") == "Always"


def _finished(container: MutableObj) -> str | None:
    terminated = (container.get("lastState") or {}).get("terminated")
    return (terminated or {}).get("finishedAt") if terminated is not None else None


def _later(current: str | None, candidate: str | None) -> str | None:
    """The later of two timestamps (metav1.Time.Before): an unset candidate never wins."""
    new = parse_time(candidate)
    if new is None:
        return current
    old = parse_time(current)
    return candidate if old is None or old < new else current


def _condition_true(status: MutableObj, kind: str) -> bool:
    for condition in status.get("conditions") or ():
        if condition.get("type") == kind:
            return bool(condition.get("status") == "True")
    return False


def pod_table(pods: Sequence[MutableObj], now: float, with_namespace: bool) -> str:
    first = 0 if with_namespace else 1
    header = ("Namespace", "Name", "Ready", "Status", "Restart", "Age")[first:]
    rows = [pod_cells(p, now)[first:] for p in sorted(pods, key=_key)]
    widths = [max([len(h) + HEADER_SPACING, *(len(r[i]) + COLUMN_SPACING for r in rows)]) for i, h in enumerate(header)]
    return "".join("".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + "\n" for row in [header, *rows])


# ---- command (I/O) --------------------------------------------------------------------------------------------


def _selector(args: argparse.Namespace) -> str | None:
    """What the apiserver selects: the job's pods (`-j`), else every Job pod unless `-q` looks at all pods; and
    `-l` on top."""
    base = f"{keys.JOB_NAME} in ({args.job})" if args.job else None if args.queue else keys.JOB_NAME
    return ",".join(s for s in (base, args.label_selector) if s) or None


def cmd_list(args: argparse.Namespace) -> int:
    client = connect.client(args)
    namespace = None if args.all_namespaces else args.namespace
    path = f"{CORE}/namespaces/{namespace}/pods" if namespace else f"{CORE}/pods"
    listed = client.listing(path, _selector(args))
    pods = listed.items
    if args.job:
        if args.queue and not job_matches_queue(pods, args.queue):
            raise UsageError(f"the input vcjob {args.job} does not match the queue {args.queue}")
    elif args.queue:
        pods = in_queue(pods, args.queue)
    if is_object_format(args.output):
        print_objects(sorted(pods, key=_key), args.output, "pod")
    elif not pods and not args.watch:
        print(NO_RESOURCES)
    else:
        sys.stdout.write(pod_table(pods, time.time(), args.all_namespaces))
    if args.watch:
        def row(pod: MutableObj) -> str:
            if args.queue and not args.job and not in_queue([pod], args.queue):
                return ""
            if is_object_format(args.output):
                return render_objects(pod, args.output, "pod")
            return pod_table([pod], time.time(), args.all_namespaces).split("\n", 1)[1]

        watch(client, path, _selector(args), listed.resource_version, row)
    return 0


def add_parsers(sub: Any) -> None:
    pod = sub.add_parser("pod", help="list the pods of Volcano Jobs (vcctl pod)",
                         description="List the pods of Volcano Jobs (all, one job's with -j, or one queue's with "
                         "-q) in kubectl's pod columns, as vcctl pod list.")
    pods = pod.add_subparsers(dest="pod_command", required=True)
    lst = pods.add_parser("list", help="list pod information created by vcjob")
    common(lst, output=("json", "yaml"))
    all_namespaces(lst, "pods")
    lst.add_argument("-j", "--job", default="", help="list pod with specified job name")
    lst.add_argument("-q", "--queue", default="", help="list pod with specified queue name")
    label_selector(lst)
    watch_flag(lst)
    lst.set_defaults(func=reporting(cmd_list))
