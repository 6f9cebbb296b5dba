"""In-process caches are bounded by bytes, not entries (issue 24, item 6): web workers kept
600-990 MB after OTLP requests carrying 3 MB of tool definitions, cached 256 at a time. Each cache
here is fed far more than its bound of distinct large entries, and both its own count and the
memory Python still holds afterwards (tracemalloc) stay within the bound."""

from __future__ import annotations

import gc
import json
import threading
import tracemalloc

import pytest
from toolscope_agent.engine import render, search, text
from toolscope_agent.engine.bytecache import ByteDict, ByteLRU, byte_lru_cache, deep_size
from toolscope_agent.engine.render import menu_from_names
from toolscope_agent.engine.search import search_index

MB = 1024 * 1024


def catalog(tag: str, tools: int = 3000, description_bytes: int = 1000) -> list[dict]:
    """About `tools` x `description_bytes` of distinct definitions (3 MB by default)."""
    return [{"name": f"{tag}_tool_{n}", "description": f"{tag} {n} " + "Reads a file. " * (description_bytes // 14),
             "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}} for n in range(tools)]


def retained(feed) -> int:
    """Bytes Python still holds once `feed()` has run and its garbage is gone."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        feed()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_deep_size_counts_what_an_object_holds_once():
    blob = "x" * 100_000
    assert 100_000 < deep_size(blob) < 100_100
    assert deep_size([blob, blob, {"k": blob}]) < 101_000  # one string, held three times
    assert deep_size({"a": ["y" * 50_000], "b": ("z" * 50_000,)}) > 100_000


def test_a_byte_lru_keeps_the_recent_entries_within_its_bytes():
    cache: ByteLRU[str, str] = ByteLRU(10_000)
    for n in range(100):
        cache.put(f"k{n}", "v" * 1000)
        assert cache.size_bytes <= 10_000
    assert 5 <= len(cache) < 10 and cache.get("k99") is not None and cache.get("k0") is None
    cache.get("k95")  # read: the most recent now
    cache.put("new", "v" * 6000)  # the least recently used go: k91 ... k94, k96, k97
    assert cache.get("k95") is not None and cache.get("k96") is None
    assert cache.put("huge", "v" * 20_000) == "v" * 20_000 and "huge" not in cache  # larger than the bound


def test_a_byte_dict_starts_over_when_full():
    cache: ByteDict[str, str] = ByteDict(10_000)
    for n in range(100):
        assert cache.add(f"k{n}", "v", 1000) == "v"
        assert cache.size_bytes <= 10_000 and len(cache) <= 10
    assert cache["k99"] == "v"


def test_byte_lru_cache_memoises_within_its_bytes_under_threads():
    calls = []

    @byte_lru_cache(64 * 1024)
    def parse(raw: str) -> list:
        calls.append(raw)
        return json.loads(raw)

    texts = [json.dumps(["w" * 10_000, n]) for n in range(40)]
    threads = [threading.Thread(target=lambda: [parse(t) for t in texts]) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert parse.cache.size_bytes <= 64 * 1024
    before = len(calls)
    assert parse(texts[-1]) == ["w" * 10_000, 39] and len(calls) == before  # the latest is kept


def test_the_progressive_menu_cache_holds_catalogs_by_bytes(monkeypatch):
    monkeypatch.setattr(render, "_MENU_CACHE", ByteLRU(16 * MB))

    def feed():
        for n in range(12):  # 12 distinct 3 MB catalogs: 36 MB of descriptions
            tools = catalog(f"menu{n}")
            names = [tool["name"] for tool in tools]
            menu_from_names(names, [tool["description"] for tool in tools], names[:5])
            assert render._MENU_CACHE.size_bytes <= 16 * MB

    held = retained(feed)
    assert len(render._MENU_CACHE) >= 1 and held < 16 * MB * 1.25, held


def test_the_search_index_cache_holds_catalogs_by_bytes(monkeypatch):
    monkeypatch.setattr(search, "_INDEXES", ByteLRU(24 * MB))

    def feed():
        for n in range(8):
            search_index(catalog(f"search{n}", tools=1000))
            assert search._INDEXES.size_bytes <= 24 * MB

    held = retained(feed)
    assert len(search._INDEXES) >= 1 and held < 24 * MB * 1.25, held


@pytest.mark.parametrize("cache", ["_TERMS", "_STEMS"])
def test_word_caches_hold_words_by_bytes(monkeypatch, cache):
    monkeypatch.setattr(text, "_TERMS", ByteDict(2 * MB))
    monkeypatch.setattr(text, "_STEMS", ByteDict(2 * MB))
    # Words of 50 kB (a base64 blob is one word): 400 of them are 20 MB.
    for n in range(400):
        text.terms("abcdefghij" * 5_000 + "z" * (n % 26 + 1) + " finding")
        assert getattr(text, cache).size_bytes <= 2 * MB
    assert text.terms("finding files") == ["find", "file"]
