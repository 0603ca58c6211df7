"""`--help` says what each command is for, the flags with no effect sit under one heading, and `volcano-py
completion bash|zsh` completes commands and flags in a real bash (issue 38)."""

from __future__ import annotations

import argparse
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from scheduler.cli import main, parser
from scheduler.flags import CONTROLLERS, SCHEDULER, WEBHOOK, FlagSet
from scheduler.flags.syntax import COMPATIBILITY_HEADING


def parsers(p: argparse.ArgumentParser, path: str = "volcano-py") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from parsers(child, f"{path} {name}")


ALL = list(parsers(parser()))


@pytest.mark.parametrize(("path", "p"), ALL, ids=[path for path, _ in ALL])
def test_every_command_says_what_it_is_for(path: str, p: argparse.ArgumentParser) -> None:
    assert isinstance(p.description, str) and len(p.description) >= 12, f"{path} has no description"
    if any(a.option_strings for a in p._actions if a.dest != "help"):
        assert p.description in " ".join(p.format_help().split()) or p.description.split()[0] in p.format_help()


@pytest.mark.parametrize("flags", [SCHEDULER, CONTROLLERS, WEBHOOK], ids=lambda f: f.command)
def test_the_flags_with_no_effect_are_under_one_heading(flags: FlagSet) -> None:
    text = flags.usage()
    assert flags.description and flags.description.split()[0] in text.split("Flags:")[0]
    assert text.count(COMPATIBILITY_HEADING) == 1
    working, compatibility = text.split(COMPATIBILITY_HEADING)
    for flag in flags.flags:
        entry = f"  --{flag.name}"
        inside = (f"{entry} " in compatibility or f"{entry}\n" in compatibility or f"{entry}," in compatibility)
        before = (f"{entry} " in working or f"{entry}\n" in working or f"{entry}," in working)
        assert (inside, before) == (not flag.honoured, flag.honoured), flag.name
    assert "no effect in volcano-py" not in working


def test_scheduler_help_prints_the_description_and_the_heading(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scheduler", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Usage: volcano-py scheduler [flags]\n\nRun the gang scheduler")
    assert COMPATIBILITY_HEADING in out


def completions(script: str, line: str) -> list[str]:
    """What bash completes for `line` (the cursor at its end) with `script` loaded."""
    words = line.split(" ")
    array = " ".join(f"'{w}'" for w in words)
    program = (f"{script}\nCOMP_WORDS=({array}); COMP_CWORD={len(words) - 1}; _volcano_py; "
               'printf "%s\\n" "${COMPREPLY[@]}"')
    out = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    return [w for w in out.splitlines() if w]


@pytest.fixture(scope="module")
def bash_script() -> str:
    import contextlib
    import io

    from scheduler.cli.parser import cmd_completion

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert cmd_completion(argparse.Namespace(shell="bash")) == 0
    return buffer.getvalue()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize(("line", "expected"), [
    ("volcano-py jo", ["job", "jobflow", "jobtemplate"]),
    ("volcano-py job l", ["list"]),
    ("volcano-py job list --wa", ["--watch"]),
    ("volcano-py job list -n team-a --con", ["--context"]),
    ("volcano-py queue list -o name -", None),
    ("volcano-py scheduler --schedule-p", ["--schedule-period"]),
    ("volcano-py simulate --hor", ["--horizon"]),
    ("volcano-py conf check --str", ["--strict"]),
    ("volcano-py completion ", []),
])
def test_bash_completes_commands_and_flags(bash_script: str, line: str, expected: list[str] | None) -> None:
    got = completions(bash_script, line)
    if expected is None:
        assert {"-l", "--label-selector", "-w", "--watch", "--context"} <= set(got)
    else:
        assert sorted(got) == sorted(expected)


def test_the_completion_command_prints_bash_and_zsh(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    bash = capsys.readouterr().out
    assert "complete -o default -F _volcano_py volcano-py" in bash
    assert main(["completion", "zsh"]) == 0
    zsh = capsys.readouterr().out
    assert "bashcompinit" in zsh and zsh.split("\n", 2)[2] == bash.split("\n", 1)[1]
