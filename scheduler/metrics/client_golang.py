"""What client_golang does that prometheus_client does not, so Volcano's dashboards read volcano-py's scrape as
they read Volcano's. Layer: metrics.

Go's bucket arithmetic (`exponential_buckets_range`), counters exported under their exact name with no `_total`
(`ExactNameCounter`: two of Volcano's counters have none), and the text exposition that renders them as the Go
client does (`exposition`; serve it instead of prometheus_client's `generate_latest`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable

from prometheus_client import REGISTRY, CollectorRegistry, Metric
from prometheus_client.exposition import generate_latest


def exponential_buckets_range(low: float, high: float, count: int) -> tuple[float, ...]:
    """client_golang's `prometheus.ExponentialBucketsRange`: `count` buckets from `low` to `high`, each the last
    times a constant factor, computed as Go computes them so that the `le` bounds match Volcano's."""
    growth = math.pow(high / low, 1.0 / (count - 1))
    return tuple(low * math.pow(growth, i) for i in range(count))


class _ExactCounterFamily(Metric):
    """A counter family whose samples carry the family's own name, with no `_total` appended."""

    def __init__(self, name: str, documentation: str) -> None:
        Metric.__init__(self, name, documentation, "counter")


class ExactNameCounter:
    """A counter exported under exactly its name, as client_golang exports `volcano_total_preemption_attempts`
    and `volcano_job_retry_counts`. prometheus_client's Counter always appends `_total` to the samples and the
    TYPE line (OpenMetrics requires it), so Volcano's dashboard panel on the bare name would find nothing.
    `exposition()` renders these families as the Go client does; `registry.get_sample_value(name)` reads them."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...] = (), *,
                 registry: CollectorRegistry) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, labelnames
        self._values: dict[tuple[str, ...], float] = {} if labelnames else {(): 0.0}
        self._lock = threading.Lock()
        registry.register(self)

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        if len(labels) != len(self.labelnames):
            raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {labels}")
        with self._lock:
            self._values[labels] = self._values.get(labels, 0.0) + amount

    def remove(self, *labels: str) -> None:
        with self._lock:
            self._values.pop(labels, None)

    def collect(self) -> Iterable[Metric]:
        family = _ExactCounterFamily(self.name, self.documentation)
        with self._lock:
            for labels, value in self._values.items():
                family.add_sample(self.name, dict(zip(self.labelnames, labels, strict=True)), value)
        return [family]


class _Families:
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


def exposition(registry: CollectorRegistry = REGISTRY) -> bytes:
    """The Prometheus text format (0.0.4) of `registry`, as `generate_latest` writes it, except that an
    `ExactNameCounter` is written as client_golang writes a counter: `# TYPE name counter` and `name value`."""
    parts = []
    for family in registry.collect():
        if isinstance(family, _ExactCounterFamily):
            as_gauge = Metric(family.name, family.documentation, "gauge")
            as_gauge.samples = family.samples
            text = generate_latest(_Families([as_gauge]))
            gauge_line, counter_line = (f"# TYPE {family.name} {kind}\n".encode() for kind in ("gauge", "counter"))
            parts.append(text.replace(gauge_line, counter_line, 1))
        else:
            parts.append(generate_latest(_Families([family])))
    return b"".join(parts)
