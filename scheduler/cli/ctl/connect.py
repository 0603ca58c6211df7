"""Layer `ctl`: how a day-two command reaches the apiserver, and how it ends when it cannot.

The kubeconfig comes from `-k/--kubeconfig`, else `$KUBECONFIG`, else `~/.kube/config`, else the pod's service
account; `-s/--master` overrides the server, as vcctl's BuildConfig does (pkg/cli/util/util.go). Commands call
`client(args)` (tests replace `kube`). An API or connection error is one line on stderr and exit 1, a bad flag
or file one line and exit 2 (`UsageError`); the traceback only with `--debug`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable

from scheduler.cache.client import steady_refresh
from scheduler.cache.kube import Kube, KubeError
from scheduler.cli.ctl.client import Client, MissingCRDError, missing_crd
from scheduler.cli.ctl.exits import EXIT_FAILURE, EXIT_USER
from scheduler.cli.ctl.waiting import WaitingKube
from scheduler.durations import Seconds, format_duration

log = logging.getLogger("volcano_py.ctl")


class NoClusterError(Exception):
    """Neither a kubeconfig nor an in-cluster service account says where the apiserver is."""


class UsageError(Exception):
    """A flag or file the command cannot use (vcctl's `... must be specified` errors): exit 2."""


def kubeconfig_path(args: argparse.Namespace) -> str:
    """The kubeconfig file a command reads, for its messages: `--kubeconfig`, else the first of `$KUBECONFIG`,
    else ~/.kube/config."""
    given = getattr(args, "kubeconfig", None) or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    return str(given or os.path.expanduser("~/.kube/config"))


def _config_file(args: argparse.Namespace) -> str:
    """What the kubeconfig loader reads: `--kubeconfig`, else `$KUBECONFIG` as it is now (a list of files is
    merged), else ~/.kube/config. (The loader's own default is `$KUBECONFIG` as it was when it was imported.)"""
    return str(getattr(args, "kubeconfig", None) or os.environ.get("KUBECONFIG") or "~/.kube/config")


def _yaml_problem(exc: Exception) -> str:
    """A YAML error in one line: what is wrong and where (`expected ',' or '}' at line 5`)."""
    import yaml

    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"{exc.problem or exc.context or 'invalid YAML'}{where}"
    return " ".join(str(exc).split())


def context_namespace(args: argparse.Namespace) -> str | None:
    """The namespace of the kubeconfig context a command uses (`--context`, else the current one), as kubectl
    takes its default namespace; None when there is no kubeconfig or the context names none."""
    from kubernetes import config

    try:
        contexts, current = config.list_kube_config_contexts(_config_file(args))
    except Exception:  # no or a bad kubeconfig: connecting says what is wrong
        log.debug("no kubeconfig context read", exc_info=True)
        return None
    wanted = getattr(args, "context", None)
    chosen = next((c for c in contexts or () if c.get("name") == wanted), None) if wanted else current
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return str(namespace) if isinstance(namespace, str) and namespace else None


def resolve_namespace(args: argparse.Namespace) -> None:
    """`-n` when given, else the context's namespace, else `default`."""
    if hasattr(args, "namespace") and args.namespace is None:
        args.namespace = context_namespace(args) or "default"


def kube(args: argparse.Namespace) -> Kube:
    import yaml
    from kubernetes import client as k8s, config

    cfg = k8s.Configuration()
    master = getattr(args, "master", None)
    context = getattr(args, "context", None)
    try:
        config.load_kube_config(config_file=_config_file(args), context=context, client_configuration=cfg)
    except yaml.YAMLError as exc:
        raise UsageError(f"kubeconfig {kubeconfig_path(args)} is not valid YAML: {_yaml_problem(exc)}") from None
    except (config.ConfigException, OSError, ValueError, TypeError, AttributeError) as exc:
        if args.kubeconfig or context:
            raise NoClusterError(f"kubeconfig {kubeconfig_path(args)}: {' '.join(str(exc).split())}") from exc
        if not master:
            try:
                config.load_incluster_config(client_configuration=cfg)
            except config.ConfigException:
                raise NoClusterError(
                    "no cluster to talk to: no kubeconfig (--kubeconfig, $KUBECONFIG or "
                    "~/.kube/config) and not running in a pod"
                ) from exc
    steady_refresh(cfg, master=master)  # (the loader's hook would put the kubeconfig's server back)
    return WaitingKube(k8s.ApiClient(cfg), request_timeout=args.request_timeout)


def client(args: argparse.Namespace) -> Client:
    return Client(kube(args))


def api_message(exc: KubeError) -> str:
    """The apiserver's own sentence (`jobs.batch.volcano.sh "x" not found`), which is what vcctl prints."""
    try:
        message = json.loads(exc.body).get("message")
    except (ValueError, AttributeError):
        message = None
    return str(message) if message else str(exc)


def _unreachable(exc: BaseException, args: argparse.Namespace) -> str | None:
    """The one line for an apiserver that cannot be reached (refused, no such host, TLS, timeout), else None."""
    from urllib3.exceptions import HTTPError

    if isinstance(exc, TimeoutError) or (isinstance(exc, HTTPError | OSError) and "timed out" in str(exc).lower()):
        limit = format_duration(float(getattr(args, "request_timeout", 0) or 0))
        return (f"the apiserver did not answer within {limit} (--request-timeout); it may be overloaded or "
                f"hung: check it (kubectl get --raw /readyz) or try again with a longer --request-timeout")
    if isinstance(exc, HTTPError | ConnectionError):
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
            resolve_namespace(args)
            return run(args)
        except UsageError as exc:
            if getattr(args, "debug", False):
                raise
            return fail(str(exc), EXIT_USER)
        except KubeError as exc:
            if getattr(args, "debug", False):
                raise
            crd = missing_crd(exc)
            return fail(str(crd) if crd is not None else api_message(exc))
        except (NoClusterError, MissingCRDError) as exc:
            if getattr(args, "debug", False):
                raise
            return fail(str(exc))
        except Exception as exc:
            line = _unreachable(exc, args)
            if line is None or getattr(args, "debug", False):
                raise
            return fail(line)

    return wrapped


def common(p: argparse.ArgumentParser, *, namespace: bool = True, output: tuple[str, ...] = ()) -> None:
    """vcctl's common flags (`-k/--kubeconfig`, `-s/--master`), kubectl's `--context`, ours, `-n/--namespace`
    (default: the kubeconfig context's namespace, else `default`, as kubectl), and `-o` when the command prints
    objects (`output`: the formats it has beside name, json, yaml and jsonpath, e.g. `wide`)."""
    p.add_argument("-k", "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    p.add_argument("--context", help="the kubeconfig context to use (default: its current-context)")
    p.add_argument("-s", "--master", help="the address of the apiserver (overrides the kubeconfig's)")
    p.add_argument("--request-timeout", type=Seconds(0, inclusive=False), default=30.0, metavar="DURATION",
                   help="how long one API request may take (a Go duration, 5s or 1m, or seconds; default 30s)")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    if namespace:
        p.add_argument("-n", "--namespace", default=None,
                       help="the namespace (default: the kubeconfig context's, else default)")
    if output:
        from scheduler.cli.ctl.output import output_type

        tables = tuple(o for o in output if o not in ("json", "yaml"))
        formats = ", ".join(["name", "json", "yaml", "jsonpath=TEMPLATE", *tables])
        p.add_argument("-o", "--output", type=output_type(tables), default=None, metavar="FORMAT",
                       help=f"print {formats} instead of the table (jsonpath as kubectl's: "
                       "jsonpath='{.items[*].metadata.name}')")


def label_selector(p: argparse.ArgumentParser) -> None:
    """kubectl's `-l`: only the objects whose labels match, selected by the apiserver."""
    p.add_argument("-l", "--label-selector", dest="label_selector", default=None, metavar="SELECTOR",
                   help="only objects whose labels match, as kubectl's -l (app=x,tier!=db, env in (a,b))")


def watch_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("-w", "--watch", action="store_true",
                   help="after the list, print each change as it happens (until Ctrl-C), as kubectl's --watch")


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
