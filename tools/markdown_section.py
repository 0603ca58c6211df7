"""The generated sections of CONFORMANCE.md: each tool owns the text between its pair of markers.

Used by tools/conformance/report.py, tools/differential/report.py and tools/volcano_examples.py, so text written
by hand around a section survives every regeneration.
"""

from __future__ import annotations

from pathlib import Path


def replace_section(path: Path, block: str, begin: str, end: str, heading: str) -> None:
    """Put `block` (which starts with `begin` and ends with `end`) in place of the text between the markers in
    `path`, or append `heading` and `block` when the file has no such section yet."""
    text = path.read_text() if path.exists() else ""
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = (text.rstrip("\n") + "\n\n" if text else "") + f"{heading}\n\n{block}\n"
    path.write_text(text)
