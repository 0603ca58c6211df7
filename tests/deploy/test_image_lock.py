"""The image's runtime lock (requirements.lock, written by `make lock`) matches pyproject.toml's dependencies:
every dependency is pinned at a version its specifier admits, every pin carries the hashes `pip install
--require-hashes` needs, every pinned package is there because a runtime dependency needs it, and the Dockerfile
installs exactly this file with hashes required. No network: that the set installs and is whole is `pip check` in
the image build (`make image-test`).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements.lock"
ROOT = "volcano-py (pyproject.toml)"  # how pip-compile names the project in a `# via` line


@dataclass(frozen=True, slots=True)
class Pin:
    name: str
    version: Version
    hashes: tuple[str, ...]
    via: tuple[str, ...]


def parse_lock(text: str) -> dict[str, Pin]:
    """pip-compile's format: `name==version \\` and `--hash=sha256:...` lines, then `# via` comments."""
    pins: dict[str, Pin] = {}
    blocks = re.split(r"\n(?=\S)", text)
    for block in blocks:
        head = re.match(r"([A-Za-z0-9._-]+)==(\S+)", block)
        if not head:
            continue
        via_text = block.split("# via", 1)[1] if "# via" in block else ""
        via = tuple(v.strip() for v in re.sub(r"^\s*#", "", via_text, flags=re.M).splitlines() if v.strip())
        name = canonicalize_name(head.group(1))
        pins[name] = Pin(name, Version(head.group(2)), tuple(re.findall(r"--hash=sha256:([0-9a-f]{64})", block)),
                         via)
    return pins


def runtime_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [Requirement(d) for d in project["dependencies"]]


PINS = parse_lock(LOCK.read_text())


def test_every_dependency_of_pyproject_is_pinned_at_a_version_it_admits():
    wrong = {}
    for req in runtime_requirements():
        pin = PINS.get(canonicalize_name(req.name))
        if pin is None or not req.specifier.contains(pin.version, prereleases=True):
            wrong[str(req)] = str(pin.version) if pin else "not in the lock"
    assert wrong == {}, f"requirements.lock is stale for pyproject.toml (run `make lock`): {wrong}"


def test_every_pin_carries_sha256_hashes():
    assert len(PINS) > len(runtime_requirements())  # the transitive closure, not just the direct ones
    assert [name for name, pin in PINS.items() if not pin.hashes] == []


def test_every_pin_is_needed_by_a_runtime_dependency():
    """The `# via` graph from the project reaches every pin: no leftover of a removed dependency, no dev tool."""
    needed = {name for name, pin in PINS.items() if ROOT in pin.via}
    direct = {canonicalize_name(r.name) for r in runtime_requirements()}
    assert needed == direct
    grew = True
    while grew:
        more = {name for name, pin in PINS.items()
                if name not in needed and any(canonicalize_name(v) in needed for v in pin.via)}
        needed |= more
        grew = bool(more)
    assert sorted(set(PINS) - needed) == []


def test_the_dockerfile_installs_the_lock_with_hashes_required():
    dockerfile = (REPO / "Dockerfile").read_text()
    install = next(line for line in dockerfile.splitlines() if "-r /tmp/requirements.lock" in line)
    assert "--require-hashes" in install and "--no-deps" in install, install
    assert "COPY requirements.lock" in dockerfile
    assert "!requirements.lock" in (REPO / ".dockerignore").read_text().splitlines()
