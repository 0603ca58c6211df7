"""The client's per-request credential hook (scheduler/cache/client.py `steady_refresh`).

The official client asks `refresh_api_key_hook` for every request's header. The kubeconfig loader's hook sets the
kubeconfig's token, server and TLS settings again each time: it cost ~70 us of every bind, and it put the
kubeconfig's server back in place of Volcano's `--master` from the first request on (the scheduler and the ctl
commands sent everything to the kubeconfig's server whatever `--master` said)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from scheduler.cache.client import TOKEN_CHECK_EVERY, api_client, steady_refresh
from scheduler.cache.kube import Kube
from scheduler.cli.ctl import connect

KUBECONFIG_SERVER = "https://127.0.0.1:6443"
MASTER = "https://10.0.0.9:7443"
BIND = "/api/v1/namespaces/a/pods/b/binding"


def token_kubeconfig(tmp_path: Path, token: str = "abc") -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": KUBECONFIG_SERVER, "insecure-skip-tls-verify": True}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": token}}],
    }))
    return str(path)


def test_the_scheduler_client_sends_every_request_to_master(tmp_path: Path) -> None:
    kube = Kube(api_client(token_kubeconfig(tmp_path), master=MASTER + "/"))
    for _ in range(3):  # the first request ran the loader's hook, which set the kubeconfig's server again
        url, headers, _ = kube._prepare("POST", BIND, None, {"kind": "Binding"}, None)
        assert url == MASTER + BIND
        assert headers["authorization"] == "Bearer abc"
    kube.api.close()


def test_the_ctl_client_sends_every_request_to_master(tmp_path: Path) -> None:
    args = argparse.Namespace(kubeconfig=token_kubeconfig(tmp_path), master=MASTER, context=None,
                              request_timeout=5.0)
    kube = connect.kube(args)
    for _ in range(3):
        url, _, _ = kube._prepare("GET", "/api/v1/nodes", {"limit": 5}, None, None)
        assert url == MASTER + "/api/v1/nodes?limit=5"
    kube.api.close()


@pytest.mark.parametrize("master", [None, MASTER])
def test_the_loaders_hook_runs_once_a_second_at_most_and_stays_wrapped(tmp_path: Path, master: str | None) -> None:
    cfg = client.Configuration()
    config.load_kube_config(config_file=token_kubeconfig(tmp_path), client_configuration=cfg)
    loader = cfg.refresh_api_key_hook
    calls = []

    def counted(configuration: client.Configuration) -> None:
        calls.append(configuration.host)
        loader(configuration)  # (sets the kubeconfig's token and server, and itself as the hook)

    cfg.refresh_api_key_hook = counted
    now = [100.0]
    steady_refresh(cfg, master=master, clock=lambda: now[0])
    wrapper = cfg.refresh_api_key_hook
    for _ in range(50):
        assert cfg.get_api_key_with_prefix("BearerToken") == "Bearer abc"
    assert len(calls) == 1
    now[0] += TOKEN_CHECK_EVERY / 2
    cfg.get_api_key_with_prefix("BearerToken")
    assert len(calls) == 1
    now[0] += TOKEN_CHECK_EVERY
    cfg.get_api_key_with_prefix("BearerToken")
    assert len(calls) == 2
    assert cfg.refresh_api_key_hook is wrapper  # not the loader's own, which would run every request again
    assert cfg.host == (master or KUBECONFIG_SERVER)


def test_a_token_changed_under_the_loader_is_sent_after_the_next_check(tmp_path: Path) -> None:
    """The hook still renews: what the loader sets is what the next requests send, a second later at most."""
    cfg = client.Configuration()
    config.load_kube_config(config_file=token_kubeconfig(tmp_path), client_configuration=cfg)
    now = [0.0]
    steady_refresh(cfg, clock=lambda: now[0])
    assert cfg.get_api_key_with_prefix("BearerToken") == "Bearer abc"
    cfg.api_key["BearerToken"] = "stale"  # as if a request had been sent with a token that since changed
    assert cfg.get_api_key_with_prefix("BearerToken") == "stale"
    now[0] += TOKEN_CHECK_EVERY
    assert cfg.get_api_key_with_prefix("BearerToken") == "Bearer abc"  # the loader's token, set again


def test_a_hook_that_fails_half_way_leaves_the_wrapper_and_master_in_place() -> None:
    """An exec credential plugin that cannot run makes the loader's hook raise, after it may have set its server
    and itself as the hook: that request fails, and the next ones still go to --master through the wrapper."""
    cfg = client.Configuration()
    cfg.host = KUBECONFIG_SERVER
    calls = []

    def failing(configuration: client.Configuration) -> None:
        calls.append(1)
        configuration.host = KUBECONFIG_SERVER
        configuration.refresh_api_key_hook = failing
        raise RuntimeError("exec plugin: cannot run")

    now = [0.0]
    cfg.refresh_api_key_hook = failing
    steady_refresh(cfg, master=MASTER, clock=lambda: now[0])
    wrapper = cfg.refresh_api_key_hook
    with pytest.raises(RuntimeError, match="exec plugin"):
        wrapper(cfg)
    assert cfg.refresh_api_key_hook is wrapper and cfg.host == MASTER
    wrapper(cfg)  # within the second: not asked again
    now[0] += TOKEN_CHECK_EVERY
    with pytest.raises(RuntimeError):
        wrapper(cfg)
    assert calls == [1, 1] and cfg.refresh_api_key_hook is wrapper and cfg.host == MASTER
