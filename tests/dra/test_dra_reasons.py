"""The DRA reasons are values: each has a sentence naming what a person acts on, and reads back from its JSON."""

from __future__ import annotations

import json

from scheduler.api import reasons_dra as R
from scheduler.api.messages_dra import render_dra
from scheduler.api.reason_codec import decode_object
from scheduler.api.reasons import QueueMissing

SAMPLES = [
    R.ClaimDevicesShort("ns/c", "gpu", "gpu.nvidia.com", 4, 1, "n3"),
    R.ClaimConstraintUnmet("ns/c", "gpu.nvidia.com/pcieRoot", ("a", "b"), "n1"),
    R.ClaimMissing("ns/p", "shared"),
    R.ClaimMissing("ns/p", "one-gpu", True),
    R.DeviceClassMissing("ns/c", "gpu", "gpu.nvidia.com"),
    R.ClaimSelectorInvalid("ns/c", "gpu", "device.x", "does not compile: ...", "gpu.nvidia.com"),
    R.AdminAccessRefused("ns/c", "mon"),
    R.ClaimNotReachable("ns/c", "n2"),
    R.ClaimUnusable("ns/c", "is being deleted"),
]


def test_every_kind_is_sampled_renders_and_round_trips() -> None:
    assert {type(s) for s in SAMPLES} == set(R.DRA_KINDS.values())
    for reason in SAMPLES:
        text = json.dumps(reason.to_json())
        back = json.loads(text)
        assert decode_object(R.DRA_KINDS[back["kind"]], back) == reason
        assert render_dra(reason)
    assert render_dra(QueueMissing("q")) is None


def test_the_short_sentence_names_request_class_and_how_many_short() -> None:
    text = render_dra(SAMPLES[0])
    assert text is not None
    assert all(part in text for part in ("ns/c", "request gpu", "gpu.nvidia.com", "4 device", "1 free", "3 short"))
    assert SAMPLES[0].short == 3
