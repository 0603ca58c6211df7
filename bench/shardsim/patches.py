"""The three patch types the apiserver takes and the scheduler sends: JSON merge patch (RFC 7386), strategic merge
patch (a merge patch whose lists with a merge key merge by it: the scheduler patches `status.conditions`, merged by
`type`, apimachinery strategicpatch with the core types' `patchMergeKey`) and JSON patch (RFC 6902)."""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    """The patch cannot be applied: 422 for a failed `test` or a bad path, as the apiserver answers."""


# Lists merged by a key in a strategic merge patch (k8s.io/api core/v1 types' patchMergeKey), by field name.
MERGE_KEYS = {"conditions": "type", "containers": "name", "initContainers": "name", "tolerations": "key",
              "volumes": "name", "env": "name", "ports": "containerPort"}


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def strategic_merge_patch(target: Any, patch: Any, field: str = "") -> Any:
    if isinstance(patch, list) and field in MERGE_KEYS and isinstance(target, list):
        key = MERGE_KEYS[field]
        merged = [copy.deepcopy(x) for x in target]
        for item in patch:
            if not isinstance(item, dict) or key not in item:
                raise PatchError(f"map: {item!r} does not contain declared merge key: {key}")
            at = next((i for i, x in enumerate(merged) if isinstance(x, dict) and x.get(key) == item[key]), None)
            if item.get("$patch") == "delete":
                if at is not None:
                    merged.pop(at)
            elif at is None:
                merged.append(copy.deepcopy(item))
            else:
                merged[at] = strategic_merge_patch(merged[at], item)
        return merged
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = strategic_merge_patch(out.get(key), value, key)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> Any:
    node = doc
    for p in parts[:-1]:
        if isinstance(node, dict) and p in node:
            node = node[p]
        elif isinstance(node, list) and p.isdigit() and int(p) < len(node):
            node = node[int(p)]
        else:
            raise PatchError(f"doc is missing path: /{'/'.join(parts)}")
    return node


def _get(doc: Any, parts: list[str]) -> Any:
    parent = _parent(doc, parts)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise PatchError(f"doc is missing path: /{'/'.join(parts)}")


def json_patch(doc: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise PatchError("a JSON patch is a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or not isinstance(op.get("op"), str) or not isinstance(op.get("path"), str):
            raise PatchError(f"invalid operation {op!r}")
        kind, parts = op["op"], _pointer(op["path"])
        if not parts:
            raise PatchError("the root cannot be patched")
        if kind == "test":
            if _get(doc, parts) != op.get("value"):
                raise PatchError(f"testing value {op['path']} failed: test failed")
            continue
        if kind in ("move", "copy"):
            value = copy.deepcopy(_get(doc, _pointer(str(op.get("from", "")))))
            if kind == "move":
                json_patch_remove(doc, _pointer(str(op.get("from", ""))))
            kind, op = "add", {**op, "value": value}
        parent, last = _parent(doc, parts), parts[-1]
        if kind == "remove":
            json_patch_remove(doc, parts)
        elif kind in ("add", "replace"):
            if kind == "replace":
                _get(doc, parts)  # must exist
            if isinstance(parent, dict):
                parent[last] = copy.deepcopy(op.get("value"))
            elif isinstance(parent, list):
                index = len(parent) if last == "-" else int(last) if last.isdigit() else -1
                if not 0 <= index <= len(parent):
                    raise PatchError(f"index out of range in {op['path']}")
                if kind == "replace":
                    parent[index] = copy.deepcopy(op.get("value"))
                else:
                    parent.insert(index, copy.deepcopy(op.get("value")))
            else:
                raise PatchError(f"doc is missing path: {op['path']}")
        else:
            raise PatchError(f"unexpected kind of operation {kind!r}")
    return doc


def json_patch_remove(doc: Any, parts: list[str]) -> None:
    parent, last = _parent(doc, parts), parts[-1]
    _get(doc, parts)
    if isinstance(parent, dict):
        del parent[last]
    else:
        del parent[int(last)]
