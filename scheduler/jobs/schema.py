"""A Volcano Job, PodGroup or Queue checked against its CRD's OpenAPI schema, as the apiserver checks it. Layer: jobs.

The schema is the one `crds/batch.volcano.sh_jobs.yaml` installs (shipped in the package as `scheduler/crds`),
read with the `jsonschema` library after two Kubernetes extensions are mapped to JSON Schema:
`x-kubernetes-int-or-string` (an integer or a string) and `nullable`. The CEL rules of the CRD
(`x-kubernetes-validations`) are not evaluated here: `validate.validate_job` makes the same checks.

`schema_problems` returns what the apiserver would refuse (a string where an integer goes, `2.5` replicas);
`unknown_fields` what `kubectl apply --validate=strict` refuses against Volcano's own CRD, which lists every
field: a key the schema does not name, such as a misspelt `minAvailabel`. (Our CRD keeps unknown fields,
`x-kubernetes-preserve-unknown-fields`, so that Volcano's newer fields survive an upgrade; it names every field
of Volcano's.) Pod templates and PVC specs are Kubernetes' schemas and are not looked into.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml
from jsonschema import Draft202012Validator

JOB_CRD = "batch.volcano.sh_jobs.yaml"
PODGROUP_CRD = "scheduling.volcano.sh_podgroups.yaml"
QUEUE_CRD = "scheduling.volcano.sh_queues.yaml"
_OPAQUE = frozenset({"template", "volumeClaim"})  # a pod template, a PVC spec: Kubernetes' schemas, not this CRD's


def _to_json_schema(node: Any) -> Any:
    if isinstance(node, list):
        return [_to_json_schema(n) for n in node]
    if not isinstance(node, Mapping):
        return node
    out = {k: _to_json_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes-") and k != "nullable"}
    if node.get("x-kubernetes-int-or-string"):
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


@functools.cache
def _crd_schema(crd: str) -> Mapping[str, Any]:
    text = resources.files("scheduler").joinpath("crds", crd).read_text()
    doc = yaml.safe_load(text)
    (version,) = [v for v in doc["spec"]["versions"] if v.get("storage")]
    schema: Mapping[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


@functools.cache
def _validator(crd: str) -> Draft202012Validator:
    return Draft202012Validator(_to_json_schema(_crd_schema(crd)))


def _path(parts: Iterator[str | int] | Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the object)"


@dataclass(frozen=True, slots=True)
class FieldProblem:
    path: str  # `spec.tasks[0].replicas`
    problem: str
    rule: str  # the schema keyword broken (`type`, `required`, `minimum`, ...) or `unknown` for an unknown field

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


def schema_problems(obj: Mapping[str, Any], crd: str = JOB_CRD) -> list[FieldProblem]:
    """Each schema violation with the field it is about, in field order."""
    errors = sorted(_validator(crd).iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
    return [FieldProblem(_path(e.absolute_path), e.message, str(e.validator)) for e in errors]


def unknown_fields(obj: Mapping[str, Any], crd: str = JOB_CRD) -> list[FieldProblem]:
    """The keys the CRD's schema does not name (outside pod templates and PVC specs)."""
    found: list[str] = []
    _walk(obj, _crd_schema(crd), "", found)
    return [FieldProblem(path, "unknown field", "unknown") for path in found]


def _walk(value: Any, schema: Mapping[str, Any], path: str, found: list[str]) -> None:
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            _walk(item, schema["items"], f"{path}[{i}]", found)
        return
    if not isinstance(value, Mapping):
        return
    properties = schema.get("properties")
    if properties is None:  # a map (additionalProperties), metadata, or an object kept whole
        return
    for key, item in value.items():
        where = f"{path}.{key}" if path else str(key)
        if key not in properties:
            found.append(where)
        elif key not in _OPAQUE:
            _walk(item, properties[key], where, found)
