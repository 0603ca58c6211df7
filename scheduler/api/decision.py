"""Layer `api`: `Status`, the one value a plugin's decision comes back as.

A Status is a code, the typed reasons behind it (`api/reasons.py`) and the plugin that gave it. The session
stamps the plugin when it runs a plugin's function, as kube-scheduler's framework stamps the plugin name on a
non-success status (pkg/scheduler/framework/runtime/framework.go, `status.SetPlugin`), so a plugin never has
to name itself. The codes follow kube-scheduler's (pkg/scheduler/framework/interface.go) with Volcano's votes
mapped onto them (pkg/scheduler/framework/session_plugins.go: Permit, Abstain, Reject): Permit is SUCCESS,
Abstain is ABSTAIN (kube-scheduler's Skip), Reject is UNSCHEDULABLE.

The scheduler publishes the Status of a waiting PodGroup as JSON in the annotation `REASONS_ANNOTATION`
(`publish` / `read_published`); `volcano-py explain` reads it there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from scheduler.api.reasons import Reason, ReasonError, from_json

REASONS_ANNOTATION = "scheduling.volcano-py.io/reasons"
SCHEMA_VERSION = 1


class Code(Enum):
    SUCCESS = "Success"
    UNSCHEDULABLE = "Unschedulable"  # not now: resources or limits may change
    UNRESOLVABLE = "UnschedulableAndUnresolvable"  # not until the job or the cluster's objects change
    ERROR = "Error"  # a bug or bad input met while deciding
    ABSTAIN = "Abstain"  # no opinion: the next plugin (or the default) decides


@dataclass(frozen=True, slots=True)
class Status:
    code: Code
    reasons: tuple[Reason, ...] = ()
    plugin: str = ""

    @property
    def ok(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def abstained(self) -> bool:
        return self.code is Code.ABSTAIN

    @property
    def rejected(self) -> bool:
        return self.code in _REJECTIONS

    def stamped(self, plugin: str) -> Status:
        # (the constructor, not `dataclasses.replace`: a gang told each cycle why it is not valid stamps one)
        return self if self.plugin == plugin else Status(self.code, self.reasons, plugin)

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code.value, "plugin": self.plugin, "reasons": [r.to_json() for r in self.reasons]}

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> Status:
        try:
            code = Code(obj.get("code"))
        except ValueError:
            raise ReasonError(f"unknown status code {obj.get('code')!r}") from None
        raw = obj.get("reasons") or []
        if not isinstance(raw, list) or not all(isinstance(r, Mapping) for r in raw):
            raise ReasonError(f"reasons: expected a list of objects, got {raw!r}")
        return Status(code, tuple(from_json(r) for r in raw), str(obj.get("plugin") or ""))


_REJECTIONS = frozenset({Code.UNSCHEDULABLE, Code.UNRESOLVABLE, Code.ERROR})

SUCCESS = Status(Code.SUCCESS)
ABSTAIN = Status(Code.ABSTAIN)


def unschedulable(*reasons: Reason) -> Status:
    return Status(Code.UNSCHEDULABLE, reasons)


def unresolvable(*reasons: Reason) -> Status:
    return Status(Code.UNRESOLVABLE, reasons)


def publish(status: Status) -> str:
    """The annotation's value: compact JSON in field order, so an unchanged Status is an unchanged string."""
    return json.dumps({"version": SCHEMA_VERSION, **status.to_json()}, separators=(",", ":"))


def read_published(text: str) -> Status:
    """The inverse of `publish`; raises ReasonError for what this version cannot read."""
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise ReasonError(f"not JSON: {exc}") from None
    if not isinstance(obj, Mapping):
        raise ReasonError("expected a JSON object")
    if obj.get("version") != SCHEMA_VERSION:
        raise ReasonError(f"schema version {obj.get('version')!r}, this version reads {SCHEMA_VERSION}")
    return Status.from_json(obj)
