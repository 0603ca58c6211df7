"""Layer `ctl`: `volcano-py jobflow|jobtemplate create|get|list|delete|describe`, as `vcctl jobflow ...` and
`vcctl jobtemplate ...` (pkg/cli/jobflow, pkg/cli/jobtemplate) on flow.volcano.sh/v1alpha1 objects.

create and `delete -f` take a file of YAML documents and say one line per document (`Created JobFlow: ns/name`,
`Failed to create JobFlow: <the apiserver's message>`), as vcctl does; unlike vcctl, a document that failed makes
the command exit 1 at the end. `get`/`list` print vcctl's tables (each column as wide as its widest cell + 4),
`describe` the objects as YAML (keys sorted, as Go's sigs.k8s.io/yaml writes them) or JSON.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from scheduler.api.objects import MutableObj
from scheduler.cache.kube import KubeError
from scheduler.cli.ctl import connect
from scheduler.cli.ctl.client import FLOW
from scheduler.cli.ctl.connect import (
    UsageError,
    all_namespaces,
    api_message,
    common,
    label_selector,
    reporting,
    watch_flag,
)
from scheduler.cli.ctl.gofmt import since
from scheduler.cli.ctl.output import is_object_format, print_objects, render_objects
from scheduler.cli.ctl.watching import watch

COLUMN_SPACING = 4
NO_RESOURCES = "No resources found"


@dataclass(frozen=True, slots=True)
class Kind:
    command: str  # jobflow
    kind: str  # JobFlow
    plural: str  # jobflows
    words: str  # how vcctl's messages name it: "jobflow", "job template"
    phase: bool  # jobflow tables have Phase and Age; jobtemplate tables have neither

    @property
    def resource(self) -> str:
        """kubectl's name of the kind, for `-o name`."""
        return f"{self.command}.flow.volcano.sh"

    def path(self, namespace: str | None, name: str = "") -> str:
        base = f"{FLOW}/namespaces/{namespace}/{self.plural}" if namespace else f"{FLOW}/{self.plural}"
        return f"{base}/{name}" if name else base


JOBFLOW = Kind("jobflow", "JobFlow", "jobflows", "jobflow", phase=True)
JOBTEMPLATE = Kind("jobtemplate", "JobTemplate", "jobtemplates", "job template", phase=False)


# ---- pure -------------------------------------------------------------------------------------------------


def table(kind: Kind, objects: Sequence[MutableObj], now: float) -> str:
    header = ("Name", "Namespace", "Phase", "Age") if kind.phase else ("Name", "Namespace")
    rows = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        row = [str(meta.get("name", "")), str(meta.get("namespace", ""))]
        if kind.phase:
            row += [
                str(((obj.get("status") or {}).get("state") or {}).get("phase") or ""),
                since(meta.get("creationTimestamp"), now, apimachinery=True),
            ]
        rows.append(row)
    widths = [max(len(h), *(len(r[i]) for r in rows)) + COLUMN_SPACING for i, h in enumerate(header)]
    return "".join("".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + "\n" for row in [header, *rows])


def documents(kind: Kind, text: str) -> list[MutableObj]:
    """The objects of a YAML stream, typed as `kind` (the client sets it) and in `default` when they name no
    namespace, as vcctl's create and delete read them."""
    objects = []
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise UsageError(f"error converting YAML to JSON: {exc}") from exc
    for doc in docs:
        if not isinstance(doc, dict):
            raise UsageError(f"error unmarshaling JSON: a {kind.kind} is a mapping, got {type(doc).__name__}")
        obj = {**doc, "apiVersion": "flow.volcano.sh/v1alpha1", "kind": kind.kind}
        obj["metadata"] = {**(doc.get("metadata") or {})}
        obj["metadata"].setdefault("namespace", "default")
        if not obj["metadata"]["namespace"]:
            obj["metadata"]["namespace"] = "default"
        objects.append(obj)
    return objects


