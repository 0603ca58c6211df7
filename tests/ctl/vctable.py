"""Reading vcctl's tables back into cells, for the assertions of tests/ctl."""

from __future__ import annotations


def cells(table: str) -> list[dict[str, str]]:
    """A vcctl table as rows of {header: cell}: each column starts where its header starts (vcctl pads every
    cell to its column's width), so an empty cell reads as ''."""
    lines = table.splitlines()
    header = lines[0]
    starts = [i for i, c in enumerate(header) if c != " " and (i == 0 or header[i - 1] == " ")]
    names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    return [
        {
            n: line[a:b].strip() if b else line[a:].strip()
            for n, a, b in zip(names, starts, [*starts[1:], None], strict=True)
        }
        for line in lines[1:]
    ]
