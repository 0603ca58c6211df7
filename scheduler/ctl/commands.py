"""Layer `ctl`: `volcano-py explain`, `volcano-py job list|suspend|resume|delete` and
`volcano-py queue list|get|open|close`.

Tables look like `kubectl get`; `-o json|yaml` prints the objects. suspend/resume/open/close create
bus.volcano.sh Commands (AbortJob, ResumeJob, OpenQueue, CloseQueue) that the controllers carry out, exactly
as `vcctl job suspend/resume` and `vcctl queue operate` do.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import yaml

from scheduler.api.objects import MutableObj
from scheduler.cache.kube import Kube, KubeError
from scheduler.ctl.client import QUEUE_COMMAND_NAMESPACE, Client, NotFound
from scheduler.ctl.explain import explain, render, to_dict

GPU = "nvidia.com/gpu"


# ---- tables (pure) -------------------------------------------------------------------------------------

def age(created: object, now: float) -> str:
    if not isinstance(created, str) or not created:
        return "<unknown>"
    seconds = int(now - datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp())
    if seconds < 120:
        return f"{max(seconds, 0)}s"
    if seconds < 3 * 3600:
        return f"{seconds // 60}m"
    if seconds < 48 * 3600:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [list(map(str, header)), *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)


def job_row(job: MutableObj, now: float, with_namespace: bool) -> list[object]:
    meta, spec, status = job.get("metadata") or {}, job.get("spec") or {}, job.get("status") or {}
    replicas = sum(int(t.get("replicas", 1)) for t in spec.get("tasks") or ())
    row: list[object] = [meta.get("name"), (status.get("state") or {}).get("phase") or "Pending",
                         status.get("minAvailable", spec.get("minAvailable", "-")), replicas,
                         status.get("pending", 0), status.get("running", 0), status.get("succeeded", 0),
                         status.get("failed", 0), spec.get("queue") or "default",
                         age(meta.get("creationTimestamp"), now)]
    return [meta.get("namespace"), *row] if with_namespace else row


JOB_HEADER = ["NAME", "STATUS", "MINAVAILABLE", "REPLICAS", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "QUEUE",
              "AGE"]


def job_table(jobs: Sequence[MutableObj], now: float, with_namespace: bool = False) -> str:
    header = ["NAMESPACE", *JOB_HEADER] if with_namespace else JOB_HEADER
    ordered = sorted(jobs, key=lambda j: (j["metadata"].get("namespace", ""), j["metadata"]["name"]))
    return table(header, [job_row(j, now, with_namespace) for j in ordered])


QUEUE_HEADER = ["NAME", "STATE", "PARENT", "WEIGHT", "INQUEUE", "PENDING", "RUNNING", "GPU-ALLOCATED",
                "GPU-DESERVED", "GPU-CAPABILITY", "AGE"]


def queue_row(queue: MutableObj, now: float) -> list[object]:
    meta, spec, status = queue.get("metadata") or {}, queue.get("spec") or {}, queue.get("status") or {}
    return [meta.get("name"), status.get("state") or spec.get("state") or "Open", spec.get("parent") or "-",
            spec.get("weight", 1),
            status.get("inqueue", 0), status.get("pending", 0), status.get("running", 0),
            (status.get("allocated") or {}).get(GPU, 0), (spec.get("deserved") or {}).get(GPU, "-"),
            (spec.get("capability") or {}).get(GPU, "-"), age(meta.get("creationTimestamp"), now)]


def queue_table(queues: Sequence[MutableObj], now: float) -> str:
    return table(QUEUE_HEADER, [queue_row(q, now) for q in sorted(queues, key=lambda q: q["metadata"]["name"])])


def dump(objects: Sequence[MutableObj] | MutableObj, output: str) -> str:
    if output == "json":
        return json.dumps(objects, indent=2, sort_keys=False)
    if isinstance(objects, Mapping):
        return str(yaml.safe_dump(dict(objects), sort_keys=False)).rstrip()
    return str(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(objects)}, sort_keys=False)).rstrip()


# ---- commands (I/O) ---------------------------------------------------------------------------------------

def _client(args: argparse.Namespace) -> Client:
    from kubernetes import client, config

    cfg = client.Configuration()
    try:
        config.load_kube_config(config_file=args.kubeconfig, client_configuration=cfg)
    except (config.ConfigException, OSError) as exc:
        if args.kubeconfig:
            raise NoCluster(f"kubeconfig {args.kubeconfig}: {exc}") from exc
        try:
            config.load_incluster_config(client_configuration=cfg)
        except config.ConfigException:
            raise NoCluster("no cluster to talk to: no kubeconfig (--kubeconfig, $KUBECONFIG or ~/.kube/config) "
                            "and not running in a pod") from exc
    return Client(Kube(client.ApiClient(cfg), request_timeout=args.request_timeout))


class NoCluster(Exception):
    """Neither a kubeconfig nor an in-cluster service account says where the apiserver is."""


def _unreachable(exc: BaseException) -> str | None:
    """The one line for an apiserver that cannot be reached (refused, no such host, TLS, timeout), else None."""
    from urllib3.exceptions import HTTPError

    if isinstance(exc, HTTPError | ConnectionError | TimeoutError):
        reason = getattr(exc, "reason", None) or exc
        return f"cannot reach the apiserver: {reason}"
    return None


def _reporting(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """An API or connection error is one line on stderr and exit 1; the traceback only with --debug."""
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except (KubeError, NoCluster) as exc:
            if getattr(args, "debug", False):
                raise
            print(f"volcano-py: error: {exc}", file=sys.stderr)
            return 1
        except Exception as exc:
            line = _unreachable(exc)
            if line is None or getattr(args, "debug", False):
                raise
            print(f"volcano-py: error: {line}", file=sys.stderr)
            return 1

    return wrapped


def _namespace(args: argparse.Namespace) -> str:
    return str(args.namespace or "default")


def cmd_explain(args: argparse.Namespace) -> int:
    client = _client(args)
    try:
        ex = explain(client.facts(_namespace(args), args.name))
    except NotFound as exc:
        print(f"volcano-py: error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(to_dict(ex), indent=2) if args.output == "json" else
          dump(to_dict(ex), "yaml") if args.output == "yaml" else render(ex))
    return 0


def cmd_job_list(args: argparse.Namespace) -> int:
    jobs = _client(args).jobs(None if args.all_namespaces else _namespace(args))
    print(dump(jobs, args.output) if args.output else job_table(jobs, time.time(), args.all_namespaces))
    return 0


def _job_command(action: str, done: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        client = _client(args)
        namespace = _namespace(args)
        job = client.job(namespace, args.name)
        if job is None:
            print(f"volcano-py: error: job {namespace}/{args.name} not found", file=sys.stderr)
            return 1
        command = client.command(namespace, job, action)
        print(f"job {namespace}/{args.name} {done} (Command {command['metadata']['name']}: {action})")
        return 0

    return run


def cmd_job_delete(args: argparse.Namespace) -> int:
    namespace = _namespace(args)
    if not _client(args).delete_job(namespace, args.name):
        print(f"volcano-py: error: job {namespace}/{args.name} not found", file=sys.stderr)
        return 1
    print(f"job {namespace}/{args.name} deleted")
    return 0


def cmd_queue_list(args: argparse.Namespace) -> int:
    queues = _client(args).queues()
    print(dump(queues, args.output) if args.output else queue_table(queues, time.time()))
    return 0


def cmd_queue_get(args: argparse.Namespace) -> int:
    queue = _client(args).queue(args.name)
    if queue is None:
        print(f"volcano-py: error: queue {args.name} not found", file=sys.stderr)
        return 1
    print(dump(queue, args.output) if args.output else queue_table([queue], time.time()))
    return 0


def _queue_command(action: str, done: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        client = _client(args)
        queue = client.queue(args.name)
        if queue is None:
            print(f"volcano-py: error: queue {args.name} not found", file=sys.stderr)
            return 1
        queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", **queue}
        command = client.command(QUEUE_COMMAND_NAMESPACE, queue, action)
        print(f"queue {args.name} {done} (Command {QUEUE_COMMAND_NAMESPACE}/{command['metadata']['name']}: "
              f"{action})")
        return 0

    return run


# ---- argparse ----------------------------------------------------------------------------------------------

def _common(p: argparse.ArgumentParser, namespaced: bool = True, output: bool = False) -> None:
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    p.add_argument("--request-timeout", type=float, default=30.0, help="seconds per API request (default 30)")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    if namespaced:
        p.add_argument("-n", "--namespace", default=None, help="namespace (default: default)")
    if output:
        p.add_argument("-o", "--output", choices=("json", "yaml"), default=None, help="print objects, not a table")


def add_parsers(sub: Any) -> None:
    """`explain`, `job` and `queue` under the `volcano-py` command."""
    ex = sub.add_parser("explain", help="why a Volcano Job, PodGroup or pod is waiting, and what would unblock it")
    ex.add_argument("name", help="a Volcano Job, a PodGroup or a pod")
    _common(ex, output=True)
    ex.set_defaults(func=_reporting(cmd_explain))

    job = sub.add_parser("job", help="list, suspend, resume or delete Volcano Jobs")
    jobs = job.add_subparsers(dest="job_command", required=True)
    lst = jobs.add_parser("list", help="list Jobs (like kubectl get vcjob)")
    lst.add_argument("-A", "--all-namespaces", action="store_true")
    _common(lst, output=True)
    lst.set_defaults(func=_reporting(cmd_job_list))
    for name, action, done, help_ in (("suspend", "AbortJob", "suspended", "abort the job's pods (AbortJob)"),
                                      ("resume", "ResumeJob", "resumed", "resume a suspended job (ResumeJob)")):
        p = jobs.add_parser(name, help=help_)
        p.add_argument("name")
        _common(p)
        p.set_defaults(func=_reporting(_job_command(action, done)))
    delete = jobs.add_parser("delete", help="delete a Job (its pods and PodGroup go with it)")
    delete.add_argument("name")
    _common(delete)
    delete.set_defaults(func=_reporting(cmd_job_delete))

    queue = sub.add_parser("queue", help="list, get, open or close Queues")
    queues = queue.add_subparsers(dest="queue_command", required=True)
    lst = queues.add_parser("list", help="Queues with their state, PodGroup counts and GPUs")
    _common(lst, namespaced=False, output=True)
    lst.set_defaults(func=_reporting(cmd_queue_list))
    get = queues.add_parser("get", help="one Queue")
    get.add_argument("name")
    _common(get, namespaced=False, output=True)
    get.set_defaults(func=_reporting(cmd_queue_get))
    for name, action, done in (("open", "OpenQueue", "opening"), ("close", "CloseQueue", "closing")):
        p = queues.add_parser(name, help=f"{name} a queue ({action} Command)")
        p.add_argument("name")
        _common(p, namespaced=False)
        p.set_defaults(func=_reporting(_queue_command(action, done)))

