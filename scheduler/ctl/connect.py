"""Layer `ctl`: how a day-two command reaches the apiserver, and how it ends when it cannot.

The kubeconfig comes from `-k/--kubeconfig`, else `$KUBECONFIG`, else `~/.kube/config`, else the pod's service
account; `-s/--master` overrides the server, as vcctl's BuildConfig does (pkg/cli/util/util.go). Commands call
`client(args)` (tests replace `kube`). An API or connection error is one line on stderr and exit 1, a bad flag
or file one line and exit 2 (`UsageError`); the traceback only with `--debug`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from scheduler.cache.kube import Kube, KubeError
from scheduler.ctl.client import Client
from scheduler.ctl.exits import EXIT_FAILURE, EXIT_USER
from scheduler.durations import Seconds


class NoCluster(Exception):
    """Neither a kubeconfig nor an in-cluster service account says where the apiserver is."""


class UsageError(Exception):
    """A flag or file the command cannot use (vcctl's `... must be specified` errors): exit 2."""


def kube(args: argparse.Namespace) -> Kube:
    from kubernetes import client as k8s
    from kubernetes import config

    cfg = k8s.Configuration()
    master = getattr(args, "master", None)
    try:
        config.load_kube_config(config_file=args.kubeconfig, client_configuration=cfg)
    except (config.ConfigException, OSError) as exc:
        if args.kubeconfig:
            raise NoCluster(f"kubeconfig {args.kubeconfig}: {exc}") from exc
        if not master:
            try:
                config.load_incluster_config(client_configuration=cfg)
            except config.ConfigException:
                raise NoCluster(
                    "no cluster to talk to: no kubeconfig (--kubeconfig, $KUBECONFIG or "
                    "~/.kube/config) and not running in a pod"
                ) from exc
    if master:
        cfg.host = master.rstrip("/")
    return Kube(k8s.ApiClient(cfg), request_timeout=args.request_timeout)


def client(args: argparse.Namespace) -> Client:
    return Client(kube(args))


def api_message(exc: KubeError) -> str:
    """The apiserver's own sentence (`jobs.batch.volcano.sh "x" not found`), which is what vcctl prints."""
    try:
        message = json.loads(exc.body).get("message")
    except (ValueError, AttributeError):
        message = None
    return str(message) if message else str(exc)


def _unreachable(exc: BaseException) -> str | None:
    """The one line for an apiserver that cannot be reached (refused, no such host, TLS, timeout), else None."""
    from urllib3.exceptions import HTTPError

    if isinstance(exc, HTTPError | ConnectionError | TimeoutError):
        reason = getattr(exc, "reason", None) or exc
        return f"cannot reach the apiserver: {reason}"
    return None


def fail(line: str, code: int = EXIT_FAILURE) -> int:
    print(f"volcano-py: error: {line}", file=sys.stderr)
    return code


def reporting(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """`run` with its errors as one line and an exit status."""

    def wrapped(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except UsageError as exc:
            if getattr(args, "debug", False):
                raise
            return fail(str(exc), EXIT_USER)
        except KubeError as exc:
            if getattr(args, "debug", False):
                raise
            return fail(api_message(exc))
        except NoCluster as exc:
            if getattr(args, "debug", False):
                raise
            return fail(str(exc))
        except Exception as exc:
            line = _unreachable(exc)
            if line is None or getattr(args, "debug", False):
                raise
            return fail(line)

    return wrapped


def common(p: argparse.ArgumentParser, *, namespace: bool = True, output: tuple[str, ...] = ()) -> None:
    """vcctl's common flags (`-k/--kubeconfig`, `-s/--master`), ours, and `-n/--namespace` (default `default`,
    as vcctl: not the kubeconfig context's)."""
    p.add_argument("-k", "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    p.add_argument("-s", "--master", help="the address of the apiserver (overrides the kubeconfig's)")
    p.add_argument("--request-timeout", type=Seconds(0, inclusive=False), default=30.0, metavar="DURATION",
                   help="how long one API request may take (a Go duration, 5s or 1m, or seconds; default 30s)")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    if namespace:
        p.add_argument("-n", "--namespace", default="default", help="the namespace (default: default)")
    if output:
        p.add_argument(
            "-o",
            "--output",
            choices=output,
            default=None,
            help="print the objects (json, yaml) or more columns (wide) instead of vcctl's table",
        )


def go_bool(text: str) -> bool:
    """strconv.ParseBool, which pflag uses for `--flag=value`."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise argparse.ArgumentTypeError(f"invalid argument {text!r}: expected true or false")


def all_namespaces(p: argparse.ArgumentParser, what: str) -> None:
    """vcctl's `--all-namespaces` (also `--all-namespaces=true|false`, as pflag takes a bool), and our `-A`."""
    p.add_argument(
        "-A",
        "--all-namespaces",
        nargs="?",
        const=True,
        default=False,
        type=go_bool,
        metavar="BOOL",
        help=f"list {what} in all namespaces",
    )


def name_of(args: argparse.Namespace, message: str) -> str:
    """The object a command is about: `-N/--name` (vcctl) or the positional NAME (volcano-py's older form)."""
    name = getattr(args, "name", None) or getattr(args, "target", None)
    if not name:
        raise UsageError(message)
    return str(name)


def positional_or_flag(p: argparse.ArgumentParser, flag: tuple[str, ...], help_: str) -> None:
    p.add_argument("target", nargs="?", metavar="NAME", help=f"{help_} (or {flag[-1]})")
    p.add_argument(*flag, dest="name", default=None, help=help_)
