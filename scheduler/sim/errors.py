"""Layer `sim`: the simulator's user error, in a module of its own so the command line can catch it without
importing the simulator (`volcano-py scheduler` starts without loading the replay, the schemas or matplotlib)."""

from __future__ import annotations


class InputError(ValueError):
    """A user error in a simulator input: names the file, the field and what was expected."""

    def __init__(self, source: str, where: str, problem: str, fields: tuple[str, ...] = ()) -> None:
        super().__init__(f"{source}: {where}: {problem}" if where else f"{source}: {problem}")
        self.source, self.where, self.problem = source, where, problem
        self.fields = fields  # the manifest fields at fault, when a schema check names them
