"""Layer `ctl`: `volcano-py queue create|delete|operate|get|list` (and `open|close`), as `vcctl queue ...`
(pkg/cli/queue).

In the queue commands `-n` is the queue's name (`--name`), as in vcctl: Queues have no namespace. The table's
Inqueue ... Completed are counted from the PodGroups whose `spec.queue` is the queue, by phase, as vcctl counts
them (pkg/cli/podgroup/podgroup.go), not read from the Queue's status. volcano-py adds `-o json|yaml|wide`
(wide: the GPUs allocated, deserved and capability), the name as a positional argument, and `open` / `close`
for `operate -a open|close`. When a listed Queue carries a usage history (time-based fair share: the annotation
`volcano-py.io/usage` the scheduler writes, api/usage.py), `list` and `get` print a second table below
vcctl's: the usage decayed to now, per resource in resource-hours, and the usage fraction it yields.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.api.field_parsers import BadValueError
from scheduler.api.objects import MutableObj
from scheduler.api.usage import USAGE_ANNOTATION, parse_usage
from scheduler.cli.ctl import connect
from scheduler.cli.ctl.client import QUEUE_COMMAND_NAMESPACE, SCHEDULING, Client
from scheduler.cli.ctl.connect import (
    UsageError,
    common,
    label_selector,
    name_of,
    positional_or_flag,
    reporting,
    watch_flag,
)
from scheduler.cli.ctl.gofmt import go_int, pad
from scheduler.cli.ctl.output import is_object_format, print_objects, render_objects
from scheduler.cli.ctl.tables import queue_table
from scheduler.cli.ctl.watching import watch
from scheduler.durations import format_duration

HEADER = ("Name", "Weight", "State", "Parent", "Inqueue", "Pending", "Running", "Unknown", "Completed")
WIDTHS = (25, 8, 8, 8, 8, 8, 8, 8, 8)  # pkg/cli/queue/list.go PrintQueues: %-25s then %-8s each
PHASES = ("Inqueue", "Pending", "Running", "Unknown", "Completed")
ACTIONS = {"open": "OpenQueue", "close": "CloseQueue"}
NO_RESOURCES = "No resources found"
QUEUE_RESOURCE = "queue.scheduling.volcano.sh"


# ---- pure -------------------------------------------------------------------------------------------------


def podgroup_counts(podgroups: Sequence[MutableObj]) -> dict[str, Counter[str]]:
    """PodGroups per queue (their `spec.queue` as written: one without a queue counts for none) and phase."""
    counts: dict[str, Counter[str]] = {}
    for pg in podgroups:
        queue = str((pg.get("spec") or {}).get("queue") or "")
        phase = str((pg.get("status") or {}).get("phase") or "")
        if phase in PHASES:
            counts.setdefault(queue, Counter())[phase] += 1
    return counts


def queue_table_vc(queues: Sequence[MutableObj], counts: Mapping[str, Counter[str]]) -> str:
    lines = ["".join(pad(h, w) for h, w in zip(HEADER, WIDTHS, strict=True)) + "\n"]
    for queue in queues:
        meta, spec, status = queue.get("metadata") or {}, queue.get("spec") or {}, queue.get("status") or {}
        name = str(meta.get("name", ""))
        seen = counts.get(name, Counter())
        cells = (
            name,
            go_int(spec.get("weight")),
            status.get("state", ""),
            spec.get("parent", ""),
            *(seen[p] for p in PHASES),
        )
        lines.append("".join(pad(c, w) for c, w in zip(cells, WIDTHS, strict=True)) + "\n")
    return "".join(lines)


USAGE_HEADER = ("NAME", "USAGE-SHARE", "USED (decayed resource-hours)", "HALF-LIFE", "WINDOW", "RECORDED")


def usage_rows(queues: Sequence[MutableObj], now: float) -> list[tuple[str, ...]]:
    """One row per queue that carries a usage record, decayed to `now`; an unreadable one says why."""
    rows: list[tuple[str, ...]] = []
    for queue in queues:
        meta = queue.get("metadata") or {}
        raw = (meta.get("annotations") or {}).get(USAGE_ANNOTATION)
        if raw is None:
            continue
        name = str(meta.get("name", ""))
        try:
            record = parse_usage(raw)
        except BadValueError as bad:
            rows.append((name, "-", f"unreadable ({bad}): the scheduler starts it from zero", "-", "-", "-"))
            continue
        seen = record.decayed_to(now)
        used = ", ".join(f"{res}={amount / 3600:.4g}" for res, amount in sorted(seen.used.items())) or "-"
        age = format_duration(max(0.0, now - record.at))
        rows.append((name, f"{seen.share:.3f}", used, format_duration(record.half_life),
                     format_duration(record.window), f"{age} ago"))
    return rows


def usage_table(queues: Sequence[MutableObj], now: float) -> str:
    """The usage table below the queue table ("" when no queue carries a usage record)."""
    rows = usage_rows(queues, now)
    if not rows:
        return ""
    widths = [max(len(row[i]) for row in (USAGE_HEADER, *rows)) for i in range(len(USAGE_HEADER))]
    lines = ["   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in (USAGE_HEADER, *rows)]
    return "\nUsage history (time-based fair share; decayed to now):\n" + "\n".join(lines) + "\n"


def new_queue(name: str, weight: int, state: str) -> MutableObj:
    """The Queue `vcctl queue create` sends (pkg/cli/queue/create.go). Its `status.state` is what vcctl sends
    too; the apiserver drops it (status is a subresource), so the queue starts as the controllers open it."""
    body: MutableObj = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {},
    }
    if weight:
        body["spec"]["weight"] = weight
    if state:
        body["status"] = {"state": state}
    return body


def weight_patch(name: str, action: str, weight: int) -> MutableObj | None:
    """What `operate` sends for `action`: a merge patch of the weight for update, None for open/close (they
    are Commands); vcctl's checks and their order (pkg/cli/queue/operate.go)."""
    if action == "update":
        if weight == 0:
            raise UsageError(f"when update queue {name}, weight must be specified, the value must be greater than 0")
        return {"spec": {"weight": weight}}
    if action == "":
        raise UsageError("action can not be null")
    if action not in ACTIONS:
        raise UsageError(f"action {action} invalid, valid actions are open, close and update")
    return None


