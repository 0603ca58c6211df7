"""Layer `cache`: the Kubernetes client every volcano-py command talks through.

`api_client` loads the kubeconfig (or the in-cluster config), applies Volcano's `--master` and
`--kube-api-qps`/`--kube-api-burst` (client-go's token bucket), and keeps a kubeconfig's `tokenFile` fresh: the
official client reads the file once, so a rotated token (a projected service-account token, renewed by the
kubelet) would leave a long-running process sending a revoked one for ever. The file is read again when it
changes, looked at once a second at most (client-go re-reads it every minute: transport/token_source.go); the
in-cluster config already re-reads its token every minute.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("volcano_py.cache")

TOKEN_CHECK_EVERY = 1.0  # seconds between looks at a tokenFile
MAX_TOKEN_BYTES = 64 * 1024  # a service-account token is about 1 KiB


class KubeconfigError(Exception):
    """No usable kubeconfig or in-cluster config: said in one line, exit 1 (no cluster to talk to, as the day-two
    commands say it)."""


class TokenBucket:
    """client-go's client-side rate limit (flowcontrol.NewTokenBucketRateLimiter): up to `burst` requests at
    once, refilled at `qps` a second; `take()` waits for a token."""

    def __init__(self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.qps, self.burst = qps, max(1, burst)
        self.clock, self.sleep = clock, sleep
        self._tokens, self._at = float(self.burst), clock()
        self._lock = threading.Lock()

    def take(self) -> None:
        with self._lock:  # a token is reserved under the lock; the wait for it happens outside
            now = self.clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
            self._at = now
            self._tokens -= 1.0
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if wait > 0:
            self.sleep(wait)


class _RateLimitedPool:
    """The client's connection pool, each request taking a token first (watches count once, at their start)."""

    def __init__(self, pool: Any, bucket: TokenBucket):
        self.inner, self.before_request = pool, bucket.take  # the lean transport takes a token per request too

    def request(self, *args: Any, **kwargs: Any) -> Any:
        self.before_request()
        return self.inner.request(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def api_client(kubeconfig: str | None, *, master: str | None = None,
               rate_limit: tuple[float, int] | None = None) -> Any:
    """An ApiClient for `kubeconfig` (else $KUBECONFIG, else in-cluster when run in a pod, else ~/.kube/config)."""
    import yaml
    from kubernetes import client, config

    cfg = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    in_cluster = kubeconfig is None and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
    try:
        if in_cluster:
            config.load_incluster_config(client_configuration=cfg)
        else:
            config.load_kube_config(config_file=path, client_configuration=cfg)
            token_file = kubeconfig_token_file(path or os.path.expanduser("~/.kube/config"))
            if token_file is not None:
                keep_token_fresh(cfg, token_file)
    except (config.ConfigException, OSError, ValueError, yaml.YAMLError) as exc:
        where = "the in-cluster config" if in_cluster else f"the kubeconfig {path or '~/.kube/config'}"
        detail = " ".join(str(exc).split())  # a YAML error's lines, in one
        raise KubeconfigError(f"cannot load {where}: {detail}") from None
    steady_refresh(cfg, master=master)
    cfg.connection_pool_maxsize = 64
    api = client.ApiClient(cfg)
    if rate_limit is not None:
        limited = _RateLimitedPool(api.rest_client.pool_manager, TokenBucket(*rate_limit))
        api.rest_client.pool_manager = limited  # type: ignore[assignment]  # Kube calls only .request
    return api


def kubeconfig_token_file(path: str) -> str | None:
    """The current context's user's `tokenFile` (relative to the kubeconfig's folder), if it names one."""
    import yaml

    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f) or {}
    if not isinstance(doc, dict):
        return None
    context = next((c.get("context") or {} for c in doc.get("contexts") or ()
                    if isinstance(c, dict) and c.get("name") == doc.get("current-context")), {})
    user = next((u.get("user") or {} for u in doc.get("users") or ()
                 if isinstance(u, dict) and u.get("name") == context.get("user")), {})
    token_file = user.get("tokenFile") if isinstance(user, dict) else None
    if not isinstance(token_file, str) or not token_file:
        return None
    return os.path.join(os.path.dirname(os.path.abspath(path)), token_file)


def keep_token_fresh(cfg: Any, token_file: str, *, clock: Callable[[], float] = time.monotonic) -> None:
    """Re-read `token_file` into `cfg` when it changes (by inode and mtime), looked at once a second at most.
    The client asks for the header of every request through `refresh_api_key_hook`; kopf asks `cfg` again on a
    401 (scheduler/controllers/operator.py)."""
    lock = threading.Lock()
    state: dict[str, Any] = {"at": clock(), "seen": _identity(token_file)}
    token = _read_token(token_file)
    if token:  # read as the refresh reads it: trimmed (the loader keeps a trailing newline in the header)
        cfg.api_key["BearerToken"] = f"Bearer {token}"

    def refresh(configuration: Any) -> None:
        now = clock()
        if now - state["at"] >= TOKEN_CHECK_EVERY:
            with lock:
                state["at"] = now
                seen = _identity(token_file)
                if seen is not None and seen != state["seen"]:
                    token = _read_token(token_file)
                    if token:
                        configuration.api_key["BearerToken"] = f"Bearer {token}"
                        state["seen"] = seen
                        log.info("read the rotated token in %s", token_file)

    # In place of the loader's own hook, which only sets the token it read at start again (and sets itself again):
    # a user with a tokenFile has no expiring exec or OIDC credentials for it to renew.
    cfg.refresh_api_key_hook = refresh


def steady_refresh(cfg: Any, *, master: str | None = None, clock: Callable[[], float] = time.monotonic) -> None:
    """Make the client's per-request credential hook cheap and keep Volcano's `--master` over the kubeconfig.

    The official client calls `refresh_api_key_hook` for the header of every request. The kubeconfig loader's
    hook sets the token, the server and the TLS settings of the kubeconfig again each time (~70 us of every bind
    on this machine), and so silently puts the kubeconfig's server back in place of `--master` from the first
    request on; it also sets itself again as the hook. Here whatever hook is set (the loader's, or
    `keep_token_fresh`'s) runs at most once every TOKEN_CHECK_EVERY seconds, `master` is set again after it, and
    this wrapper stays the hook. The loader renews an expiring credential 5 minutes before its expiry
    (kubernetes/config/kube_config.py), so a second's delay never sends an expired one."""
    if master:  # Volcano's --master overrides the kubeconfig's server
        cfg.host = master.rstrip("/")
    inner = cfg.refresh_api_key_hook
    if inner is None:
        return
    lock = threading.Lock()
    state = {"at": float("-inf")}

    def refresh(configuration: Any) -> None:
        now = clock()
        if now - state["at"] < TOKEN_CHECK_EVERY:
            return
        with lock:
            state["at"] = now
            try:
                inner(configuration)  # may fail (an exec credential plugin that cannot run): the request fails
            finally:  # and whatever the hook set before failing, this wrapper and --master stay
                configuration.refresh_api_key_hook = refresh  # (the loader's hook puts itself back)
                if master:
                    configuration.host = master.rstrip("/")

    cfg.refresh_api_key_hook = refresh


def _identity(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _read_token(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_TOKEN_BYTES + 1)
    except OSError as exc:
        log.warning("cannot read the token file %s: %s; keeping the token in use", path, exc)
        return None
    text = data.decode("ascii", "replace").strip() if len(data) <= MAX_TOKEN_BYTES else ""
    if not text:
        log.warning("the token file %s is empty or too large; keeping the token in use", path)
    return text or None
