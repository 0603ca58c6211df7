"""Who may read `/metrics` when it is served securely (`--metrics-secure`): Kubernetes decides, as
controller-runtime's secure metrics do (`pkg/metrics/filters`, WithAuthenticationAndAuthorization).

A request's bearer token goes to a TokenReview (authentication.k8s.io/v1); the user it names goes to a
SubjectAccessReview (authorization.k8s.io/v1) for the non-resource URL of the request (`get /metrics`), so the
scraper needs a ClusterRole rule `nonResourceURLs: [/metrics], verbs: [get]`, and this process needs
`create` on tokenreviews and subjectaccessreviews. The answers are those of controller-runtime's filter:

- no bearer token, or one the apiserver does not authenticate: 401;
- a user the apiserver does not authorize: 403;
- a review that could not be made (the apiserver unreachable, an answer that is no review): 500, not cached, so
  the next scrape asks again.

Both answers, positive and negative, are kept for `ttl` seconds (10 by default, much less than
controller-runtime's 1 and 5 minutes, so a revoked binding takes effect soon) in bounded LRU maps, so a scrape
every 15 s costs at most a TokenReview and a SubjectAccessReview. The token itself is never kept: the cache is
keyed by its SHA-256. At most `max_inflight` reviews run at once, so a flood of made-up tokens costs the apiserver
that many calls at a time, not one per connection.

Layer: metrics. The calls to the apiserver come in as a function (`ReviewPost`), so this module needs no client.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

log = logging.getLogger("volcano_py.metrics")

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

MAX_TOKEN = 16 * 1024  # service-account tokens are ~1 KiB; OIDC tokens a few KiB
MAX_NAME = 1024  # a user name, uid, group or extra value the apiserver hands back
MAX_ITEMS = 256  # groups, extra keys, values of one extra key

# (path, body) -> the review the apiserver returned, with its `status`; raises on a failed call.
ReviewPost = Callable[[str, Mapping[str, Any]], Mapping[str, Any]]


class ReviewError(Exception):
    """A review that could not be made or whose answer is no review."""


@dataclass(frozen=True, slots=True)
class User:
    """The user a TokenReview names, as a SubjectAccessReview takes it back."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to answer: 200 (serve the page), 401, 403, 500 or 503, and the text of a refusal."""

    status: int
    message: str = ""
    user: str = ""

    @property
    def allowed(self) -> bool:
        return self.status == 200


def bearer_token(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (the scheme in any case, as client-go's
    bearertoken authenticator reads it), None for none, an empty one, a non-ASCII one or one over MAX_TOKEN."""
    if not header:
        return None
    parts = header.strip().split(" ", 1)
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return None
    token = parts[1].strip()
    if not token or len(token) > MAX_TOKEN or not token.isascii() or not token.isprintable():
        return None
    return token


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_NAME:
        raise ReviewError(f"{what}: expected a string of at most {MAX_NAME} characters")
    return value


def _texts(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_ITEMS:
        raise ReviewError(f"{what}: expected a list of at most {MAX_ITEMS} strings")
    return tuple(_text(v, what) for v in value)


def parse_token_review(review: Mapping[str, Any]) -> User | None:
    """The user a TokenReview's status authenticates, None when it does not; ReviewError for an answer that
    is no TokenReview status."""
    status = review.get("status") if isinstance(review, Mapping) else None
    if not isinstance(status, Mapping):
        raise ReviewError("the TokenReview has no status")
    if status.get("authenticated") is not True:
        return None
    user = status.get("user")
    if not isinstance(user, Mapping):
        raise ReviewError("an authenticated TokenReview names no user")
    name = _text(user.get("username"), "status.user.username")
    if not name:
        return None
    extra_in = user.get("extra") or {}
    if not isinstance(extra_in, Mapping) or len(extra_in) > MAX_ITEMS:
        raise ReviewError("status.user.extra: expected a map of lists of strings")
    extra = tuple(sorted((_text(k, "status.user.extra"), _texts(v, "status.user.extra")) for k, v in extra_in.items()))
    return User(name, _text(user.get("uid") or "", "status.user.uid"),
                _texts(user.get("groups"), "status.user.groups"), extra)


def parse_access_review(review: Mapping[str, Any]) -> tuple[bool, str]:
    """(allowed, reason) of a SubjectAccessReview's status; ReviewError for an answer that is none."""
    status = review.get("status") if isinstance(review, Mapping) else None
    if not isinstance(status, Mapping) or not isinstance(status.get("allowed"), bool):
        raise ReviewError("the SubjectAccessReview has no status.allowed")
    reason = status.get("reason")
    reason = reason[:MAX_NAME] if isinstance(reason, str) else ""
    return bool(status["allowed"]) and status.get("denied") is not True, reason


def token_review(token: str) -> dict[str, Any]:
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}


