"""vcctl's spellings of ages, times and quantities, which volcano-py's tables reproduce (scheduler/cli/ctl/gofmt.py).

The quantity cases are what apimachinery v0.36.1's ParseQuantity(s).String() returns (Volcano's go.mod), run
once with Go; the ages follow Volcano's HumanDuration and apimachinery's.
"""

from __future__ import annotations

import pytest

from scheduler.api.resources import QuantityError
from scheduler.cli.ctl.gofmt import canonical_quantity, go_json, go_list, go_time, human_duration, local_date, since

GO_QUANTITIES = {  # input -> resource.MustParse(input).String()
    "1000m": "1",
    "100Mi": "100Mi",
    "1.5": "1500m",
    "2000": "2k",
    "1024Mi": "1Gi",
    "1536Mi": "1536Mi",
    "0.5Gi": "512Mi",
    "1e3": "1e3",
    "1500e-3": "1500e-3",
    "0": "0",
    "100m": "100m",
    "512": "512",
    "1k": "1k",
    "0.0000000001": "1n",
    "12e2": "1200",
    "1.5Ki": "1536",
    "2048": "2048",
    "1E6": "1E6",
    "3M": "3M",
    "-1.5": "-1500m",
    "0.1Ki": "102400m",
    "1.0": "1",
    "01": "01",
}


@pytest.mark.parametrize(("text", "go"), GO_QUANTITIES.items(), ids=list(GO_QUANTITIES))
def test_a_quantity_is_written_back_as_go_writes_it(text: str, go: str) -> None:
    assert canonical_quantity(text) == go


def test_no_quantity_is_an_error() -> None:
    with pytest.raises(QuantityError):
        canonical_quantity("lots")


AGES = [  # seconds -> (vcctl's HumanDuration, apimachinery's)
    (-5, "<invalid>", "<invalid>"),
    (-1, "0s", "0s"),
    (0, "0s", "0s"),
    (119, "119s", "119s"),
    (120, "2m", "2m"),
    (9 * 60 + 9, "9m9s", "9m9s"),
    (10 * 60, "10m", "10m"),
    (179 * 60, "179m", "179m"),
    (3 * 3600, "3h", "3h"),
    (5 * 3600 + 60, "5h1m", "5h1m"),
    (8 * 3600, "8h", "8h"),
    (47 * 3600, "47h", "47h"),
    (50 * 3600, "2d2h", "2d2h"),
    (7 * 86400, "7d", "7d"),
    (8 * 86400, "8d", "8d"),
    (729 * 86400, "729d", "729d"),
    (730 * 86400, "2y0d", "2y"),
    (800 * 86400, "2y70d", "2y70d"),
    (8 * 365 * 86400, "8y", "8y"),
]


@pytest.mark.parametrize(("seconds", "vcctl", "apimachinery"), AGES, ids=[str(a[0]) for a in AGES])
def test_ages_as_kubectl_prints_them(seconds: int, vcctl: str, apimachinery: str) -> None:
    assert (human_duration(seconds), human_duration(seconds, apimachinery=True)) == (vcctl, apimachinery)


def test_an_unset_timestamp_is_unknown_and_go_zero_time(utc: None) -> None:
    assert since(None, 0.0) == "<unknown>"
    assert go_time(None) == "0001-01-01 00:00:00 +0000 UTC"
    assert local_date(None) == "0001-01-01"


def test_times_are_local_as_go_prints_them(utc: None) -> None:
    assert go_time("2026-01-01T10:20:30Z") == "2026-01-01 10:20:30 +0000 UTC"
    assert go_time("2026-01-01T10:20:30.250Z") == "2026-01-01 10:20:30.25 +0000 UTC"
    assert local_date("2025-12-31T23:59:59Z") == "2025-12-31"
    assert since("2026-01-01T00:00:00Z", 1_767_225_600.0 + 90) == "90s"


def test_maps_and_lists_as_go_formats_them() -> None:
    assert go_json({"b": "x<y", "a": "&"}) == '{"a":"\\u0026","b":"x\\u003cy"}'
    assert (go_list(None), go_list([]), go_list(["--a", "b"])) == ("[]", "[]", "[--a b]")
