"""Layer `framework`: the plugin runtime — what a plugin class serves, found from its methods, and registered in
the tiers when a session opens.

A plugin implements an extension point by defining the method the point names (`points.Point.name`:
`job_order`, `job_valid`, `preemptable`, ...), with the point's signature; it hears placements by defining the
hooks `on_allocate`, `on_deallocate` and `on_job_enqueued`. Nothing is registered by hand: after the plugin's
`on_session_open` (which keeps per-session state only), `serve` puts each of its methods in the plugin's tier,
honouring the conf's `enableXxx` switch of the point, exactly as kube-scheduler's framework builds its
extension points from the interfaces a plugin implements (pkg/scheduler/framework/runtime/framework.go).

Accelerations are optional methods beside the plain ones (`Point.accelerations`, `HOOK_ACCELERATIONS`): a key
for an ordering (`job_order_key`, `task_order_key`), a count for Allocatable (`allocatable_count`), a bound for
JobReady (`job_ready_bound`), a scalar and a static key for a batch scorer (`batch_node_order_one`,
`batch_node_order_static`), and `on_allocate_many` for a run of one job's identical tasks. They must give the same
answers as the plain methods (tests/framework/test_accelerations.py runs every plugin with and without them);
the runtime builds the forms the fast paths look for (`points.KeyedOrdering`, `CountedDecision`, `BoundedCheck`,
`BatchScorer`, `EventHandler.allocate_many`) from them, and none of them when a session is opened with
`accelerate=False`.

`check_plugin_class` rejects, when the plugin is registered, a class with a public method that is neither a
point, an acceleration, a hook nor the plugin's life cycle (so a misspelt point is an error, not a silence), and
an acceleration without its plain method.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from scheduler.framework import points as P
from scheduler.framework.conf import PluginOption
from scheduler.framework.plugin import Plugin
from scheduler.framework.tiers import EventHandler, TierRunner

log = logging.getLogger("volcano_py.scheduler")

POINTS = {point.name: point for point in P.ALL_POINTS}
HOOKS = frozenset({"on_allocate", "on_deallocate", "on_job_enqueued"})
HOOK_ACCELERATIONS = {"on_allocate_many": "on_allocate"}
# acceleration method -> the plain method it goes beside
ACCELERATIONS = {name: point.name for point in P.ALL_POINTS for name in point.accelerations} | HOOK_ACCELERATIONS
LIFECYCLE = frozenset({"on_session_open", "on_session_close", "parse_args", "inactive_points"})
KNOWN = frozenset(POINTS) | HOOKS | frozenset(ACCELERATIONS) | LIFECYCLE


class PluginDefinitionError(TypeError):
    """A plugin class that names something the runtime does not know (raised when the plugin is registered)."""


_METHODS: dict[type, frozenset[str]] = {}


def _own_methods(cls: type) -> frozenset[str]:
    """Public callables the class (or a base below `Plugin`) defines (kept per class)."""
    known = _METHODS.get(cls)
    if known is not None:
        return known
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is Plugin or klass is object or not issubclass(klass, Plugin):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or not callable(getattr(cls, name, None)):
                continue
            if isinstance(value, (staticmethod, classmethod)) or callable(value):
                names.add(name)
    known = _METHODS[cls] = frozenset(names)
    return known


def check_plugin_class(cls: type) -> None:
    """Raise `PluginDefinitionError` for a public method of `cls` the runtime does not know, or an
    acceleration without its plain method."""
    methods = _own_methods(cls)
    unknown = sorted(methods - KNOWN)
    if unknown:
        raise PluginDefinitionError(
            f"plugin class {cls.__name__} has public method(s) {', '.join(unknown)} that are not extension points, "
            f"accelerations or hooks (points: {', '.join(sorted(POINTS))}); make helpers private (a leading _)")
    orphans = sorted(name for name in methods & set(ACCELERATIONS) if ACCELERATIONS[name] not in methods)
    if orphans:
        raise PluginDefinitionError(
            f"plugin class {cls.__name__} has acceleration(s) {', '.join(orphans)} without the plain method "
            f"({', '.join(ACCELERATIONS[n] for n in orphans)})")
    if "batch_node_order_static" in methods and "batch_node_order_one" not in methods:
        raise PluginDefinitionError(f"plugin class {cls.__name__}: batch_node_order_static needs batch_node_order_one")


def served_points(cls: type) -> list[str]:
    """The points `cls` implements, in `ALL_POINTS` order."""
    methods = _own_methods(cls)
    return [name for name in POINTS if name in methods]



def serve(plugin: Plugin[object], tiers: TierRunner, *, tier: int, option: PluginOption, accelerate: bool) -> None:
    """Register what `plugin` serves in `tier` (after its `on_session_open`): its point methods, built with their
    accelerations unless `accelerate` is off, and its hooks; less what `inactive_points` turns off."""
    inactive = plugin.inactive_points()
    defined = _own_methods(type(plugin))
    unknown = inactive - defined
    if unknown:
        raise PluginDefinitionError(f"plugin {option.name} turned off point(s) it does not implement: "
                                    f"{', '.join(sorted(unknown))}")
    methods = defined - inactive if accelerate else (defined - inactive) - ACCELERATIONS.keys()
    for name, point in POINTS.items():
        if name in methods:
            tiers.register(point, _accelerated(plugin, name, getattr(plugin, name), methods), tier=tier,
                           option=option)
    allocate, deallocate = _bound(plugin, "on_allocate", methods), _bound(plugin, "on_deallocate", methods)
    if allocate is not None or deallocate is not None:
        many = _bound(plugin, "on_allocate_many", methods)
        tiers.add_event_handler(EventHandler(allocate=allocate, deallocate=deallocate, allocate_many=many))
    enqueued = _bound(plugin, "on_job_enqueued", methods)
    if enqueued is not None:
        tiers.on_job_enqueued(enqueued)


def _bound(plugin: Plugin[object], name: str, methods: Collection[str]) -> Callable[..., None] | None:
    return getattr(plugin, name) if name in methods else None


def _accelerated(plugin: Plugin[object], name: str, fn: object, methods: Collection[str]) -> object:
    """`fn` in the form that carries its accelerations, where the plugin has them (the methods are found by
    name; `check_plugin_class` and the plugins' tests hold their signatures to the point's)."""
    key, count, bound = f"{name}_key", "allocatable_count", "job_ready_bound"
    one, static = P.BATCH_NODE_ORDER.accelerations
    if name in ("job_order", "task_order") and key in methods:
        return P.KeyedOrdering(getattr(plugin, key))
    if name == "allocatable" and count in methods:
        return P.CountedDecision(getattr(plugin, name), getattr(plugin, count))
    if name == "job_ready" and bound in methods:
        return P.BoundedCheck(getattr(plugin, name), getattr(plugin, bound))
    if name == "batch_node_order" and one in methods:
        return P.BatchScorer(getattr(plugin, name), getattr(plugin, one),
                             getattr(plugin, static) if static in methods else None)
    return fn


# ---- what turns bulk placement off ---------------------------------------------------------------------------

# plain method -> the acceleration bulk placement needs beside it (`actions/bulk.py`)
BULK_NEEDS = {"allocatable": "allocatable_count", "on_allocate": "on_allocate_many",
              "batch_node_order": "batch_node_order_one"}


@dataclass(frozen=True, slots=True)
class BulkBlocker:
    plugin: str
    method: str  # the plain method it serves
    missing: str  # the acceleration it lacks


def bulk_blockers(plugins: Iterable[tuple[str, type]]) -> list[BulkBlocker]:
    """The plugins (name, class) of a conf that turn bulk placement off: each serves a method bulk placement
    needs the acceleration of, without it. (A plugin may still leave the point unserved in a session, through
    `inactive_points`: then bulk placement runs that session.)"""
    out: list[BulkBlocker] = []
    for name, cls in plugins:
        methods = _own_methods(cls)
        out.extend(BulkBlocker(name, plain, need) for plain, need in BULK_NEEDS.items()
                   if plain in methods and need not in methods)
    return out


def describe(blockers: Sequence[BulkBlocker]) -> str:
    return "; ".join(f"plugin {b.plugin} serves {b.method} without {b.missing}" for b in blockers)