def access_review(user: User, path: str, verb: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"user": user.name, "nonResourceAttributes": {"path": path, "verb": verb}}
    if user.uid:
        spec["uid"] = user.uid
    if user.groups:
        spec["groups"] = list(user.groups)
    if user.extra:
        spec["extra"] = {k: list(v) for k, v in user.extra}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


K = TypeVar("K")
V = TypeVar("V")


class TTLCache(Generic[K, V]):
    """At most `size` answers, each for `ttl` seconds; the least recently used goes first."""

    def __init__(self, ttl: float, size: int, clock: Callable[[], float]):
        self.ttl, self.size, self.clock = ttl, max(1, size), clock
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> tuple[bool, V | None]:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return False, None
            if item[0] <= self.clock():
                del self._items[key]
                return False, None
            self._items.move_to_end(key)
            return True, item[1]

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = (self.clock() + self.ttl, value)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class MetricsAuth:
    """Authenticates and authorizes one request to a guarded path (`check`)."""

    def __init__(self, post: ReviewPost, *, ttl: float = 10.0, size: int = 1024, max_inflight: int = 8,
                 wait: float = 5.0, clock: Callable[[], float] = time.monotonic):
        self.post = post
        self.users: TTLCache[bytes, User | None] = TTLCache(ttl, size, clock)
        self.decisions: TTLCache[tuple[User, str, str], tuple[bool, str]] = TTLCache(ttl, size, clock)
        self._inflight = threading.BoundedSemaphore(max(1, max_inflight))
        self.wait = wait
        self.calls = 0  # reviews sent to the apiserver (for tests and debugging)

    def check(self, authorization: str | None, path: str, verb: str = "get") -> Verdict:
        token = bearer_token(authorization)
        if token is None:
            return Verdict(401, "Unauthorized")
        key = hashlib.sha256(token.encode()).digest()
        stage = "Authentication"
        try:
            found, user = self.users.get(key)
            if not found:
                user = parse_token_review(self._post(TOKEN_REVIEWS, token_review(token)))
                self.users.put(key, user)
            if user is None:
                return Verdict(401, "Unauthorized")
            stage = "Authorization"
            found, decision = self.decisions.get((user, path, verb))
            if not found or decision is None:
                decision = parse_access_review(self._post(ACCESS_REVIEWS, access_review(user, path, verb)))
                self.decisions.put((user, path, verb), decision)
        except _BusyError:
            return Verdict(503, "too many authentication reviews in progress")
        except Exception as exc:  # the apiserver unreachable or a bad answer: 500, said once here
            log.debug("%s for %s: the traceback", stage, path, exc_info=True)
            log.warning("%s for %s failed: %s: %s", stage, path, type(exc).__name__, exc)
            return Verdict(500, f"{stage} failed")
        allowed, reason = decision
        if not allowed:
            log.debug("%s %s denied to %s: %s", verb, path, user.name, reason)
            return Verdict(403, f"Authorization denied for user {user.name}", user.name)
        return Verdict(200, user=user.name)

    def _post(self, path: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        if not self._inflight.acquire(timeout=self.wait):
            raise _BusyError
        try:
            self.calls += 1
            return self.post(path, body)
        finally:
            self._inflight.release()


class _BusyError(Exception):
    pass
