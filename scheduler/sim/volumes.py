"""Layer `sim`: PersistentVolumes, claims and StorageClasses in the in-memory cluster.

Volumes are modelled only when a test gives the cluster such objects (`InMemoryCluster.add_storage`); a replayed
workload has none, and its pods' claims are then ignored (docs/simulator.md). A committed gang's claims are
bound before its pods, as the Kubernetes cache binds them, with the PV controller's part done at once: a static
binding binds both objects, a claim to provision gets the `volume.kubernetes.io/selected-node` annotation (no
provisioner runs here, so it stays unbound).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from scheduler.api.convert import key_of
from scheduler.api.objects import MutableObj
from scheduler.api.snapshot import VolumeBind
from scheduler.api.volumes import (
    BIND_COMPLETED,
    SELECTED_NODE,
    Storage,
    claim_from_object,
    class_from_object,
    volume_from_object,
)

_READERS = {
    "PersistentVolume": volume_from_object,
    "PersistentVolumeClaim": claim_from_object,
    "StorageClass": class_from_object,
}


@dataclass(slots=True)
class SimStorage:
    objects: dict[str, dict[str, MutableObj]] = field(default_factory=lambda: {kind: {} for kind in _READERS})

    def add(self, obj: MutableObj) -> str:
        """Add (or replace) a PersistentVolume, PersistentVolumeClaim or StorageClass; a malformed one is refused
        with a ValueError."""
        kind = str(obj.get("kind"))
        if kind not in _READERS:
            raise ValueError(f"not a storage object: kind {kind!r}")
        manifest = copy.deepcopy(obj)
        manifest.setdefault("metadata", {})
        if kind == "PersistentVolumeClaim":
            manifest["metadata"].setdefault("namespace", "default")
            manifest["metadata"].setdefault("uid", f"uid-{key_of(manifest)}")
        _READERS[kind](manifest)
        key = key_of(manifest)
        self.objects[kind][key] = manifest
        return key

    def storage(self) -> Storage:
        return Storage(
            volumes={v.name: v for v in map(volume_from_object, self.objects["PersistentVolume"].values())},
            claims={c.key: c for c in map(claim_from_object, self.objects["PersistentVolumeClaim"].values())},
            classes={c.name: c for c in map(class_from_object, self.objects["StorageClass"].values())},
        )

    def claim(self, key: str) -> MutableObj:
        return self.objects["PersistentVolumeClaim"][key]

    def volume(self, name: str) -> MutableObj:
        return self.objects["PersistentVolume"][name]

    def bind(self, bind: VolumeBind) -> None:
        claim = self.objects["PersistentVolumeClaim"].get(bind.claim)
        if claim is None:
            return
        annotations = claim["metadata"].setdefault("annotations", {})
        if not bind.volume:
            annotations[SELECTED_NODE] = bind.node
            return
        volume = self.objects["PersistentVolume"][bind.volume]
        meta = claim["metadata"]
        volume.setdefault("spec", {})["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
        }
        volume.setdefault("status", {})["phase"] = "Bound"
        claim.setdefault("spec", {})["volumeName"] = bind.volume
        annotations[BIND_COMPLETED] = "yes"
        claim.setdefault("status", {})["phase"] = "Bound"
