"""Label and field selectors as Kubernetes parses them (apimachinery pkg/labels/selector.go `Parse`,
pkg/fields/selector.go `ParseSelector`), and the fields each kind may be selected on (the apiserver's
`GetAttrs`/field label conversion: an unknown field is a 400 "field label not supported")."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


class SelectorError(ValueError):
    """A selector the apiserver would refuse (400 Bad Request)."""


# The fields the apiserver lets a list or watch select on, per resource, besides metadata.name and
# metadata.namespace (pkg/registry/core/pod/strategy.go PodToSelectableFields, node/strategy.go, event/strategy.go).
FIELDS: dict[str, dict[str, Callable[[Mapping[str, Any]], str]]] = {
    "pods": {
        "spec.nodeName": lambda o: str((o.get("spec") or {}).get("nodeName") or ""),
        "spec.schedulerName": lambda o: str((o.get("spec") or {}).get("schedulerName") or ""),
        "spec.restartPolicy": lambda o: str((o.get("spec") or {}).get("restartPolicy") or ""),
        "spec.serviceAccountName": lambda o: str((o.get("spec") or {}).get("serviceAccountName") or ""),
        "spec.hostNetwork": lambda o: "true" if (o.get("spec") or {}).get("hostNetwork") else "false",
        "status.phase": lambda o: str((o.get("status") or {}).get("phase") or ""),
        "status.podIP": lambda o: str((o.get("status") or {}).get("podIP") or ""),
        "status.nominatedNodeName": lambda o: str((o.get("status") or {}).get("nominatedNodeName") or ""),
    },
    "nodes": {
        "spec.unschedulable": lambda o: "true" if (o.get("spec") or {}).get("unschedulable") else "false",
    },
}


def field_values(resource: str, obj: Mapping[str, Any]) -> dict[str, str]:
    """Every selectable field of `obj` as the apiserver would match it."""
    meta = obj.get("metadata") or {}
    values = {"metadata.name": str(meta.get("name") or ""), "metadata.namespace": str(meta.get("namespace") or "")}
    for name, get in FIELDS.get(resource, {}).items():
        values[name] = get(obj)
    return values


# ---- field selectors ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FieldTerm:
    field: str
    op: str  # "=" or "!="
    value: str


def _split_unescaped(text: str, sep: str) -> list[str]:
    """Split on `sep` not preceded by a backslash (fields.splitTerms)."""
    parts, current, escaped = [], [], False
    for ch in text:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if escaped:
        raise SelectorError(f"invalid field selector {text!r}: a trailing backslash")
    parts.append("".join(current))
    return parts


def _unescape(value: str) -> str:
    """fields.UnescapeValue: only `\\\\`, `\\,` and `\\=` are escapes; anything else after a backslash is an error."""
    out, i = [], 0
    while i < len(value):
        ch = value[i]
        if ch == "\\":
            if i + 1 >= len(value) or value[i + 1] not in "\\,=":
                raise SelectorError(f"invalid field selector value {value!r}: an invalid escape sequence")
            out.append(value[i + 1])
            i += 2
            continue
        if ch in ",=":
            raise SelectorError(f"invalid field selector value {value!r}: an unescaped {ch!r}")
        out.append(ch)
        i += 1
    return "".join(out)


def parse_fields(text: str, resource: str) -> tuple[FieldTerm, ...]:
    """A field selector: terms joined by commas, each `f=v`, `f==v` or `f!=v`; every field must be one the
    resource supports (else the apiserver's 400)."""
    if not text:
        return ()
    terms = []
    for raw in _split_unescaped(text, ","):
        if not raw:
            continue
        for op in ("!=", "==", "="):
            at = raw.find(op)
            if at > 0:
                field, value = raw[:at], raw[at + len(op):]
                terms.append(FieldTerm(field, "!=" if op == "!=" else "=", _unescape(value)))
                break
        else:
            raise SelectorError(f"invalid selector: '{raw}'; can't understand '{raw}'")
    allowed = {"metadata.name", "metadata.namespace", *FIELDS.get(resource, {})}
    for term in terms:
        if term.field not in allowed:
            raise SelectorError(f'field label not supported: {term.field}')
    return tuple(terms)


def fields_match(terms: tuple[FieldTerm, ...], values: Mapping[str, str]) -> bool:
    return all((values.get(t.field, "") == t.value) == (t.op == "=") for t in terms)


# ---- label selectors ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LabelTerm:
    key: str
    op: str  # =, !=, in, notin, exists, !, gt, lt
    values: tuple[str, ...]


_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                  r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_TOKEN = re.compile(r"\s*(\(|\)|,|!=|==|=|!|>|<|[^\s(),!=<>]+)")


def _tokens(text: str) -> list[str]:
    out, at = [], 0
    while at < len(text):
        if text[at:].strip() == "":
            break
        m = _TOKEN.match(text, at)
        if m is None:  # pragma: no cover - the pattern takes every non-space character
            raise SelectorError(f"unable to parse requirement: {text!r}")
        out.append(m.group(1))
        at = m.end()
    return out


def _key(tok: str) -> str:
    if not _KEY.match(tok) or len(tok.rsplit("/", 1)[-1]) > 63:
        raise SelectorError(f"unable to parse requirement: invalid label key {tok!r}")
    return tok


def _value(tok: str) -> str:
    if not _VALUE.match(tok):
        raise SelectorError(f"unable to parse requirement: invalid label value {tok!r}")
    return tok


def parse_labels(text: str) -> tuple[LabelTerm, ...]:
    """labels.Parse: `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k>n`, `k<n`, joined by
    commas (a comma inside parentheses separates values)."""
    toks = _tokens(text)
    terms: list[LabelTerm] = []
    i = 0

    def need(n: int) -> str:
        if i + n >= len(toks):
            raise SelectorError(f"unable to parse requirement: {text!r} ends early")
        return toks[i + n]

    while i < len(toks):
        if toks[i] == "!":
            terms.append(LabelTerm(_key(need(1)), "!", ()))
            i += 2
        else:
            key = _key(toks[i])
            nxt = toks[i + 1] if i + 1 < len(toks) else ","
            if nxt == ",":
                terms.append(LabelTerm(key, "exists", ()))
                i += 1
            elif nxt in ("=", "==", "!="):
                raw = toks[i + 2] if i + 2 < len(toks) else ","  # `k=` (end or comma): the empty value
                terms.append(LabelTerm(key, "!=" if nxt == "!=" else "=", ("" if raw == "," else _value(raw),)))
                i += 2 if raw == "," else 3
            elif nxt in (">", "<"):
                value = need(2)
                try:
                    int(value)
                except ValueError:
                    raise SelectorError(f"unable to parse requirement: {value!r} is not an integer") from None
                terms.append(LabelTerm(key, "gt" if nxt == ">" else "lt", (value,)))
                i += 3
            elif nxt in ("in", "notin"):
                if need(2) != "(":
                    raise SelectorError(f"unable to parse requirement: expected '(' after {nxt}")
                i += 3
                values: list[str] = []
                while True:
                    tok = need(0)
                    if tok == ")":
                        i += 1
                        break
                    if tok == ",":
                        i += 1
                        continue
                    values.append(_value(tok))
                    i += 1
                if not values and nxt == "in":
                    raise SelectorError("unable to parse requirement: for 'in', 'notin' operators, values set "
                                        "can't be empty")
                terms.append(LabelTerm(key, nxt, tuple(values)))
            else:
                raise SelectorError(f"unable to parse requirement: unexpected {nxt!r} after {key!r}")
        if i < len(toks):
            if toks[i] != ",":
                raise SelectorError(f"unable to parse requirement: expected ',' before {toks[i]!r}")
            i += 1
    return tuple(terms)


def labels_match(terms: tuple[LabelTerm, ...], labels: Mapping[str, str]) -> bool:
    for t in terms:
        have = t.key in labels
        value = labels.get(t.key, "")
        if t.op == "exists":
            ok = have
        elif t.op == "!":
            ok = not have
        elif t.op == "=":
            ok = have and value == t.values[0]
        elif t.op == "!=":
            ok = not have or value != t.values[0]  # as Kubernetes: a missing label is "not equal"
        elif t.op == "in":
            ok = have and value in t.values
        elif t.op == "notin":
            ok = not have or value not in t.values
        else:  # gt, lt: the label must hold an integer
            try:
                number = int(value)
            except ValueError:
                return False
            ok = have and (number > int(t.values[0]) if t.op == "gt" else number < int(t.values[0]))
        if not ok:
            return False
    return True


@dataclass(frozen=True, slots=True)
class Selector:
    """A list's or watch's selection: both selectors, AND-ed."""

    labels: tuple[LabelTerm, ...] = ()
    fields: tuple[FieldTerm, ...] = ()

    @property
    def everything(self) -> bool:
        return not self.labels and not self.fields

    def matches(self, labels: Mapping[str, str], fields: Mapping[str, str]) -> bool:
        return labels_match(self.labels, labels) and fields_match(self.fields, fields)


def parse_selector(label_text: str, field_text: str, resource: str) -> Selector:
    return Selector(parse_labels(label_text), parse_fields(field_text, resource))
