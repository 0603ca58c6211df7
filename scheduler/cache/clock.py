"""Layer `cache`: the apiserver's clock, as this process can read it.

Every timeout the scheduler keeps (a gang's `scheduleTimeoutSeconds`, the partial-gang timeout, an SLA's waiting
time, the starvation threshold) starts at a timestamp the apiserver wrote: an object's creationTimestamp, a pod's
PodScheduled transition. Comparing those with this machine's clock makes a scheduler whose clock runs 60 s ahead
give every gang up at once, and one 60 s behind wait a minute too long. So the cache's `now` is this machine's
clock corrected by the apiserver's offset, measured from the `Date` header of its answers (RFC 9110: the moment
the answer was made, to the second), as kube-scheduler's neighbours do for leases' skew.

Each answer bounds the offset: the server's second D was read between our send and our receipt, so
`D - received <= offset < D + 1 - sent`. The bounds of the last `window` answers (one a second at most) are
intersected, so the estimate tightens to about the round trip; if they stop agreeing (this machine's clock was
stepped), the newest answer starts a new window. A `Date` that cannot be read, or that puts the offset beyond a
day, is ignored (logged once).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from email.utils import mktime_tz, parsedate_tz

log = logging.getLogger("volcano_py.cache")

MAX_OFFSET = 86_400.0  # seconds: a Date further off than this is not the apiserver's clock


class ApiClock:
    def __init__(self, local: Callable[[], float], *, window: int = 64, every: float = 1.0) -> None:
        self.local = local
        self.every = every
        self.offset = 0.0  # apiserver minus local, in seconds
        self._bounds: deque[tuple[float, float]] = deque(maxlen=window)
        self._last = float("-inf")
        self._lock = threading.Lock()
        self._warned = False

    def now(self) -> float:
        """The apiserver's time now, in Unix seconds, as well as it is known."""
        return self.local() + self.offset

    def due(self, received: float) -> bool:
        """Whether an answer read at local `received` is to be observed (one a second at most)."""
        return received - self._last >= self.every

    def observe(self, date: str | None, sent: float, received: float) -> None:
        """An answer with `Date: date` to a request sent at local `sent` and read at local `received`."""
        if date is None or not self.due(received):
            return
        server = read_date(date)
        if server is None or abs(server - received) > MAX_OFFSET:
            if not self._warned:
                self._warned = True
                log.warning("the apiserver's Date header %r cannot be read as its clock; timeouts use this "
                            "machine's clock until one can", date[:64])
            return
        low, high = server - received, server + 1.0 - sent
        with self._lock:
            self._last = received
            self._bounds.append((low, high))
            lo = max(b[0] for b in self._bounds)
            hi = min(b[1] for b in self._bounds)
            if lo > hi:  # the bounds disagree: a clock was stepped; start again from this answer
                self._bounds.clear()
                self._bounds.append((low, high))
                lo, hi = low, high
            self.offset = (lo + hi) / 2.0


def read_date(value: str) -> float | None:
    """An HTTP-date (IMF-fixdate, as Go's net/http writes it) in Unix seconds; None if it is not one."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    parts = parsedate_tz(value)
    if parts is None:
        return None
    try:
        return float(mktime_tz(parts))
    except (OverflowError, ValueError):
        return None
