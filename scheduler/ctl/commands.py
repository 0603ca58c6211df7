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
from collections.abc import Callable
from typing import Any

from scheduler.ctl import connect
from scheduler.ctl.client import QUEUE_COMMAND_NAMESPACE, NotFound
from scheduler.ctl.connect import NoCluster
from scheduler.ctl.explain import explain, render, to_dict
from scheduler.ctl.tables import dump, job_table, queue_table

__all__ = ["NoCluster", "add_parsers", "dump", "job_table", "queue_table"]

# ---- commands (I/O) ---------------------------------------------------------------------------------------

_client = connect.client
_reporting = connect.reporting


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