def int32(text: str) -> int:
    """pflag's Int32 flag."""
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid argument {text!r}: expected a 32-bit integer") from None
    if not -(2**31) <= value < 2**31:
        raise argparse.ArgumentTypeError(f"invalid argument {text!r}: value out of range")
    return value


# ---- commands (I/O) ---------------------------------------------------------------------------------------


def _queue_name(args: argparse.Namespace, message: str = "queue name must be specified") -> str:
    return name_of(args, message)


def cmd_create(args: argparse.Namespace) -> int:
    connect.client(args).create(
        f"{SCHEDULING}/queues", new_queue(args.name or args.target or "test", args.weight, args.state)
    )
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    name = _queue_name(args)
    connect.client(args).kube.request("DELETE", f"{SCHEDULING}/queues/{name}")
    return 0


def operate(args: argparse.Namespace, action: str) -> int:
    name = _queue_name(args)
    patch = weight_patch(name, action, args.weight)
    client = connect.client(args)
    if patch is not None:
        client.merge_patch(f"{SCHEDULING}/queues/{name}", patch)
        return 0
    queue = client.kube.request("GET", f"{SCHEDULING}/queues/{name}")
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", **queue}
    command = client.command(QUEUE_COMMAND_NAMESPACE, queue, ACTIONS[action])
    print(
        f"queue {name}: Command {QUEUE_COMMAND_NAMESPACE}/{(command.get('metadata') or {}).get('name')} "
        f"({ACTIONS[action]}) created",
        file=sys.stderr,
    )  # vcctl prints nothing on stdout
    return 0


def cmd_operate(args: argparse.Namespace) -> int:
    return operate(args, args.action)


def _operate_as(action: str, args: argparse.Namespace) -> int:
    return operate(args, action)


