"""`--feature-gates`, as Volcano's components parse it (component-base's featuregate). Layer: flags.

The value is `Name=bool,Other=bool` (Go's strconv.ParseBool spellings, spaces around names and values trimmed,
empty items skipped); the flag may be given more than once, a later value of a gate replacing an earlier one.
Each error is component-base's: `missing bool value for X`, `invalid value of X=Y`, `unrecognized feature gate:
X` (Volcano's binaries then exit: a gate nobody has is an error, not a warning). `AllAlpha` and `AllBeta` set
every alpha (beta) gate that is not named itself.

Known gates: Volcano's (pkg/features/volcano_features.go, each with its default) and Kubernetes' (`kube_gates.py`),
as Volcano's binaries register both. volcano-py acts on `SchedulingGatesQueueAdmission` alone (off by default,
alpha, as in Volcano); naming any other gate with a value volcano-py does not follow gives one warning.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scheduler.flags.kube_gates import KUBERNETES_GATES
from scheduler.flags.syntax import FlagError, Ignored, parse_bool

QUEUE_ADMISSION = "SchedulingGatesQueueAdmission"
ALL_ALPHA, ALL_BETA = "AllAlpha", "AllBeta"

# Volcano's gates: (default, pre-release), pkg/features/volcano_features.go (every one is alpha there).
VOLCANO_GATES: Mapping[str, tuple[bool, str]] = {
    "WorkLoadSupport": (True, "alpha"),
    "VolcanoJobSupport": (True, "alpha"),
    "PodDisruptionBudgetsSupport": (True, "alpha"),
    "QueueCommandSync": (True, "alpha"),
    "PriorityClass": (True, "alpha"),
    "CSIStorage": (False, "alpha"),
    "ResourceTopology": (True, "alpha"),
    "CronVolcanoJobSupport": (True, "alpha"),
    QUEUE_ADMISSION: (False, "alpha"),
}
HONOURED = frozenset({QUEUE_ADMISSION})
FLAG = "feature-gates"


@dataclass(frozen=True, slots=True)
class FeatureGates:
    """The gates as set on the command line (`given`), read with Volcano's defaults."""

    given: Mapping[str, bool] = field(default_factory=dict)

    def enabled(self, name: str) -> bool:
        if name in self.given:
            return self.given[name]
        default, stage = VOLCANO_GATES.get(name, (False, ""))
        special = {"alpha": ALL_ALPHA, "beta": ALL_BETA}.get(stage)
        if special is not None and special in self.given:
            return self.given[special]
        return default

    @property
    def queue_admission(self) -> bool:
        """SchedulingGatesQueueAdmission: the webhook gates opted-in pods, the scheduler ungates them."""
        return self.enabled(QUEUE_ADMISSION)

    def ignored(self) -> tuple[Ignored, ...]:
        """One warning per gate named with a value volcano-py does not act on."""
        out = []
        for name, value in self.given.items():
            if name in HONOURED or name in (ALL_ALPHA, ALL_BETA):
                continue
            if name in VOLCANO_GATES:
                default = VOLCANO_GATES[name][0]
                if value != default:
                    out.append(Ignored(f"{FLAG} {name}={str(value).lower()}",
                                       f"volcano-py always behaves as with {name}={str(default).lower()}"))
            else:
                out.append(Ignored(f"{FLAG} {name}", "a Kubernetes feature gate; volcano-py does not read it"))
        return tuple(out)


def parse_feature_gates(values: Iterable[str]) -> FeatureGates:
    """Every occurrence of `--feature-gates`, in order: the gates they set (FlagError, one line, for a value
    component-base refuses)."""
    given: dict[str, bool] = {}
    for value in values:
        try:
            given.update(_parse_one(value))
        except ValueError as exc:
            raise FlagError(f"invalid argument {value!r} for --{FLAG}: {exc}", flag=FLAG) from None
    return FeatureGates(given)


def _parse_one(value: str) -> dict[str, bool]:
    """One occurrence, as component-base's featureGate.Set: the whole value is refused on the first error."""
    out: dict[str, bool] = {}
    for item in value.split(","):
        if not item:
            continue
        key, has_value, text = item.partition("=")
        key = key.strip()
        if not has_value:
            raise ValueError(f"missing bool value for {key}")
        text = text.strip()
        try:
            out[key] = parse_bool(text)
        except ValueError:
            raise ValueError(f"invalid value of {key}={text}, err: strconv.ParseBool: parsing "
                             f'"{text}": invalid syntax') from None
    for key in out:
        if key not in VOLCANO_GATES and key not in KUBERNETES_GATES and key not in (ALL_ALPHA, ALL_BETA):
            raise ValueError(f"unrecognized feature gate: {key}")
    return out
