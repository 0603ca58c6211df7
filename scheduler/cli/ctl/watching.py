"""Layer `ctl`: `--watch` on the list commands: after the list, one line (or object) per change, as kubectl's
`get --watch` prints them, until Ctrl-C.

The watch starts at the list's resourceVersion, so no change between the two is lost; a watch the apiserver ends
(its timeout) is started again from the last version seen, and one whose version is too old (410 Gone) from a new
list, whose objects are printed again.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from scheduler.api.objects import MutableObj
from scheduler.cache.kube import KubeError
from scheduler.cli.ctl.client import Client

WATCH_SECONDS = 300  # the apiserver ends each watch after this long; it is started again at once
CHANGES = ("ADDED", "MODIFIED", "DELETED")


class _GoneError(Exception):
    pass


def watch(client: Client, path: str, selector: str | None, version: str, row: Callable[[MutableObj], str],
          *, rounds: int | None = None) -> None:
    """Print `row(object)` for each change of the objects at `path` after `version`; for ever, or `rounds`
    watches (tests)."""
    sys.stdout.flush()  # the list, before waiting for changes (stdout to a pipe is block-buffered)
    done = 0
    while rounds is None or done < rounds:
        done += 1
        query = {"watch": "true", "timeoutSeconds": str(WATCH_SECONDS), "allowWatchBookmarks": "true"}
        if version:
            query["resourceVersion"] = version
        if selector:
            query["labelSelector"] = selector
        try:
            for event in client.kube.stream(path, query, read_timeout=WATCH_SECONDS + 30):
                version = _print(event, row) or version
        except (KubeError, _GoneError) as exc:
            if isinstance(exc, KubeError) and exc.status != 410:
                raise
            listed = client.listing(path, selector)
            for obj in listed.items:
                sys.stdout.write(row(obj))
            sys.stdout.flush()
            version = listed.resource_version


def _print(event: MutableObj, row: Callable[[MutableObj], str]) -> str:
    """Print one event's row; the resourceVersion it brings ("" for none)."""
    kind, obj = event.get("type"), event.get("object") or {}
    if kind == "ERROR":
        if obj.get("code") == 410:
            raise _GoneError
        raise KubeError(int(obj.get("code") or 500), "WATCH", "", str(obj.get("message") or "").encode())
    if kind in CHANGES:
        text = row(obj)
        if text:
            sys.stdout.write(text)
            sys.stdout.flush()
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