def cmd_get(args: argparse.Namespace) -> int:
    name = _queue_name(args, "name is mandatory to get the particular queue details")
    client = connect.client(args)
    queue = client.kube.request("GET", f"{SCHEDULING}/queues/{name}")
    return _show([queue], client, args.output)


def cmd_list(args: argparse.Namespace) -> int:
    client = connect.client(args)
    path = f"{SCHEDULING}/queues"
    listed = client.listing(path, args.label_selector)
    if not listed.items and not is_object_format(args.output):
        print(NO_RESOURCES)
    else:
        _show(listed.items, client, args.output, listing=True)
    if args.watch:
        def row(queue: MutableObj) -> str:
            if is_object_format(args.output):
                return render_objects(queue, args.output, QUEUE_RESOURCE)
            if args.output == "wide":
                return queue_table([queue], time.time()).split("\n", 1)[1] + "\n"
            return queue_table_vc([queue], podgroup_counts(client.podgroups())).split("\n", 1)[1]

        watch(client, path, args.label_selector, listed.resource_version, row)
    return 0


def _show(queues: list[MutableObj], client: Client, output: str | None, listing: bool = False) -> int:
    if is_object_format(output):
        assert output is not None
        print_objects(queues if listing else queues[0], output, QUEUE_RESOURCE)
    elif output == "wide":
        print(queue_table(queues, time.time()))
    else:
        sys.stdout.write(queue_table_vc(queues, podgroup_counts(client.podgroups())))
    if not is_object_format(output):
        sys.stdout.write(usage_table(queues, time.time()))
    return 0


# ---- argparse ---------------------------------------------------------------------------------------------


def add_parsers(sub: Any) -> None:
    queue = sub.add_parser("queue", help="create, delete, operate, get or list Queues (vcctl queue)",
                           description="Day-two commands for Queues (scheduling.volcano.sh/v1beta1), with vcctl "
                           "queue's flags and tables: create, delete, open or close, change the weight, get, list. "
                           "Here -n is the queue's name: Queues have no namespace.")
    queues = queue.add_subparsers(dest="queue_command", required=True)

    create = queues.add_parser("create", help="creates queue")
    common(create, namespace=False)
    create.add_argument("target", nargs="?", metavar="NAME", help="the name of queue (or -n)")
    create.add_argument("-n", "--name", default="", help="the name of queue (default test, as vcctl)")
    create.add_argument("-w", "--weight", type=int32, default=1, help="the weight of the queue (default 1)")
    create.add_argument("-S", "--state", default="Open", help="the state of queue (default Open)")
    create.set_defaults(func=reporting(cmd_create))

    delete = queues.add_parser("delete", help="delete queue")
    common(delete, namespace=False)
    positional_or_flag(delete, ("-n", "--name"), "the name of queue")
    delete.set_defaults(func=reporting(cmd_delete))

    op = queues.add_parser("operate", help="operate queue: open, close, or update its weight")
    common(op, namespace=False)
    positional_or_flag(op, ("-n", "--name"), "the name of queue")
    op.add_argument("-w", "--weight", type=int32, default=0, help="the weight of the queue (for update)")
    op.add_argument("-a", "--action", default="", help="operate action to queue, valid actions are open, close, update")
    op.set_defaults(func=reporting(cmd_operate))

    for verb in ("list", "get"):
        p = queues.add_parser(verb, help="lists all the queue" if verb == "list" else "get a queue")
        common(p, namespace=False, output=("json", "yaml", "wide"))
        if verb == "get":
            positional_or_flag(p, ("-n", "--name"), "the name of queue")
        else:
            label_selector(p)
            watch_flag(p)
        p.set_defaults(func=reporting(cmd_get if verb == "get" else cmd_list))

    for action in ACTIONS:
        p = queues.add_parser(action, help=f"{action} a queue (operate -a {action}: a {ACTIONS[action]} Command)")
        common(p, namespace=False)
        positional_or_flag(p, ("-n", "--name"), "the name of queue")
        p.set_defaults(func=reporting(functools.partial(_operate_as, action)), weight=0)
