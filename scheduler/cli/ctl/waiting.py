"""Layer `ctl`: a day-two command that waits on a slow or hung apiserver says so, instead of seconds of silence.

A request still unanswered after NOTE_AFTER seconds prints one line on stderr naming the server and how long the
command will wait (`--request-timeout`); the request then ends in its answer or in the timeout's one-line error
(`connect._unreachable`). Watches are not requests here: they wait for changes by design.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from scheduler.cache.kube import Kube
from scheduler.durations import format_duration

NOTE_AFTER = 5.0  # seconds: longer than an answer takes from a healthy apiserver, even a loaded one


class WaitingKube(Kube):
    """A Kube whose requests say, once per command, when the apiserver is slow to answer."""

    note_after = NOTE_AFTER

    def __init__(self, api_client: Any, **kwargs: Any) -> None:
        super().__init__(api_client, **kwargs)
        self._noted = threading.Event()

    def _note(self, timeout: float) -> None:
        if self._noted.is_set():
            return
        self._noted.set()
        host = getattr(getattr(self.api, "configuration", None), "host", "the apiserver")
        print(f"volcano-py: waiting for the apiserver at {host} to answer (giving up after "
              f"{format_duration(timeout)}, --request-timeout)", file=sys.stderr, flush=True)

    def request_bytes(self, method: str, path: str, **kwargs: Any) -> bytes:
        timeout = kwargs.get("timeout")
        seconds = self.request_timeout if timeout is None else float(timeout)
        timer = None
        if seconds > self.note_after and not self._noted.is_set():
            timer = threading.Timer(self.note_after, self._note, args=(seconds,))
            timer.daemon = True
            timer.start()
        try:
            return super().request_bytes(method, path, **kwargs)
        finally:
            if timer is not None:
                timer.cancel()
