"""Layer `ctl`: `volcano-py explain`, and the vcctl commands under `volcano-py` (`job`, `queue`, `pod`, `jobflow`,
`jobtemplate`: their own modules).

explain prints a screen, or `-o json|yaml`; it reads the objects the scheduler and controllers publish.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from scheduler.cli.ctl import connect, flows, jobs, pods, queues
from scheduler.cli.ctl.client import NotFoundError
from scheduler.cli.ctl.connect import NoClusterError, common, reporting
from scheduler.cli.ctl.explain import explain, render, to_dict
from scheduler.cli.ctl.output import is_object_format, print_objects
from scheduler.cli.ctl.tables import dump, job_table, queue_table

__all__ = ["NoClusterError", "add_parsers", "dump", "job_table", "queue_table"]


def cmd_explain(args: argparse.Namespace) -> int:
    client = connect.client(args)
    try:
        ex = explain(client.facts(args.namespace, args.name))
    except NotFoundError as exc:
        print(f"volcano-py: error: {exc}", file=sys.stderr)
        return 1
    if args.output == "json":
        print(json.dumps(to_dict(ex), indent=2))
    elif args.output == "name":
        print(ex.target.replace(" ", "/", 1))  # job/ns/name, podgroup/ns/name or pod/ns/name
    elif is_object_format(args.output):
        print_objects(to_dict(ex), args.output, "explain")
    else:
        print(render(ex))
    return 0


def cmd_version(args: argparse.Namespace) -> int:
    from importlib.metadata import PackageNotFoundError, version

    try:
        print(f"volcano-py {version('volcano-py')}")
    except PackageNotFoundError:  # a checkout that was never installed
        print("volcano-py (not installed)")
    return 0


def add_parsers(sub: Any) -> None:
    """`explain`, `job`, `queue`, `pod`, `jobflow`, `jobtemplate` and `version` under the `volcano-py` command."""
    ex = sub.add_parser("explain", help="why a Volcano Job, PodGroup or pod is waiting, and what would unblock it",
                        description="Say why a Volcano Job, PodGroup or pod is waiting (the gate that holds it, "
                        "with its numbers: the queue's share, the free resources, the gang's size) and what would "
                        "unblock it, from what the scheduler publishes on the PodGroup and its events.")
    ex.add_argument("name", help="a Volcano Job, a PodGroup or a pod")
    common(ex, output=("json", "yaml"))
    ex.set_defaults(func=reporting(cmd_explain))
    jobs.add_parsers(sub)
    queues.add_parsers(sub)
    pods.add_parsers(sub)
    flows.add_parsers(sub)
    sub.add_parser("version", help="print the version (vcctl version)").set_defaults(func=cmd_version)
