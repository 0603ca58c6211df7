"""The resources the simulated apiserver serves: those `volcano-py scheduler` lists, watches or writes
(scheduler/cache/store.py, binder.py, status_writer.py, events.py, leader.py, shards.py), with the scope and the
status subresource their real definitions have (the core types; crds/*.yaml for Volcano's)."""

from __future__ import annotations

from shardsim.store import Kind


def all_kinds() -> list[Kind]:
    return [
        Kind("pods", "v1", "Pod", namespaced=True, status_subresource=True,
             indexes={"spec.nodeName": {}, "spec.schedulerName": {}}),
        Kind("nodes", "v1", "Node", namespaced=False, status_subresource=True),
        Kind("namespaces", "v1", "Namespace", namespaced=False, status_subresource=True),
        Kind("events", "v1", "Event", namespaced=True, status_subresource=False, retain=False),
        Kind("persistentvolumes", "v1", "PersistentVolume", namespaced=False, status_subresource=True),
        Kind("persistentvolumeclaims", "v1", "PersistentVolumeClaim", namespaced=True, status_subresource=True),
        Kind("resourcequotas", "v1", "ResourceQuota", namespaced=True, status_subresource=True),
        # crds/scheduling.volcano.sh_podgroups.yaml: `subresources: {}`, no status subresource
        Kind("podgroups", "scheduling.volcano.sh/v1beta1", "PodGroup", namespaced=True, status_subresource=False),
        Kind("queues", "scheduling.volcano.sh/v1beta1", "Queue", namespaced=False, status_subresource=True),
        Kind("priorityclasses", "scheduling.k8s.io/v1", "PriorityClass", namespaced=False,
             status_subresource=False),
        Kind("hypernodes", "topology.volcano.sh/v1alpha1", "HyperNode", namespaced=False, status_subresource=True),
        Kind("storageclasses", "storage.k8s.io/v1", "StorageClass", namespaced=False, status_subresource=False),
        Kind("poddisruptionbudgets", "policy/v1", "PodDisruptionBudget", namespaced=True, status_subresource=True),
        Kind("resourceslices", "resource.k8s.io/v1", "ResourceSlice", namespaced=False, status_subresource=False),
        Kind("deviceclasses", "resource.k8s.io/v1", "DeviceClass", namespaced=False, status_subresource=False),
        Kind("resourceclaims", "resource.k8s.io/v1", "ResourceClaim", namespaced=True, status_subresource=True),
        Kind("resourceclaimtemplates", "resource.k8s.io/v1", "ResourceClaimTemplate", namespaced=True,
             status_subresource=False),
        Kind("nodeshards", "shard.volcano.sh/v1alpha1", "NodeShard", namespaced=False, status_subresource=True),
        Kind("leases", "coordination.k8s.io/v1", "Lease", namespaced=True, status_subresource=False),
    ]
