"""The README is a landing page and the rest lives in docs/ pages a reader can follow: the README stays about 15 KB,
its install steps are marked blocks in order, its two commands are the Makefile's and CI's, every relative link
of the README and docs/ resolves (file and heading), user docs carry no "(issue N)" remarks or paths outside the
repository, every CRD in crds/ is documented in docs/crds.md, and BENCHMARKS.md opens with one table whose rows
each give their command, date, commit, load and the history section behind them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from readme_blocks import ReadmeBlockError, install_blocks

ROOT = Path(__file__).resolve().parents[1]


README = ROOT / "README.md"
DOCS = ROOT / "docs"
# The benchmarks' history is kept verbatim, issue numbers and all.
NOT_USER_DOCS = {DOCS / "benchmarks-history.md"}


def user_docs() -> list[Path]:
    return [README, *sorted(p for p in DOCS.glob("*.md") if p not in NOT_USER_DOCS)]


# ---- the README as a landing page ------------------------------------------------------------------------------
def test_the_readme_is_a_landing_page_of_about_15_kb():
    size = len(README.read_bytes())
    assert 6_000 <= size <= 16_500, f"README.md is {size} bytes: move detail to docs/ pages"


def test_the_readme_says_what_it_is_before_any_command():
    text = README.read_text()
    first_fence = text.index("```")
    assert "batch scheduler for Kubernetes" in text[:first_fence]
    assert "](docs/img/demo-utilisation.png)" in text[:first_fence]


def test_the_two_commands_are_the_makefiles_and_ci_runs_the_second():
    text = README.read_text()
    block = re.search(r"## Two commands\n\n```sh\n(.*?)```", text, flags=re.S)
    assert block, "the README's two commands are one ```sh block under '## Two commands'"
    commands = [line.split("#")[0].strip() for line in block[1].splitlines() if line.split("#")[0].strip()]
    assert commands == ["make demo", "make test"]
    targets = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), flags=re.M))
    assert {"demo", "test"} <= targets
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert "make test" in ci


def test_the_install_steps_are_marked_blocks_in_the_order_a_reader_runs_them():
    blocks = install_blocks()
    assert list(blocks) == ["image", "helm", "kubectl", "first-gang", "waiting-gang", "explain"]
    assert "make image IMAGE=" in blocks["image"] and " push " in blocks["image"]
    assert "--set image.repository=" in blocks["helm"]
    assert "set image deploy/volcano-py-scheduler" in blocks["kubectl"]
    assert "schedulerName: volcano-py" in blocks["first-gang"]
    assert blocks["explain"].strip().startswith("volcano-py explain ")


def test_a_marker_without_its_block_is_refused():
    with pytest.raises(ReadmeBlockError, match="not followed"):
        install_blocks("<!-- readme-install: lost -->\n\nsome text\n")
    with pytest.raises(ReadmeBlockError, match="not ```sh"):
        install_blocks("<!-- readme-install: py -->\n```python\nprint(1)\n```\n")
    assert install_blocks("<!-- readme-install: a -->\n\n```sh\necho a\n```\n") == {"a": "echo a\n"}


def test_the_readme_links_migration_and_every_docs_page():
    text = README.read_text()
    assert "**[docs/migration.md](docs/migration.md)" in text
    linked = set(re.findall(r"\]\((docs/[^)#]+\.md)", text))
    pages = {f"docs/{p.name}" for p in DOCS.glob("*.md") if p.name not in ("README.md", "benchmarks-history.md")}
    assert pages - linked == set()


# ---- links, issue remarks, outside paths ----------------------------------------------------------------------
def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def relative_links(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    found = re.findall(r"\]\(([^)\s]+)\)", text)
    return [(t.split("#")[0], t.partition("#")[2]) for t in found if not re.match(r"[a-z]+:", t)]


def test_every_relative_link_of_the_readme_and_docs_resolves():
    broken = []
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        for target, anchor in relative_links(page):
            dest = (page.parent / target).resolve() if target else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} is missing")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.relative_to(ROOT)}: {target}#{anchor}: no such heading")
    assert broken == []


def test_user_docs_carry_no_issue_remarks_nor_paths_outside_the_repository():
    found = []
    for page in user_docs():
        for n, line in enumerate(page.read_text().splitlines(), 1):
            for pattern in (r"\bissues? \d+\b", r"\.\./shared", r"(?<![\w.])/work/", r"(?<![\w.])/root/"):
                if re.search(pattern, line, flags=re.I):
                    found.append(f"{page.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert found == []


def test_every_crd_is_documented_in_docs_crds():
    text = (DOCS / "crds.md").read_text()
    rows = {m[0]: m[1] for m in re.findall(r"^\| (\w+) \| `([\w.]+/v\w+)` \|", text, flags=re.M)}
    crds = {}
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        spec = yaml.safe_load(path.read_text())["spec"]
        crds[spec["names"]["kind"]] = f"{spec['group']}/{spec['versions'][0]['name']}"
    assert len(crds) == 11
    assert rows == crds


# ---- BENCHMARKS.md's headline ------------------------------------------------------------------------------
COLUMNS = ["what", "result", "command", "date (UTC)", "commit", "load", "history"]


def cells(line: str) -> list[str]:
    """A table row's cells; a `|` inside backticks (a command's pipe) is not a separator."""
    parts, cell, code = [], "", False
    for ch in line.strip().strip("|"):
        if ch == "`":
            code = not code
        if ch == "|" and not code:
            parts.append(cell.strip())
            cell = ""
        else:
            cell += ch
    return [*parts, cell.strip()]


def test_benchmarks_opens_with_one_table_of_todays_numbers():
    text = (ROOT / "BENCHMARKS.md").read_text()
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    assert not any(line.startswith("## ") for line in lines[:start]), "the table comes before any section"
    assert cells(lines[start]) == COLUMNS
    rows = [cells(line) for line in lines[start + 2:] if line.startswith("|")][: len(lines)]
    rows = rows[: next((i for i, r in enumerate(rows) if len(r) != len(COLUMNS)), len(rows))]
    assert len(rows) >= 5
    history = (DOCS / "benchmarks-history.md").read_text()
    sections = [h for h in re.findall(r"^#{2,3} (.+)$", history, flags=re.M)]
    for row in rows:
        what, result, command, date, commit, load, section = row
        assert all(row), f"every column is filled: {row}"
        assert command.startswith("`"), f"{what}: the command, as run, in backticks"
        assert re.match(r"20\d\d-\d\d-\d\d", date), f"{what}: date {date!r}"
        assert re.fullmatch(r"[0-9a-f]{7,40}(\.\.[0-9a-f]{7,40})?|not recorded", commit), f"{what}: commit {commit!r}"
        name = section.strip("*")
        assert any(h.startswith(name) for h in sections), f"{what}: no section {name!r} in docs/benchmarks-history.md"
    assert sum(1 for line in lines if line.startswith("| what |")) == 1, "one table of today's numbers"