def describe_text(kind: Kind, obj: MutableObj, output: str) -> str:
    """One object as `describe` prints it: managedFields removed, apiVersion and kind set."""
    shown = {
        "kind": kind.kind,
        "apiVersion": "flow.volcano.sh/v1alpha1",
        **{k: v for k, v in obj.items() if k not in ("kind", "apiVersion")},
    }
    shown["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    if output == "json":
        return json.dumps(shown, indent=2, ensure_ascii=False) + "\n"
    return str(yaml.safe_dump(shown, sort_keys=True, default_flow_style=False, allow_unicode=True))


# ---- commands (I/O) ---------------------------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise UsageError(f"open {path}: {exc.strerror or exc}") from exc


def cmd_create(kind: Kind, args: argparse.Namespace) -> int:
    objects = documents(kind, _read(args.file))
    client, failed = connect.client(args), 0
    for obj in objects:
        meta = obj["metadata"]
        try:
            client.create(kind.path(meta["namespace"]), obj)
            print(f"Created {kind.kind}: {meta['namespace']}/{meta.get('name', '')}")
        except KubeError as exc:
            failed += 1
            print(f"Failed to create {kind.kind}: {api_message(exc)}")
    return 1 if failed else 0


def cmd_delete(kind: Kind, args: argparse.Namespace) -> int:
    client = connect.client(args)
    if args.file:
        failed = 0
        for obj in documents(kind, _read(args.file)):
            meta = obj["metadata"]
            try:
                client.kube.request("DELETE", kind.path(meta["namespace"], str(meta.get("name", ""))))
                print(f"Deleted {kind.kind}: {meta['namespace']}/{meta.get('name', '')}")
            except KubeError as exc:
                failed += 1
                print(f"Failed to delete {kind.kind}: {api_message(exc)}")
        return 1 if failed else 0
    if not args.name:
        raise UsageError(f"{kind.words} name must be specified")
    obj = client.kube.request("GET", kind.path(args.namespace, args.name))
    namespace = (obj.get("metadata") or {}).get("namespace") or args.namespace
    client.kube.request("DELETE", kind.path(namespace, args.name))
    print(f"Deleted {kind.kind}: {namespace}/{args.name}")
    return 0


def cmd_get(kind: Kind, args: argparse.Namespace) -> int:
    if not args.name:
        raise UsageError(f"name is mandatory to get the particular {kind.words} details")
    obj = connect.client(args).kube.request("GET", kind.path(args.namespace, args.name))
    if is_object_format(args.output):
        print_objects(obj, args.output, kind.resource)
        return 0
    sys.stdout.write(table(kind, [obj], time.time()))
    return 0


def cmd_list(kind: Kind, args: argparse.Namespace) -> int:
    client = connect.client(args)
    path = kind.path(None if args.all_namespaces else args.namespace)
    listed = client.listing(path, args.label_selector)
    if is_object_format(args.output):
        print_objects(listed.items, args.output, kind.resource)
    elif not listed.items and not args.watch:
        print(NO_RESOURCES)
    else:
        sys.stdout.write(table(kind, listed.items, time.time()))
    if args.watch:
        def row(obj: MutableObj) -> str:
            if is_object_format(args.output):
                return render_objects(obj, args.output, kind.resource)
            return table(kind, [obj], time.time()).split("\n", 1)[1]

        watch(client, path, args.label_selector, listed.resource_version, row)
    return 0


def cmd_describe(kind: Kind, args: argparse.Namespace) -> int:
    client = connect.client(args)
    if args.name:
        objects = [client.kube.request("GET", kind.path(args.namespace, args.name))]
    else:
        objects = client.items(kind.path(args.namespace))
    sys.stdout.write("\n\n".join(describe_text(kind, obj, args.format) for obj in objects))
    return 0


# ---- argparse ---------------------------------------------------------------------------------------------


def add_parsers(sub: Any) -> None:
    for kind in (JOBFLOW, JOBTEMPLATE):
        top = sub.add_parser(
            kind.command, help=f"create, get, list, delete or describe {kind.kind}s (vcctl {kind.command})"
        )
        verbs = top.add_subparsers(dest=f"{kind.command}_command", required=True)
        name = ("-N", "--name")
        specs: dict[str, tuple[str, Any]] = {
            "create": (f"create a {kind.words}", cmd_create),
            "list": (f"list {kind.words}s", cmd_list),
            "get": (f"get a {kind.words}", cmd_get),
            "delete": (f"delete a {kind.words}", cmd_delete),
            "describe": (f"describe a {kind.words}", cmd_describe),
        }
        for verb, (help_, run) in specs.items():
            p = verbs.add_parser(verb, help=help_, description=f"{help_[0].upper()}{help_[1:]} "
                                 f"({kind.kind}, flow.volcano.sh/v1alpha1), as vcctl {kind.command} {verb}.")
            common(p, namespace=verb != "create", output=("json", "yaml") if verb in ("get", "list") else ())
            if verb in ("get", "delete", "describe"):
                p.add_argument(*name, dest="name", default="", help=f"the name of {kind.words}")
            if verb in ("create", "delete"):
                p.add_argument(
                    "-f", "--file", default="", help=f"the path to the YAML file containing the {kind.words}"
                )
            if verb == "list":
                all_namespaces(p, f"{kind.words}s")
                label_selector(p)
                watch_flag(p)
            if verb == "describe":
                p.add_argument(
                    "-o",
                    "--format",
                    choices=("yaml", "json"),
                    default="yaml",
                    help="the format of output (default yaml)",
                )
            p.set_defaults(func=reporting(functools.partial(run, kind)))
