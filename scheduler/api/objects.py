"""Layer `api`: what a Kubernetes object is to volcano-py, its JSON parsed into plain dicts and lists (never a
client library's model), so that the cache, the simulator, the controllers and the tests hand each other the
same values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Obj = Mapping[str, Any]  # read: a function that takes an Obj leaves it as it was
MutableObj = dict[str, Any]  # owned: a stored manifest, a fresh response body, an object being built or patched
