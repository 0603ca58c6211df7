"""A watch's bytes become its events whatever the chunks they arrive in (`kube.watch_lines` over urllib3's own
iteration of the response, as `Kube.stream` reads it): the same lines, in order, for every way of cutting the
stream, and nothing from an event the stream cut off."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st
from urllib3.response import HTTPResponse

from scheduler.cache.kube import watch_lines

EVENTS = st.lists(st.fixed_dictionaries({
    "type": st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]),
    "object": st.fixed_dictionaries({"metadata": st.fixed_dictionaries({
        "name": st.text(min_size=1, max_size=40), "resourceVersion": st.integers(0, 10**12).map(str)})}),
}), max_size=40)


def cut(data: bytes, points: list[int]) -> HTTPResponse:
    """A response whose body arrives in chunks cut at these offsets (some empty when offsets repeat)."""
    edges = [0, *sorted(p % (len(data) + 1) for p in points), len(data)]
    return response([data[a:b] for a, b in zip(edges, edges[1:], strict=False)])


def response(chunks: list[bytes]) -> HTTPResponse:
    made = HTTPResponse(body=b"", preload_content=False)
    made.stream = lambda *_, **__: iter(chunks)  # type: ignore[method-assign]  # the chunks as the socket gives them
    return made


@settings(max_examples=300, deadline=None)
@given(EVENTS, st.lists(st.integers(0, 1 << 20), max_size=60), st.sampled_from([b"\n", b"\n\n", b"\n \n"]))
def test_every_cut_of_the_stream_gives_the_same_events_in_order(events, points, separator) -> None:
    lines = [json.dumps(e).encode() for e in events]  # json.dumps escapes newlines inside strings, as Go does
    data = b"".join(line + separator for line in lines)
    got = [json.loads(line) for line in watch_lines(cut(data, points))]
    assert got == events


@given(EVENTS.filter(bool), st.integers(1, 1000), st.lists(st.integers(0, 1 << 20), max_size=20))
def test_an_event_the_stream_cut_off_is_not_given(events, keep, points) -> None:
    lines = [json.dumps(e).encode() for e in events]
    last = lines[-1][: max(1, keep % len(lines[-1]))]  # the last event without its end
    data = b"".join(line + b"\n" for line in lines[:-1]) + last
    assert [json.loads(line) for line in watch_lines(cut(data, points))] == events[:-1]


def test_one_chunk_of_many_events_and_one_event_in_many_chunks() -> None:
    events = [{"type": "MODIFIED", "object": {"metadata": {"name": f"p{i}"}, "pad": "x" * 3000}} for i in range(2000)]
    data = b"".join(json.dumps(e).encode() + b"\n" for e in events)
    assert [json.loads(line) for line in watch_lines(response([data]))] == events
    sevens = response([data[i:i + 7] for i in range(0, len(data), 7)])
    assert [json.loads(line) for line in watch_lines(sevens)] == events
