"""Layer `cache`: publish a PodGroup's reasons as its annotation (`api.decision.REASONS_ANNOTATION`).

The condition's message is for people; the annotation holds the same decision as JSON for tools (`volcano-py
explain`). It lives in `metadata`, so it is written through the object (RBAC: `patch` on `podgroups`, which the
scheduler already has for Volcano's CRD without a status subresource), not through `/status`: in the very request
that writes the status when that goes through the object (Volcano's CRD and ours: one write, one watch event,
`status_writer.py`), in one of its own otherwise (`publish_annotations`, as plugins' annotations are).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from scheduler.api.objects import MutableObj
from scheduler.cache.kube import MERGE_PATCH, TRANSPORT_ERRORS, Kube

log = logging.getLogger("volcano_py.cache")
PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/{namespace}/podgroups/{name}"


def publish_annotations(kube: Kube, job: str, patch: Mapping[str, str | None]) -> MutableObj | None:
    """Merge-patch the PodGroup's annotations (a None value removes its key); the object written, or None when
    the write failed (logged; the plugin, or the status writer for the reasons, asks again next cycle, as the
    PodGroup still differs)."""
    namespace, name = job.split("/", 1)
    try:
        return kube.request("PATCH", PODGROUPS.format(namespace=namespace, name=name),
                            body={"metadata": {"annotations": dict(patch)}}, content_type=MERGE_PATCH)
    except TRANSPORT_ERRORS as exc:  # network trouble or a deleted PodGroup: asked again
        log.warning("annotating PodGroup %s failed: %s", job, exc)
        return None

