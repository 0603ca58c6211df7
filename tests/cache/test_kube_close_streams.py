"""Closing the watches at shutdown races with watches that end by themselves: a stream whose connection is already
back in the pool must not make the scheduler's stop raise (a fresh-clone `make test` once failed so, in a
CronJob test's teardown: urllib3 "Cannot shutdown as connection has already been released to the pool")."""

from __future__ import annotations

import threading

import pytest

from scheduler.cache.kube import Kube


class EndedStream:
    def __init__(self, error: Exception) -> None:
        self.error = error
        self.asked = 0

    def shutdown(self) -> None:
        self.asked += 1
        raise self.error


@pytest.mark.parametrize("error", [
    RuntimeError("Cannot shutdown as connection has already been released to the pool"),
    ValueError("Cannot shutdown socket as self._sock_shutdown is not set"),
    OSError("Bad file descriptor"),
])
def test_a_watch_that_ended_meanwhile_does_not_stop_the_others_being_closed(error: Exception) -> None:
    kube = Kube.__new__(Kube)  # no apiserver: close_streams reads only the open streams and their lock
    kube._streams, kube._streams_lock = set(), threading.Lock()
    ended, live = EndedStream(error), EndedStream(OSError("closed now"))
    kube._streams.update({ended, live})
    kube.close_streams()
    assert (ended.asked, live.asked) == (1, 1)


def test_an_unexpected_error_still_reaches_the_caller() -> None:
    kube = Kube.__new__(Kube)
    kube._streams, kube._streams_lock = {EndedStream(KeyError("a bug"))}, threading.Lock()
    with pytest.raises(KeyError):
        kube.close_streams()
