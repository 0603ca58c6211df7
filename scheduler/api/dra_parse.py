"""Layer `api`: `resource.k8s.io/v1` objects and a pod's claims, read once at the edge into `api/dra.py` values.

Every string is bounded, every number is an integer in range, every list is bounded (`api/dra.py` names the
bounds, as the v1 API validates them). An object that cannot be read is left out whole (`FieldError` carrying a
typed `FieldInvalid`, which the cache logs once): a slice left out offers no devices, a class or claim left out
makes the pods that need it wait with `ClaimMissing`/`DeviceClassMissing` — never a wrong placement.

Requests in the v1 shape (`requests[].exactly`) and in the v1beta1 shape (the same fields on the request itself)
are both read. `firstAvailable` (prioritized alternatives) is not supported yet: such a claim is refused here, so
its pods wait with a reason rather than get devices the user did not rank.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import ROUND_CEILING
from types import MappingProxyType
from typing import Any

from scheduler.api import dra as D, fields as F
from scheduler.api.field_parsers import BadValueError, FieldError, register, show
from scheduler.api.reasons import FieldInvalid
from scheduler.api.resources import QuantityError, parse_quantity
from scheduler.api.selectors import NodeSelectorTerm, node_selector_terms

NAME_MAX = 253
INT64 = 2**63 - 1
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


class _Reader:
    """Reads one object's fields; the first bad one raises FieldError with the object's kind, key and path."""

    def __init__(self, kind: str, where: str) -> None:
        self.kind, self.where = kind, where

    def bad(self, path: str, problem: str, value: object) -> FieldError:
        return FieldError(FieldInvalid(self.kind, self.where, path, problem, show(value)))

    def map(self, value: object, path: str, *, absent_ok: bool = True) -> Mapping[str, Any]:
        if value is None and absent_ok:
            return {}
        if not isinstance(value, Mapping):
            raise self.bad(path, "is not an object", value)
        return value

    def list(self, value: object, path: str, limit: int) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.bad(path, "is not a list", value)
        if len(value) > limit:
            raise self.bad(path, f"has more than {limit} items", len(value))
        return value

    def text(self, value: object, path: str, limit: int = NAME_MAX, *, required: bool = True) -> str:
        if value is None and not required:
            return ""
        if type(value) is not str or (required and not value) or len(value) > limit:
            raise self.bad(path, f"is not a non-empty string of at most {limit} characters", value)
        return value

    def integer(self, value: object, path: str, lo: int, hi: int, absent: int) -> int:
        if value is None:
            return absent
        if type(value) is not int or not lo <= value <= hi:
            raise self.bad(path, f"is not an integer in [{lo}, {hi}]", value)
        return value

    def boolean(self, value: object, path: str) -> bool:
        if value is None:
            return False
        if type(value) is not bool:
            raise self.bad(path, "is not a boolean", value)
        return value


_OPERATORS = frozenset(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"))
TERMS_MAX = 32  # terms of a node selector, requirements of a term, values of a requirement


def _node_selector(r: _Reader, value: object, path: str) -> tuple[NodeSelectorTerm, ...]:
    """A core/v1 NodeSelector, its shape checked and bounded before it is read."""
    selector = r.map(value, path, absent_ok=False)
    for i, term in enumerate(r.list(selector.get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms", TERMS_MAX)):
        tpath = f"{path}.nodeSelectorTerms[{i}]"
        t = r.map(term, tpath, absent_ok=False)
        for part in ("matchExpressions", "matchFields"):
            for j, req in enumerate(r.list(t.get(part), f"{tpath}.{part}", TERMS_MAX)):
                rpath = f"{tpath}.{part}[{j}]"
                q = r.map(req, rpath, absent_ok=False)
                r.text(q.get("key"), f"{rpath}.key", 317)
                operator = q.get("operator")
                if type(operator) is not str or operator not in _OPERATORS:
                    raise r.bad(f"{rpath}.operator", "is not a node selector operator", q.get("operator"))
                for v in r.list(q.get("values"), f"{rpath}.values", TERMS_MAX):
                    r.text(v, f"{rpath}.values", 63, required=False)
    return node_selector_terms(selector)


def _meta(r: _Reader, obj: Mapping[str, Any], *, namespaced: bool) -> tuple[str, str, Mapping[str, Any]]:
    meta = r.map(obj.get("metadata"), "metadata", absent_ok=False)
    name = r.text(meta.get("name"), "metadata.name")
    namespace = r.text(meta.get("namespace"), "metadata.namespace", 63) if namespaced else ""
    r.where = f"{namespace}/{name}" if namespaced else name
    return namespace, name, meta


def _name_part(r: _Reader, qualified: str, path: str) -> None:
    domain, _, ident = qualified.rpartition("/")
    if not ident or len(ident) > D.ATTR_NAME_MAX or len(domain) > D.DOMAIN_MAX:
        raise r.bad(path, "is not a qualified name (domain/id)", qualified)


def _attribute(r: _Reader, value: object, path: str) -> D.AttrValue:
    raw = r.map(value, path, absent_ok=False)
    if len(raw) != 1:
        raise r.bad(path, "sets not exactly one of bool, int, string, version", value)
    (kind, v), = raw.items()
    if kind == "bool":
        return r.boolean(v, f"{path}.bool")
    if kind == "int":
        return r.integer(v, f"{path}.int", -INT64 - 1, INT64, 0)
    if kind in ("string", "version"):
        limit = D.STRING_VALUE_MAX if kind == "string" else D.VERSION_VALUE_MAX
        return r.text(v, f"{path}.{kind}", limit, required=kind == "version")
    raise r.bad(path, "sets not exactly one of bool, int, string, version", value)


def _quantity(r: _Reader, value: object, path: str) -> int:
    raw = r.map(value, path, absent_ok=False)
    try:
        quantity = parse_quantity(raw.get("value"), field=path)
    except QuantityError as exc:
        raise r.bad(f"{path}.value", str(exc), raw.get("value")) from None
    if quantity < 0:
        raise r.bad(f"{path}.value", "is negative", raw.get("value"))
    return int(quantity.to_integral_value(rounding=ROUND_CEILING))


def _device(r: _Reader, raw: object, driver: str, path: str) -> D.Device:
    dev = r.map(raw, path, absent_ok=False)
    name = r.text(dev.get("name"), f"{path}.name", 63)
    if "basic" in dev:  # v1beta1 nested its fields under `basic`
        dev = r.map(dev.get("basic"), f"{path}.basic")
    attrs_raw = r.map(dev.get("attributes"), f"{path}.attributes")
    caps_raw = r.map(dev.get("capacity"), f"{path}.capacity")
    if len(attrs_raw) + len(caps_raw) > D.ATTRIBUTES_PER_DEVICE_MAX:
        raise r.bad(path, f"has more than {D.ATTRIBUTES_PER_DEVICE_MAX} attributes and capacities", name)
    attrs: dict[str, dict[str, D.AttrValue]] = {}
    for key, value in attrs_raw.items():
        key = r.text(key, f"{path}.attributes", 64 + 32)
        _name_part(r, key, f"{path}.attributes[{key}]")
        domain, ident = D.qualify(key, driver)
        attrs.setdefault(domain, {})[ident] = _attribute(r, value, f"{path}.attributes[{key}]")
    caps: dict[str, dict[str, int]] = {}
    for key, value in caps_raw.items():
        key = r.text(key, f"{path}.capacity", 64 + 32)
        _name_part(r, key, f"{path}.capacity[{key}]")
        domain, ident = D.qualify(key, driver)
        caps.setdefault(domain, {})[ident] = _quantity(r, value, f"{path}.capacity[{key}]")
    return D.Device(name, MappingProxyType({k: MappingProxyType(v) for k, v in attrs.items()}),
                    MappingProxyType({k: MappingProxyType(v) for k, v in caps.items()}))


def slice_from_object(obj: Mapping[str, Any]) -> D.ResourceSlice:
    """A ResourceSlice; FieldError leaves it out (its devices are offered nowhere)."""
    r = _Reader("ResourceSlice", "?")
    _, name, _ = _meta(r, obj, namespaced=False)
    spec = r.map(obj.get("spec"), "spec", absent_ok=False)
    driver = r.text(spec.get("driver"), "spec.driver", 63)
    pool = r.map(spec.get("pool"), "spec.pool", absent_ok=False)
    node_name = r.text(spec.get("nodeName"), "spec.nodeName", required=False)
    selector = spec.get("nodeSelector")
    all_nodes = r.boolean(spec.get("allNodes"), "spec.allNodes")
    if sum((bool(node_name), selector is not None, all_nodes)) != 1:
        raise r.bad("spec", "sets not exactly one of nodeName, nodeSelector, allNodes", sorted(spec))
    if spec.get("perDeviceNodeSelection"):
        raise r.bad("spec.perDeviceNodeSelection", "is not supported", True)
    terms = _node_selector(r, selector, "spec.nodeSelector") if selector is not None else ()
    devices = tuple(_device(r, d, driver, f"spec.devices[{i}]")
                    for i, d in enumerate(r.list(spec.get("devices"), "spec.devices", D.DEVICES_PER_SLICE_MAX)))
    if len({d.name for d in devices}) != len(devices):
        raise r.bad("spec.devices", "names a device twice", [d.name for d in devices])
    return D.ResourceSlice(
        name, driver, r.text(pool.get("name"), "spec.pool.name"),
        r.integer(pool.get("generation"), "spec.pool.generation", 0, INT64, 0),
        r.integer(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount", 1, INT64, 1),
        node_name, terms, all_nodes, devices)


def _selectors(r: _Reader, value: object, path: str) -> tuple[str, ...]:
    out = []
    for i, item in enumerate(r.list(value, path, D.SELECTORS_MAX)):
        sel = r.map(item, f"{path}[{i}]", absent_ok=False)
        cel = r.map(sel.get("cel"), f"{path}[{i}].cel", absent_ok=False)
        out.append(r.text(cel.get("expression"), f"{path}[{i}].cel.expression", D.CEL_MAX))
    return tuple(out)


def class_from_object(obj: Mapping[str, Any]) -> D.DeviceClass:
    r = _Reader("DeviceClass", "?")
    _, name, _ = _meta(r, obj, namespaced=False)
    spec = r.map(obj.get("spec"), "spec")
    return D.DeviceClass(name, _selectors(r, spec.get("selectors"), "spec.selectors"))


def _request(r: _Reader, raw: object, path: str) -> D.DeviceRequest:
    req = r.map(raw, path, absent_ok=False)
    name = r.text(req.get("name"), f"{path}.name", 63)
    if req.get("firstAvailable") is not None:
        raise r.bad(f"{path}.firstAvailable", "is not supported yet", name)
    if "exactly" in req:
        path = f"{path}.exactly"
        req = r.map(req.get("exactly"), path, absent_ok=False)
    mode = req.get("allocationMode") or D.EXACT_COUNT
    if mode not in (D.EXACT_COUNT, D.ALL):
        raise r.bad(f"{path}.allocationMode", "is not ExactCount or All", mode)
    count = r.integer(req.get("count"), f"{path}.count", 1, D.COUNT_MAX, 1)
    return D.DeviceRequest(name, r.text(req.get("deviceClassName"), f"{path}.deviceClassName"),
                           _selectors(r, req.get("selectors"), f"{path}.selectors"), mode,
                           count if mode == D.EXACT_COUNT else 0,
                           r.boolean(req.get("adminAccess"), f"{path}.adminAccess"))


def _claim_spec(r: _Reader, spec_raw: object, path: str) -> D.ClaimSpec:
    spec = r.map(spec_raw, path)
    devices = r.map(spec.get("devices"), f"{path}.devices")
    requests = tuple(_request(r, q, f"{path}.devices.requests[{i}]")
                     for i, q in enumerate(r.list(devices.get("requests"), f"{path}.devices.requests",
                                                  D.REQUESTS_MAX)))
    names = [q.name for q in requests]
    if len(set(names)) != len(names):
        raise r.bad(f"{path}.devices.requests", "names a request twice", names)
    constraints = []
    for i, c in enumerate(r.list(devices.get("constraints"), f"{path}.devices.constraints", D.CONSTRAINTS_MAX)):
        cpath = f"{path}.devices.constraints[{i}]"
        con = r.map(c, cpath, absent_ok=False)
        attribute = r.text(con.get("matchAttribute"), f"{cpath}.matchAttribute", 64 + 32)
        _name_part(r, attribute, f"{cpath}.matchAttribute")
        if "/" not in attribute:
            raise r.bad(f"{cpath}.matchAttribute", "is not fully qualified (domain/id)", attribute)
        covered = tuple(r.text(q, f"{cpath}.requests", 63)
                        for q in r.list(con.get("requests"), f"{cpath}.requests", D.REQUESTS_MAX))
        if any(q not in names for q in covered):
            raise r.bad(f"{cpath}.requests", "names a request the claim does not make", covered)
        constraints.append(D.MatchAttribute(attribute, covered))
    return D.ClaimSpec(requests, tuple(constraints))


def _allocation(r: _Reader, raw: object) -> D.Allocation | None:
    if raw is None:
        return None
    alloc = r.map(raw, "status.allocation")
    devices = r.map(alloc.get("devices"), "status.allocation.devices")
    results = []
    for i, item in enumerate(r.list(devices.get("results"), "status.allocation.devices.results", D.COUNT_MAX * 4)):
        path = f"status.allocation.devices.results[{i}]"
        res = r.map(item, path, absent_ok=False)
        results.append(D.DeviceResult(
            r.text(res.get("request"), f"{path}.request"),
            D.DeviceId(r.text(res.get("driver"), f"{path}.driver", 63), r.text(res.get("pool"), f"{path}.pool"),
                       r.text(res.get("device"), f"{path}.device", 63)),
            r.boolean(res.get("adminAccess"), f"{path}.adminAccess")))
    selector = alloc.get("nodeSelector")
    terms = _node_selector(r, selector, "status.allocation.nodeSelector") if selector is not None else ()
    node = ""
    if len(terms) == 1 and not terms[0].match_expressions and len(terms[0].match_fields) == 1:
        field = terms[0].match_fields[0]  # the one-node selector the allocator writes for node-local devices
        if field.key == "metadata.name" and field.operator == "In" and len(field.values) == 1:
            node, terms = field.values[0], ()
    return D.Allocation(tuple(results), node, terms)


def claim_from_object(obj: Mapping[str, Any]) -> D.ResourceClaim:
    r = _Reader("ResourceClaim", "?")
    namespace, name, meta = _meta(r, obj, namespaced=True)
    uid = r.text(meta.get("uid"), "metadata.uid", 128, required=False)
    owner = ""
    for i, ref in enumerate(r.list(meta.get("ownerReferences"), "metadata.ownerReferences", 64)):
        ref = r.map(ref, f"metadata.ownerReferences[{i}]")
        if ref.get("kind") == "Pod" and ref.get("controller") is True:
            owner = r.text(ref.get("uid"), f"metadata.ownerReferences[{i}].uid", 128)
    spec = _claim_spec(r, obj.get("spec"), "spec")
    status = r.map(obj.get("status"), "status")
    consumers = []
    for i, item in enumerate(r.list(status.get("reservedFor"), "status.reservedFor", D.RESERVED_FOR_MAX)):
        path = f"status.reservedFor[{i}]"
        ref = r.map(item, path, absent_ok=False)
        consumers.append(D.Consumer(r.text(ref.get("resource"), f"{path}.resource", 63),
                                    r.text(ref.get("name"), f"{path}.name"),
                                    r.text(ref.get("uid"), f"{path}.uid", 128),
                                    r.text(ref.get("apiGroup"), f"{path}.apiGroup", required=False)))
    return D.ResourceClaim(namespace, name, uid, spec, _allocation(r, status.get("allocation")),
                           tuple(consumers), meta.get("deletionTimestamp") is not None, owner)


def template_from_object(obj: Mapping[str, Any]) -> D.ResourceClaimTemplate:
    r = _Reader("ResourceClaimTemplate", "?")
    namespace, name, _ = _meta(r, obj, namespaced=True)
    spec = r.map(obj.get("spec"), "spec")
    return D.ResourceClaimTemplate(namespace, name, _claim_spec(r, spec.get("spec"), "spec.spec"))


def _pod_claims(r: _Reader, raw: object, base: str) -> tuple[D.PodClaim, ...]:
    claims = []
    for i, item in enumerate(r.list(raw, base, D.POD_CLAIMS_MAX)):
        path = f"{base}[{i}]"
        c = r.map(item, path, absent_ok=False)
        claim = r.text(c.get("resourceClaimName"), f"{path}.resourceClaimName", required=False)
        template = r.text(c.get("resourceClaimTemplateName"), f"{path}.resourceClaimTemplateName", required=False)
        if bool(claim) == bool(template):
            raise r.bad(path, "sets not exactly one of resourceClaimName, resourceClaimTemplateName", c)
        claims.append(D.PodClaim(r.text(c.get("name"), f"{path}.name", 63), claim, template))
    names = [c.name for c in claims]
    if len(set(names)) != len(names):
        raise r.bad(base, "names a claim twice", names)
    return tuple(claims)


def _claim_statuses(r: _Reader, raw: object, base: str) -> tuple[tuple[str, str], ...]:
    generated = []
    for i, item in enumerate(r.list(raw, base, D.POD_CLAIMS_MAX)):
        path = f"{base}[{i}]"
        s = r.map(item, path, absent_ok=False)
        made = r.text(s.get("resourceClaimName"), f"{path}.resourceClaimName", required=False)
        if made:
            generated.append((r.text(s.get("name"), f"{path}.name", 63), made))
    return tuple(generated)


def pod_claims_from_object(pod: Mapping[str, Any]) -> D.PodClaims:
    """A pod's `spec.resourceClaims` and `status.resourceClaimStatuses`; FieldError: the pod cannot be placed
    (the claims it needs are unknown)."""
    r = _Reader("Pod", "?")
    _meta(r, pod, namespaced=True)
    spec = r.map(pod.get("spec"), "spec")
    status = r.map(pod.get("status"), "status")
    return D.PodClaims(_pod_claims(r, spec.get("resourceClaims"), "spec.resourceClaims"),
                       _claim_statuses(r, status.get("resourceClaimStatuses"), "status.resourceClaimStatuses"))


def _as_bad_value(read: Any) -> Any:
    """A reader for the field table (`api/fields.py`, `registered`): its refusal as BadValueError, with the path
    inside the field."""

    def check(raw: Any) -> Any:
        try:
            return read(_Reader("Pod", ""), raw, "")
        except FieldError as err:
            raise BadValueError(f"{err.reason.path or 'the list'} {err.reason.problem}") from None

    return check


register("pod_resource_claims", _as_bad_value(_pod_claims))
register("pod_claim_statuses", _as_bad_value(_claim_statuses))

F_RESOURCE_CLAIMS = F.field("Pod", "spec.resourceClaims")
F_CLAIM_STATUSES = F.field("Pod", "status.resourceClaimStatuses")


def device_claims_of(pod: Mapping[str, Any], spec: Mapping[str, Any], where: str = "",
                     sink: list[F.FieldInvalid] | None = None) -> D.PodClaims | None:
    """The pod's DRA claims (`spec.resourceClaims`) and the names of those made for it from templates
    (`status.resourceClaimStatuses`); None when it names none (nearly every pod: two lookups). An unreadable one
    leaves the pod out (its devices are unknown)."""
    claims, status = spec.get("resourceClaims"), pod.get("status")
    statuses = status.get("resourceClaimStatuses") if isinstance(status, Mapping) else None
    if claims is None and statuses is None:
        return None
    made = D.PodClaims(F_RESOURCE_CLAIMS.read(claims, where, sink), F_CLAIM_STATUSES.read(statuses, where, sink))
    return made if made.claims else None
