"""Layer `report`: how far a long command has got — a bar with rate and ETA on a terminal, plain lines otherwise.

On a terminal, a tqdm bar (it appears only once the command has run `delay` seconds, so a quick command prints
nothing). When stderr is a file or a pipe (CI logs, `2> log`), a bar's carriage returns would make a mess: plain
lines instead, the first once `delay` has passed and then one every `interval` seconds, and a last one at the end
if any was printed, with the same numbers:

    simulate volcano-py (gang scheduling): 120/381 jobs (31%), 2.4 jobs/s, ETA 1m49s, simulated 3h12m

With `age` (the seconds the process had already run, `process_age()` for a command), `delay` counts from the
process's start rather than from the bar's: a command that spent a second reading its inputs shows its first line
as soon as the bar exists (after `SHOWN_AFTER` of its own, so a bar that is over at once stays silent).

A heartbeat thread (every `heartbeat` seconds) redraws the bar and prints the plain lines even while the work
does not call `update` — a long cluster build or one long scheduling cycle — so the line never sits still for
longer than that; `stage(text)` says what the work is doing meanwhile (issue 38: a 100,000-replica replay
printed nothing for 90 s, then "0/1 jobs" until it ended).
"""

from __future__ import annotations

import io
import os
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

Clock = Callable[[], float]
SHOWN_AFTER = 0.25  # seconds of its own a bar runs before it shows, when `age` brings its delay forward


def process_age() -> float | None:
    """Seconds since this process started (Linux: /proc), or None where that cannot be read."""
    try:
        with open("/proc/self/stat") as f:
            after_name = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - int(after_name[19]) / os.sysconf("SC_CLK_TCK"))  # field 22: starttime
    except (OSError, ValueError, IndexError):
        return None


def duration(seconds: float) -> str:
    """`1h02m`, `3m05s`, `42s`."""
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _columns(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return 0


class Progress:
    """`update(done, detail)` as the work goes; `close()` (or the `with` block's end) when it is over."""

    def __init__(self, label: str, total: int, unit: str, *, stream: TextIO | None = None, interval: float = 10.0,
                 delay: float = 1.0, clock: Clock = time.monotonic, tty: bool | None = None,
                 heartbeat: float | None = None, age: float | None = None) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.stream = stream if stream is not None else sys.stderr
        self.interval, self.delay, self.clock = interval, delay, clock
        self.started = self._last = clock()
        # When the first line is due: `delay` after the bar's start, or after the process's when its age is known
        self.due = self.started + (delay if age is None else max(min(delay, SHOWN_AFTER), delay - age))
        self.done, self.detail, self.lines = 0, "", 0
        self._lock = threading.Lock()
        is_tty = tty if tty is not None else bool(getattr(self.stream, "isatty", lambda: False)())
        self._bar: Any = None
        if is_tty:
            from tqdm import tqdm

            sized = _columns(self.stream) > 0  # a terminal of no width (some ptys): tqdm would draw nothing
            self._bar = tqdm(total=total, desc=label, unit=unit, file=self.stream, delay=self.due - self.started,
                             leave=False,
                             dynamic_ncols=sized, ncols=None if sized else 100, nrows=None if sized else 24)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if heartbeat:
            self._thread = threading.Thread(target=self._beat, args=(heartbeat,), name="progress", daemon=True)
            self._thread.start()

    def _beat(self, every: float) -> None:
        while not self._stop.wait(every if self.lines or self._shown() else max(0.01, self.due - self.clock())):
            self.refresh()

    def _shown(self) -> bool:
        return self._bar is not None and self.clock() >= self.due

    def refresh(self) -> None:
        """Redraw the bar, or print the plain line if one is due (the heartbeat calls it)."""
        with self._lock:
            if self._bar is not None:
                if self.clock() >= self.due:
                    self._bar.refresh()
                return
            self._maybe_line()

    def retotal(self, total: int, unit: str) -> None:
        """Count to `total` `unit`s from now on (a bar opened before the work's size was known)."""
        with self._lock:
            self.total, self.unit = total, unit
            if self._bar is not None:
                self._bar.total, self._bar.unit = total, unit

    def stage(self, text: str) -> None:
        """What the work is doing now (building the cluster, creating pods, cycle N), shown beside the count."""
        with self._lock:
            self.detail = text
            if self._bar is not None:
                self._bar.set_postfix_str(text, refresh=False)

    def update(self, done: int, detail: str = "") -> None:
        with self._lock:
            self.done = done
            if detail:
                self.detail = detail
            if self._bar is not None:
                if detail:
                    self._bar.set_postfix_str(detail, refresh=False)
                self._bar.update(done - self._bar.n)
                return
            self._maybe_line()

    def _maybe_line(self) -> None:
        now = self.clock()
        due = now >= self.due if not self.lines else now - self._last >= self.interval
        if due:
            self._last = now
            self._line(now)

    def line(self, now: float | None = None) -> str:
        """The plain line for the progress so far."""
        elapsed = (self.clock() if now is None else now) - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        parts = [f"{self.done}/{self.total} {self.unit}s" + (f" ({self.done / self.total:.0%})" if self.total else "")]
        if self.done:
            parts.append(f"{rate:.3g} {self.unit}s/s")
        if self.done >= self.total:
            parts.append(f"done in {duration(elapsed)}")
        elif rate > 0:
            parts.append(f"ETA {duration((self.total - self.done) / rate)}")
        else:
            parts.append(f"{duration(elapsed)} so far")
        if self.detail:
            parts.append(self.detail)
        return f"{self.label}: " + ", ".join(parts)

    def _line(self, now: float) -> None:
        print(self.line(now), file=self.stream, flush=True)
        self.lines += 1

    def close(self, *, final: bool = True) -> None:
        """End the bar; in plain mode, a last line if any line was printed (not after an error: its own line
        follows)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None
            elif self.lines and final:
                self._line(self.clock())

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close(final=kind is None)
