"""A kubeconfig's tokenFile is read again when it is rotated (scheduler/cache/client.py): the official client reads
it once, so a long-running process would send a revoked token for ever."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from scheduler.cache.client import api_client, keep_token_fresh, kubeconfig_token_file


def kubeconfig(tmp_path: Path, token_file: str = "token") -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:6443", "insecure-skip-tls-verify": True}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "users": [{"name": "u", "user": {"tokenFile": token_file}}],
    }))
    return path


def rotate(path: Path, text: str) -> None:
    """As the kubelet renews a projected token: a new file renamed over the old one."""
    new = path.with_suffix(".new")
    new.write_text(text)
    os.replace(new, path)


def test_the_token_file_is_found_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    assert kubeconfig_token_file(str(kubeconfig(tmp_path))) == str(tmp_path / "token")
    assert kubeconfig_token_file(str(kubeconfig(tmp_path, "/abs/token"))) == "/abs/token"


def test_a_rotated_token_file_is_sent_from_the_next_check_on(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("first\n")
    api = api_client(str(kubeconfig(tmp_path)))
    cfg = api.configuration
    now = [0.0]
    keep_token_fresh(cfg, str(tmp_path / "token"), clock=lambda: now[0])
    assert cfg.get_api_key_with_prefix("BearerToken") == "Bearer first"
    rotate(tmp_path / "token", "second\n")
    assert cfg.get_api_key_with_prefix("BearerToken") == "Bearer first"  # looked at once a second at most
    now[0] = 1.5
    assert cfg.get_api_key_with_prefix("BearerToken") == "Bearer second"
    api.close()


def test_a_token_file_being_rewritten_or_emptied_keeps_the_token_in_use(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("first")
    api = api_client(str(kubeconfig(tmp_path)))
    cfg = api.configuration
    now = [0.0]
    keep_token_fresh(cfg, str(tmp_path / "token"), clock=lambda: now[0])
    rotate(tmp_path / "token", "")
    now[0] = 2.0
    assert cfg.get_api_key_with_prefix("BearerToken") == "Bearer first"
    (tmp_path / "token").unlink()
    now[0] = 4.0
    assert cfg.get_api_key_with_prefix("BearerToken") == "Bearer first"
    rotate(tmp_path / "token", "third")
    now[0] = 6.0
    assert cfg.get_api_key_with_prefix("BearerToken") == "Bearer third"
    api.close()
