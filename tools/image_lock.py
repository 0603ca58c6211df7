"""The Debian-built base's lock (tools/image-base.lock): every package in its rootfs, name=version.

tools/image.sh runs this with the host's python3 (standard library only, no venv needed):

  image_lock.py check LOCK INSTALLED ARCH    exit 1 with one line naming every package that differs from the lock
  image_lock.py check-recipe LOCK PKG=VER...  exit 1 with one line naming every recipe pin the lock does not hold
  image_lock.py preferences LOCK             print apt preferences holding every locked package at its version
  image_lock.py write LOCK INSTALLED ARCH SUITE SNAPSHOT  write the lock from a rootfs's installed set

INSTALLED is what the build's hook wrote: one `name=version` per line (dpkg-query -f '${Package}=${Version}\\n').
The lock is the same lines, sorted, after a `#` header naming the suite, the snapshot and the architecture.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

# Debian policy 5.6.1/5.6.12: package names are lower-case alphanumerics and + - . (two characters at least,
# starting alphanumeric); a version is [epoch:]upstream[-revision] from alphanumerics and . + - ~ :
_NAME = re.compile(r"[a-z0-9][a-z0-9+.-]+")
_VERSION = re.compile(r"[0-9][A-Za-z0-9.+~:-]*")
_HEADER = re.compile(r"#\s*(suite|snapshot|arch):\s*(\S+)\s*$")
MAX_LINES = 10_000  # a minbase rootfs has about 100 packages; a lock far past that is not one


class LockError(ValueError):
    """A lock or an installed list that cannot be read: one line naming the file, the line and why."""


@dataclass(frozen=True, slots=True)
class Lock:
    packages: dict[str, str]
    suite: str = ""
    snapshot: str = ""
    arch: str = ""


def parse_pins(text: str, source: str) -> dict[str, str]:
    """`name=version` lines (blank lines and `#` comments skipped); a malformed or repeated name is a LockError."""
    pins: dict[str, str] = {}
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise LockError(f"{source}: {len(lines)} lines, more than {MAX_LINES}")
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("=")
        if not sep or not _NAME.fullmatch(name) or not _VERSION.fullmatch(version):
            raise LockError(f"{source}:{number}: not name=version: {line[:80]!r}")
        if name in pins:
            raise LockError(f"{source}:{number}: {name} is listed twice")
        pins[name] = version
    return pins


def parse_lock(text: str, source: str = "lock") -> Lock:
    meta = {}
    for raw in text.splitlines():
        match = _HEADER.match(raw.strip())
        if match:
            meta[match.group(1)] = match.group(2)
    return Lock(parse_pins(text, source), meta.get("suite", ""), meta.get("snapshot", ""), meta.get("arch", ""))


@dataclass(frozen=True, slots=True)
class Difference:
    name: str
    locked: str | None  # None: installed, not in the lock
    installed: str | None  # None: in the lock, not installed

    def __str__(self) -> str:
        return f"{self.name} (lock {self.locked or '-'}, built {self.installed or '-'})"


def differences(locked: dict[str, str], installed: dict[str, str]) -> list[Difference]:
    """Every package whose version differs, or that only one side has, by name."""
    return [
        Difference(name, locked.get(name), installed.get(name))
        for name in sorted(locked.keys() | installed.keys())
        if locked.get(name) != installed.get(name)
    ]


def check(lock: Lock, installed: dict[str, str], arch: str) -> str | None:
    """None when the installed set is the lock's, else the one line saying what differs."""
    if lock.arch and lock.arch != arch:
        return (f"make image-base: the base lock is for {lock.arch}, this build is {arch}: "
                "regenerate it with `make image-base-lock`")
    diff = differences(lock.packages, installed)
    if not diff:
        return None
    return (f"make image-base: the base rootfs differs from tools/image-base.lock in {len(diff)} package(s): "
            + ", ".join(map(str, diff)) + "; `make image-base-lock` rewrites the lock from what the mirror serves")


def check_recipe(lock: Lock, pins: dict[str, str]) -> str | None:
    """None when every recipe pin is the lock's version of that package, else one line naming those that are not."""
    wrong = [f"{name}={version} (lock {lock.packages.get(name, '-')})"
             for name, version in sorted(pins.items()) if lock.packages.get(name) != version]
    if not wrong:
        return None
    return ("make image-base: the base recipe's pins (PACKAGES in tools/image.sh) differ from tools/image-base.lock: "
            + ", ".join(wrong))


def preferences(lock: Lock) -> str:
    """apt_preferences(5) stanzas pinning every locked package at its version (priority > 1000 allows the
    locked version even where a newer one is the candidate)."""
    return "".join(f"Package: {name}\nPin: version {version}\nPin-Priority: 1001\n\n"
                   for name, version in sorted(lock.packages.items()))


def render(installed: dict[str, str], suite: str, snapshot: str, arch: str) -> str:
    head = [
        "# tools/image-base.lock: every package in the rootfs of the Debian-built base (tools/image.sh base),",
        "# name=version. The build installs these versions and fails when its installed set differs.",
        "# Regenerate (after a Debian point release or security update): make image-base-lock",
        f"# suite: {suite}",
        f"# snapshot: {snapshot}",
        f"# arch: {arch}",
    ]
    return "\n".join(head + [f"{name}={installed[name]}" for name in sorted(installed)]) + "\n"


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise LockError(f"{path}: {exc.strerror or exc}") from None


def main(argv: list[str]) -> int:
    try:
        match argv:
            case ["check", lock_path, installed_path, arch]:
                problem = check(parse_lock(_read(lock_path), lock_path),
                                parse_pins(_read(installed_path), installed_path), arch)
            case ["check-recipe", lock_path, *pins]:
                problem = check_recipe(parse_lock(_read(lock_path), lock_path),
                                       parse_pins("\n".join(pins), "the recipe"))
            case ["preferences", lock_path]:
                sys.stdout.write(preferences(parse_lock(_read(lock_path), lock_path)))
                return 0
            case ["write", lock_path, installed_path, arch, suite, snapshot]:
                text = render(parse_pins(_read(installed_path), installed_path), suite, snapshot, arch)
                Path(lock_path).write_text(text)
                return 0
            case _:
                print(__doc__.split("\n\n")[1], file=sys.stderr)
                return 2
    except LockError as exc:
        print(f"image lock: {exc}", file=sys.stderr)
        return 1
    if problem:
        print(problem, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
