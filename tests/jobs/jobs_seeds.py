from __future__ import annotations

import pathlib
from typing import Any

import yaml

SEEDS: dict[str, dict[str, Any]] = yaml.safe_load((pathlib.Path(__file__).parent / "seeds.yaml").read_text())


def seed(name: str) -> dict[str, Any]:
    import copy

    return copy.deepcopy(SEEDS[name])
