"""The README's install steps as code: each is a fenced ```sh block right after a `<!-- readme-install: NAME -->`
comment, so a test runs exactly those blocks, as written (tests/e2e/test_readme_install.py), and a unit test holds
their order and shape (tests/test_docs_structure.py)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"

# The marker, optional blank lines, then a fence of three or more backticks with its info string, the body, and
# the same fence closing it.
_BLOCK = re.compile(
    r"^<!-- readme-install: (?P<name>[a-z0-9-]+) -->[ \t]*\n(?:[ \t]*\n)*"
    r"(?P<fence>`{3,})(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$",
    flags=re.MULTILINE | re.DOTALL,
)
_MARKER = re.compile(r"<!-- readme-install: ([^ ]*) -->")


class ReadmeBlockError(ValueError):
    """A marker without its block, a block that is not `sh`, or a name used twice."""


def install_blocks(text: str | None = None) -> dict[str, str]:
    """NAME -> the block's text, in the README's order."""
    text = README.read_text() if text is None else text
    blocks: dict[str, str] = {}
    for m in _BLOCK.finditer(text):
        name = m["name"]
        if m["info"].strip() != "sh":
            raise ReadmeBlockError(f"readme-install: {name}: the block is ```{m['info'].strip()}, not ```sh")
        if name in blocks:
            raise ReadmeBlockError(f"readme-install: {name}: two blocks of that name")
        blocks[name] = m["body"]
    markers = _MARKER.findall(text)
    if len(markers) != len(blocks):
        lost = [n for n in markers if n not in blocks]
        raise ReadmeBlockError(f"readme-install markers not followed by a fenced block: {lost or markers}")
    return blocks
