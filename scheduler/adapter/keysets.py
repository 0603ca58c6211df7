"""Layer `adapter`: a map of key -> set of keys that holds a set of one as the key itself.

The incremental snapshot indexes every pod under the job keys it may join (`IncrementalSnapshot.by_key`) and every
other scheduler's pod under the job it names (`named`). Most pods of a large cluster are other schedulers' pods
naming no PodGroup, each its own job of one: a set per pod and index was ~220 bytes each, two per pod, for sets
that never hold more than that pod. Here such an entry is the pod's key; a second member makes it a set.
"""

from __future__ import annotations

from collections.abc import Iterator


class KeySets:
    __slots__ = ("_map",)

    def __init__(self) -> None:
        self._map: dict[str, str | set[str]] = {}

    def add(self, key: str, member: str) -> None:
        held = self._map.get(key)
        if held is None:
            self._map[key] = member
        elif type(held) is str:
            if held != member:
                self._map[key] = {held, member}
        else:
            held.add(member)  # type: ignore[union-attr]

    def discard(self, key: str, member: str) -> None:
        held = self._map.get(key)
        if held is None:
            return
        if type(held) is str:
            if held == member:
                del self._map[key]
            return
        held.discard(member)  # type: ignore[union-attr]
        if len(held) == 1:
            self._map[key] = next(iter(held))
        elif not held:
            del self._map[key]

    def get(self, key: str) -> tuple[str, ...] | set[str]:
        """The members under `key` (empty if none); a set returned is the map's own: read it, never change it."""
        held = self._map.get(key)
        if held is None:
            return ()
        return (held,) if type(held) is str else held  # type: ignore[return-value]

    def __contains__(self, key: object) -> bool:
        return key in self._map

    def __len__(self) -> int:
        return len(self._map)

    def __iter__(self) -> Iterator[str]:
        return iter(self._map)

    def clear(self) -> None:
        self._map.clear()
