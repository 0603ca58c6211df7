"""Layer `framework`: the plugin base class and session event handlers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from scheduler.api.job import TaskInfo
    from scheduler.framework.conf import PluginOption
    from scheduler.framework.session import Session


class Plugin:
    """A plugin registers functions at extension points when a session opens, and may write at close."""

    name: ClassVar[str] = ""

    def __init__(self, option: PluginOption) -> None:
        self.option = option

    def on_session_open(self, ssn: Session) -> None:
        pass

    def on_session_close(self, ssn: Session) -> None:
        pass


@dataclass(frozen=True, slots=True)
class EventHandler:
    """Called when a Statement places a task (allocate/pipeline) or takes it back (discard/evict)."""

    allocate: Callable[[TaskInfo], None] | None = None
    deallocate: Callable[[TaskInfo], None] | None = None
