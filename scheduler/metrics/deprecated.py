"""volcano-py's own metric families under their old `volcano_` names, for one release. Layer: metrics.

Five families volcano-py added were named with Volcano's `volcano_` prefix although Volcano's source declares
none of them (`pkg/scheduler/metrics/*.go`). They are now `volcano_py_...`; a scrape still carries each under its
old name too, with the same samples and a HELP line that starts with "Deprecated:", so dashboards and alerts
written against the old names keep working until the next release drops them (docs/metrics.md).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Gauge, Histogram, Metric

# The old name -> the new name. The chart's alerts and dashboard use the new names only (tests/test_metric_names.py).
DEPRECATED_NAMES: dict[str, str] = {
    "volcano_job_status_count": "volcano_py_job_status_count",
    "volcano_podgroup_pending_duration_seconds": "volcano_py_podgroup_pending_duration_seconds",
    "volcano_queue_oldest_pending_podgroup_seconds": "volcano_py_queue_oldest_pending_podgroup_seconds",
    "volcano_queue_allocated_gpu": "volcano_py_queue_allocated_gpu",
    "volcano_queue_pending_gpu": "volcano_py_queue_pending_gpu",
}
OLD_NAMES: dict[str, str] = {new: old for old, new in DEPRECATED_NAMES.items()}

DEPRECATED_PREFIX = "Deprecated:"


def deprecated_help(new: str, documentation: str) -> str:
    return f"{DEPRECATED_PREFIX} renamed {new}; this name is removed in the next release. {documentation}"


class WithDeprecatedName:
    """A collector exporting one Gauge or Histogram (registered on no registry of its own) under its name and,
    from the same collection, under its old name: the two always carry the same values in one scrape."""

    def __init__(self, metric: Gauge | Histogram, name: str, kind: str, documentation: str, *,
                 registry: CollectorRegistry) -> None:
        self.metric, self.name, self.kind, self.documentation = metric, name, kind, documentation
        self.old = OLD_NAMES[name]
        registry.register(self)

    def describe(self) -> Iterable[Metric]:
        """The names it exports, so the registry refuses a second family under either."""
        return [Metric(self.name, self.documentation, self.kind),
                Metric(self.old, deprecated_help(self.name, self.documentation), self.kind)]

    def collect(self) -> Iterable[Metric]:
        out: list[Metric] = []
        for family in self.metric.collect():
            alias = Metric(self.old, deprecated_help(family.name, family.documentation), family.type)
            alias.samples = [s._replace(name=self.old + s.name[len(family.name):]) for s in family.samples]
            out += [family, alias]
        return out
