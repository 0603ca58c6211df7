"""Layer `framework`: the plugin base class and session event handlers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar, cast

from scheduler.framework.conf_args import NO_ARGS, ArgReader, parse_unloaded

if TYPE_CHECKING:
    from scheduler.api.job import TaskInfo
    from scheduler.framework.conf import PluginOption
    from scheduler.framework.session import Session

ArgsT = TypeVar("ArgsT", covariant=True)


class Plugin(Generic[ArgsT]):
    """A plugin registers functions at extension points when a session opens, and may write at close.

    `ArgsT` is the frozen value of its arguments, parsed once when the conf is loaded (`parse_args`) and read in
    `on_session_open` as `self.args`. A plugin without arguments is a `Plugin[NoArgs]`.
    """

    name: ClassVar[str] = ""

    def __init__(self, option: PluginOption) -> None:
        self.option = option
        # The loader parsed it with this class's parse_args (scheduler.plugins.registry.PLUGIN_ARGS).
        loaded = option.args is not None
        self.args: ArgsT = cast(ArgsT, option.args) if loaded else cast(ArgsT, parse_unloaded(option, self.parse_args))

    @classmethod
    def parse_args(cls, reader: ArgReader) -> ArgsT:
        """The plugin's typed arguments from its conf entry; a plugin with arguments overrides this."""
        return cast(ArgsT, NO_ARGS)

    def on_session_open(self, ssn: Session) -> None:
        pass

    def on_session_close(self, ssn: Session) -> None:
        pass


@dataclass(frozen=True, slots=True)
class EventHandler:
    """Called when a Statement places a task (allocate/pipeline) or takes it back (discard/evict)."""

    allocate: Callable[[TaskInfo], None] | None = None
    deallocate: Callable[[TaskInfo], None] | None = None
