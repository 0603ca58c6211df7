"""Layer `ctl`: `volcano-py completion bash|zsh`, a static completion script made from the command tree.

The script knows each command's subcommands and flags (argparse's, and the Go-style flags of `scheduler`,
`controllers` and `webhook`); a word that is neither completes as a file name. zsh loads it through
`bashcompinit`. Nothing runs Python while completing, so completion is instant and needs no extra package.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping, Sequence

SHELLS = ("bash", "zsh")


def tree(parser: argparse.ArgumentParser, path: str = "") -> Iterator[tuple[str, list[str], list[str]]]:
    """(command path, its subcommands, its flags) for `parser` and every parser under it."""
    subs: list[str] = []
    flags: list[str] = []
    children: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                subs.append(name)
                children.append((name, child))
        else:
            flags += [o for o in action.option_strings if o not in ("-h",)]
    yield path, subs, flags
    for name, child in children:
        yield from tree(child, f"{path} {name}".strip())


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def script(shell: str, parser: argparse.ArgumentParser, extra_flags: Mapping[str, Sequence[str]]) -> str:
    """The completion script for `shell`; `extra_flags` adds the flags of commands argparse does not parse
    (`scheduler`: `--schedule-period`, ...)."""
    if shell not in SHELLS:
        raise ValueError(f"no completion for {shell!r}: expected one of {', '.join(SHELLS)}")
    subs_lines, flag_lines = [], []
    for path, subs, flags in tree(parser):
        flags = sorted({*flags, *extra_flags.get(path, ())})
        key = f"volcano-py {path}".strip()  # bash refuses an empty key
        subs_lines.append(f"  [{_quote(key)}]={_quote(' '.join(subs))}")
        flag_lines.append(f"  [{_quote(key)}]={_quote(' '.join(flags))}")
    head = "autoload -U +X bashcompinit && bashcompinit\n" if shell == "zsh" else ""
    return f"""# volcano-py {shell} completion: source <(volcano-py completion {shell})
{head}declare -A _volcano_py_subs=(
{chr(10).join(subs_lines)}
)
declare -A _volcano_py_flags=(
{chr(10).join(flag_lines)}
)
_volcano_py() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" path="volcano-py" next i
  for ((i = 1; i < COMP_CWORD; i++)); do
    next="$path ${{COMP_WORDS[i]}}"
    if [[ ${{COMP_WORDS[i]}} != -* && -n "${{_volcano_py_flags[$next]+set}}" ]]; then
      path="$next"
    fi
  done
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "${{_volcano_py_flags[$path]}}" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "${{_volcano_py_subs[$path]}}" -- "$cur"))
  fi
}}
complete -o default -F _volcano_py volcano-py
"""
