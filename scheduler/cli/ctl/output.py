"""Layer `ctl`: kubectl's `-o` on the day-two commands: `name`, `json`, `yaml`, `jsonpath=TEMPLATE`, and `wide`
where a command has more columns; without `-o`, vcctl's table.

`-o name` prints `<resource>.<group>/<name>` as kubectl does (`job.batch.volcano.sh/train`, `pod/train-worker-0`),
`json`/`yaml` a List for a list and the object for one object, `jsonpath` fills the template from the same.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence

from scheduler.api.objects import MutableObj
from scheduler.cli.ctl.jsonpath import JSONPathError, compile_template, render
from scheduler.cli.ctl.tables import dump

OBJECT_FORMATS = ("name", "json", "yaml", "jsonpath=TEMPLATE")


def output_type(tables: Sequence[str]) -> Callable[[str], str]:
    """The argparse type of `-o`: the object formats, and the table formats `tables` (e.g. `wide`)."""
    known = ("name", "json", "yaml", *tables)

    def parse(text: str) -> str:
        if text.startswith(("jsonpath=", "jsonpath-as-text=")):
            template = text.split("=", 1)[1]
            if len(template) > 1 and template[0] == template[-1] and template[0] in "'\"":
                template = template[1:-1]  # a template quoted twice by the shell
            try:
                compile_template(template)
            except JSONPathError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
            return f"jsonpath={template}"
        if text not in known:
            raise argparse.ArgumentTypeError(f"unknown output format {text!r}: expected one of "
                                             f"{', '.join([*known[:3], 'jsonpath=TEMPLATE', *known[3:]])}")
        return text

    parse.__name__ = "output format"
    return parse


def is_object_format(output: str | None) -> bool:
    return output is not None and (output in ("name", "json", "yaml") or output.startswith("jsonpath="))


def name_of(obj: MutableObj, resource: str) -> str:
    """`resource/name`, `resource` being kubectl's `<singular>.<group>` (`job.batch.volcano.sh`, `pod`)."""
    return f"{resource}/{(obj.get('metadata') or {}).get('name', '')}"


def _as_list(objects: Sequence[MutableObj]) -> MutableObj:
    return {"apiVersion": "v1", "kind": "List", "items": list(objects), "metadata": {"resourceVersion": ""}}


def render_objects(objects: Sequence[MutableObj] | MutableObj, output: str, resource: str) -> str:
    """The text `-o OUTPUT` prints for a list (a sequence) or one object (a mapping), without a final newline
    for json and yaml (print adds it), with one for name and none added to a jsonpath template."""
    one = isinstance(objects, Mapping)
    items: list[MutableObj] = [objects] if isinstance(objects, Mapping) else list(objects)
    if output == "name":
        return "".join(f"{name_of(obj, resource)}\n" for obj in items)
    if output.startswith("jsonpath="):
        return render(output.split("=", 1)[1], items[0] if one else _as_list(items))
    return dump(objects, output) + "\n"


def print_objects(objects: Sequence[MutableObj] | MutableObj, output: str, resource: str) -> None:
    import sys

    sys.stdout.write(render_objects(objects, output, resource))
