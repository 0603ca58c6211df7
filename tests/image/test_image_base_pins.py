"""The image's base is pinned, without building it (a unit test: tests/image/conftest.py marks only the container
modules ``e2e``): the Debian-built base's recipe pins every package it names at tools/image-base.lock's version, at
the lock's snapshot, with SOURCE_DATE_EPOCH at the snapshot's time; the lock check refuses a differing rootfs naming
every package that differs; and the Dockerfile's public base is pinned by digest only where the digest is marked
verified, an unverified one being marked so in the Dockerfile and in docs/image.md.
"""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import image_lock
import pytest

REPO = Path(__file__).resolve().parents[2]


LOCK_PATH = REPO / "tools" / "image-base.lock"
DOCKERFILE = REPO / "Dockerfile"
DOCS = REPO / "docs" / "image.md"


def recipe() -> dict[str, list[str]]:
    """`tools/image.sh recipe`: what bash itself makes of the recipe, one key=value a line (no network, no build)."""
    out = subprocess.run(["bash", str(REPO / "tools" / "image.sh"), "recipe"], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    values: dict[str, list[str]] = {}
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        assert sep, f"not key=value: {line!r}"
        values.setdefault(key, []).append(value)
    return values


RECIPE = recipe()
LOCK = image_lock.parse_lock(LOCK_PATH.read_text(), str(LOCK_PATH))


def one(key: str) -> str:
    assert len(RECIPE.get(key, [])) == 1, f"{key}: {RECIPE.get(key)}"
    return RECIPE[key][0]


def test_every_package_of_the_recipe_is_pinned_at_the_locks_version():
    pins = [p.partition("=") for p in RECIPE["package"]]
    assert [name for name, _, _ in pins] == ["python3", "python3-venv", "ca-certificates", "netbase", "tzdata"]
    assert all(sep and version for _, sep, version in pins), RECIPE["package"]
    assert {name: version for name, _, version in pins} == {name: LOCK.packages.get(name) for name, _, _ in pins}


def test_the_lock_is_for_the_recipes_suite_snapshot_and_architecture():
    assert (LOCK.suite, LOCK.snapshot, LOCK.arch) == (one("suite"), one("snapshot"), "amd64")
    # A minbase rootfs: apt, dpkg, libc6 and bash are in it whatever the recipe adds.
    assert {"apt", "dpkg", "libc6", "bash", "python3.11-minimal"} <= LOCK.packages.keys()


def test_source_date_epoch_is_the_snapshots_time():
    snapshot = datetime.strptime(one("snapshot"), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    assert int(one("source_date_epoch")) == int(snapshot.timestamp())


def test_the_snapshot_sources_read_every_archive_at_the_pinned_date():
    snapshot = one("snapshot")
    suites = {}
    for line in RECIPE["snapshot_source"]:
        match = re.fullmatch(r"deb \[check-valid-until=no\] http://snapshot\.debian\.org/archive/([a-z-]+)/(\S+) "
                             r"(\S+) main", line)
        assert match, line
        assert match.group(2) == snapshot
        suites[match.group(3)] = match.group(1)
    assert suites == {"bookworm": "debian", "bookworm-updates": "debian", "bookworm-security": "debian-security"}


LOCKED = {"libc6": "2.36-9+deb12u14", "python3": "3.11.2-1+b1", "tzdata": "2026f-0+deb12u1"}


def test_the_lock_check_passes_the_locked_set():
    assert image_lock.check(image_lock.Lock(dict(LOCKED), arch="amd64"), dict(LOCKED), "amd64") is None


def test_the_lock_check_refuses_a_differing_set_naming_each_package():
    built = {"libc6": "2.36-9+deb12u15", "python3": "3.11.2-1+b1", "libfoo1": "1.0-1"}  # tzdata missing
    lock = image_lock.Lock(dict(LOCKED), arch="amd64")
    diff = image_lock.differences(lock.packages, built)
    assert [(d.name, d.locked, d.installed) for d in diff] == [
        ("libc6", "2.36-9+deb12u14", "2.36-9+deb12u15"),
        ("libfoo1", None, "1.0-1"),
        ("tzdata", "2026f-0+deb12u1", None),
    ]
    line = image_lock.check(lock, built, "amd64")
    assert line is not None and "\n" not in line
    named = re.findall(r"([a-z0-9][a-z0-9+.-]+) \(lock ", line)
    assert named == ["libc6", "libfoo1", "tzdata"]
    assert "make image-base-lock" in line


def test_the_lock_check_refuses_another_architecture():
    line = image_lock.check(image_lock.Lock(dict(LOCKED), arch="amd64"), dict(LOCKED), "arm64")
    assert line is not None and "amd64" in line and "arm64" in line


def test_the_build_step_fails_with_one_line_on_a_differing_rootfs(tmp_path):
    """The command tools/image.sh runs after mmdebstrap, on a lock and an installed list that differ in one package."""
    lock = tmp_path / "image-base.lock"
    lock.write_text(image_lock.render(LOCKED, "bookworm", "20261203T000000Z", "amd64"))
    installed = tmp_path / "packages.txt"
    installed.write_text("".join(f"{n}={v}\n" for n, v in {**LOCKED, "tzdata": "2026g-0+deb12u1"}.items()))
    run = subprocess.run([sys.executable, str(REPO / "tools" / "image_lock.py"), "check", str(lock), str(installed),
                          "amd64"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert run.stdout == ""
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and re.findall(r"([a-z0-9][a-z0-9+.-]+) \(lock ", lines[0]) == ["tzdata"]
    installed.write_text("".join(f"{n}={v}\n" for n, v in LOCKED.items()))
    ok = subprocess.run([sys.executable, str(REPO / "tools" / "image_lock.py"), "check", str(lock), str(installed),
                         "amd64"], capture_output=True, text=True, timeout=60)
    assert (ok.returncode, ok.stderr) == (0, "")


def test_the_recipe_check_refuses_a_pin_the_lock_does_not_hold():
    lock = image_lock.Lock(dict(LOCKED))
    assert image_lock.check_recipe(lock, {"python3": "3.11.2-1+b1"}) is None
    line = image_lock.check_recipe(lock, {"python3": "3.11.2-1+b2", "netbase": "6.4", "tzdata": "2026f-0+deb12u1"})
    assert line is not None
    assert re.findall(r"([a-z0-9][a-z0-9+.-]+)=\S+ \(lock ", line) == ["netbase", "python3"]


def test_the_apt_preferences_hold_every_locked_package_at_its_version():
    stanzas = [dict(line.split(": ", 1) for line in block.splitlines())
               for block in image_lock.preferences(LOCK).strip().split("\n\n")]
    assert {s["Package"]: s["Pin"] for s in stanzas} == {n: f"version {v}" for n, v in LOCK.packages.items()}
    assert {s["Pin-Priority"] for s in stanzas} == {"1001"}


def test_a_written_lock_reads_back_as_written():
    text = image_lock.render(LOCKED, "bookworm", "20261203T000000Z", "amd64")
    assert image_lock.parse_lock(text) == image_lock.Lock(LOCKED, "bookworm", "20261203T000000Z", "amd64")


@pytest.mark.parametrize("text", [
    "python3\n",  # no version
    "python3=\n",
    "Python3=3.11\n",  # names are lower-case
    "python3=3.11 extra\n",
    "python3=3.11\npython3=3.12\n",  # twice
    "p=1\n",  # one character
    "x1=1\n" * (image_lock.MAX_LINES + 1),  # far past a rootfs
])
def test_a_malformed_lock_is_refused_with_its_line(text):
    with pytest.raises(image_lock.LockError, match=r"^lock"):
        image_lock.parse_pins(text, "lock")


# ---- the Dockerfile's public base ----------------------------------------------------------------------------------
MARKER = re.compile(r"#\s*base-digest:\s*(?P<ref>[a-z0-9./-]+:[\w.-]+)@(?P<digest>sha256:[0-9a-f]{64})\s+"
                    r"(?P<status>UNVERIFIED|verified \d{4}-\d{2}-\d{2})\s*$")


def dockerfile() -> tuple[list[re.Match[str]], str, list[str]]:
    lines = DOCKERFILE.read_text().splitlines()
    markers = [m for m in map(MARKER.match, lines) if m]
    args = [line.split("=", 1)[1].strip() for line in lines if line.startswith("ARG PYTHON_IMAGE=")]
    assert len(args) == 1, args
    froms = [line.split()[1] for line in lines if line.startswith("FROM ")]
    return markers, args[0], froms


def test_the_dockerfile_names_its_public_base_once_with_a_marked_digest():
    markers, default, froms = dockerfile()
    assert len(markers) == 1
    # No FROM names a public image of its own: every stage is on the build arg (or an earlier stage).
    assert froms == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]
    assert "@sha256:" not in "".join(froms)


def test_the_base_is_pinned_by_digest_only_where_the_digest_was_verified():
    (marker,), default, _ = dockerfile()
    pinned = f"{marker['ref']}@{marker['digest']}"
    if marker["status"] == "UNVERIFIED":
        assert default == marker["ref"], "an unverified digest is not the default: the default stays the tag"
    else:
        assert default == pinned, "a verified digest is the default"


def test_an_unverified_digest_is_marked_so_in_the_docs_with_the_way_to_verify_it():
    (marker,), _, _ = dockerfile()
    docs = DOCS.read_text()
    if marker["status"] == "UNVERIFIED":
        line = next((ln for ln in docs.splitlines() if marker["digest"] in ln), "")
        assert "UNVERIFIED" in line, "the docs name the digest as unverified"
        assert f"skopeo inspect --format '{{{{.Digest}}}}' docker://docker.io/library/{marker['ref']}" in docs
    else:
        assert marker["digest"] in docs and marker["status"] in docs
