"""A paged list, its pages fetched ahead of their reader (scheduler/cache/pages.py), and the first list of a kind
taken from pages the process started early (the scheduler's start-up, issue 20)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from scheduler.cache.pages import Pages, continue_token
from scheduler.cache.store import Stores
from scheduler.cache.watch import Watcher


def page(names: list[str], token: str | None) -> bytes:
    """A list response as the apiserver writes it: the list's metadata first."""
    meta: dict[str, Any] = {"resourceVersion": "9"}
    if token is not None:
        meta["continue"] = token
    items = [{"metadata": {"name": n, "namespace": "ns"}} for n in names]
    data = json.dumps({"kind": "PodList", "metadata": meta, "items": items}, separators=(",", ":")).encode()
    return data


class FakeKube:
    """Serves pages by continue token and records each request's token."""

    def __init__(self, pages: dict[str | None, bytes], fail_at: str = "(never)"):
        self.pages = pages
        self.fail_at = fail_at
        self.asked: list[str | None] = []
        self.served_all = threading.Event()
        self.second = threading.Event()

    def request_bytes(self, method: str, path: str, *, query: dict[str, Any]) -> bytes:
        token = query.get("continue")
        self.asked.append(token)
        if token == self.fail_at:
            raise ConnectionError("reset")
        data = self.pages[token]
        if len(self.asked) == 2:
            self.second.set()
        if continue_token(data) is None:
            self.served_all.set()
        return data


def three_pages() -> dict[str | None, bytes]:
    return {None: page(["a", "b"], "t1"), "t1": page(["c", "d"], "t2"), "t2": page(["e"], None)}


def names(pages: Pages) -> list[str]:
    return [item["metadata"]["name"] for p in pages for item in p["items"]]


def test_every_page_is_fetched_before_the_reader_reads_the_first() -> None:
    kube = FakeKube(three_pages())
    pages = Pages(kube, "/api/v1/pods", 2).start()  # type: ignore[arg-type]
    assert kube.served_all.wait(10)  # nobody has read a page yet
    assert kube.asked == [None, "t1", "t2"]
    assert names(pages) == ["a", "b", "c", "d", "e"]


def test_a_token_the_head_does_not_show_is_followed_one_page_at_a_time() -> None:
    served = three_pages()
    served[None] = page(["a", "b"], 't"1')  # escaped in the JSON: the head's reading stops at the quote
    served['t"1'] = served.pop("t1")
    served["t\\"] = page(["x"], None)  # what the fetcher asks for ahead: dropped, never read
    kube = FakeKube(served)
    pages = Pages(kube, "/api/v1/pods", 2).start()  # type: ignore[arg-type]
    assert names(pages) == ["a", "b", "c", "d", "e"]
    assert kube.asked[-2:] == ['t"1', "t2"]


def test_a_failed_fetch_is_raised_to_the_reader_after_the_pages_before_it() -> None:
    kube = FakeKube(three_pages(), fail_at="t2")
    read: list[str] = []
    with pytest.raises(ConnectionError):
        for p in Pages(kube, "/api/v1/pods", 2).start():  # type: ignore[arg-type]
            read += [item["metadata"]["name"] for item in p["items"]]
    assert read == ["a", "b", "c", "d"]


def test_closing_ends_a_fetcher_waiting_on_a_full_queue() -> None:
    kube = FakeKube(three_pages())
    pages = Pages(kube, "/api/v1/pods", 2, ahead=1).start()  # type: ignore[arg-type]
    assert kube.second.wait(10)  # page 1 fills the queue; page 2 is fetched and waits for room
    pages.close()
    pages._thread.join(10)
    assert not pages._thread.is_alive()


def test_the_first_list_of_a_prefetched_kind_takes_its_pages_and_the_next_one_asks_again() -> None:
    early_kube, own_kube = FakeKube(three_pages()), FakeKube(three_pages())
    early = Pages(early_kube, "/api/v1/pods", 2).start()  # type: ignore[arg-type]
    watcher = Watcher(own_kube, Stores(), None, threading.Event(), watch_timeout=1, page_size=2,  # type: ignore[arg-type]
                      prefetched={"/api/v1/pods": early})
    first = [item["metadata"]["name"] for p in watcher._pages("/api/v1/pods") for item in p["items"]]
    again = [item["metadata"]["name"] for p in watcher._pages("/api/v1/pods") for item in p["items"]]
    assert (first, again) == (["a", "b", "c", "d", "e"], ["a", "b", "c", "d", "e"])
    assert (early_kube.asked, own_kube.asked) == ([None, "t1", "t2"], [None, "t1", "t2"])


def test_the_token_is_read_from_the_lists_own_metadata_only() -> None:
    assert continue_token(page(["a"], "abc=")) == "abc="
    assert continue_token(page(["a"], None)) is None
    assert continue_token(page(["a"], "")) is None  # an empty token ends the list too
    nested = b'{"kind":"PodList","metadata":{"resourceVersion":"9"},"items":[{"metadata":{"continue":"x"}}]}'
    assert continue_token(nested) is None
