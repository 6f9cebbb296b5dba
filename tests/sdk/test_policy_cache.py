"""PolicyCache against a real local HTTP server: fresh, revalidated, kept, defaulted, never stuck."""

from __future__ import annotations

import threading
import time

import pytest
from toolscope_agent.policy import DEFAULT_POLICY, PolicyCache

from tests.sdk.server import Action, RecordingServer, free_port

V1 = {"schema_version": 1, "version": 1, "etag": '"v1-aaaa"', "selection": {"mode": "all"}}
V2 = {"schema_version": 1, "version": 2, "etag": '"v2-bbbb"', "selection": {"mode": "context_rules"}}


def ok(document):
    return Action(status=200, body=document, headers={"ETag": document["etag"]})


NOT_MODIFIED = Action(status=304, headers={"Connection": "close"})


@pytest.fixture
def cache_dir(tmp_path):
    return tmp_path / "cache"


def make(server_url: str, cache_dir, **options) -> PolicyCache:
    options.setdefault("timeout", 1.0)
    return PolicyCache(server_url, "ts_key_secret", cache_dir=cache_dir, **options)


def test_the_first_get_fetches_and_keeps_a_copy_on_disk(server, cache_dir):
    server.then(ok(V1))
    cache = make(server.url, cache_dir)
    assert cache.get() == V1
    assert cache.source == "server"
    request = server.requests[0]
    assert request.path == "/api/v1/policy?label=production"
    assert request.headers["authorization"] == "Bearer ts_key_secret"
    assert cache.path.exists() and "ts_key_secret" not in cache.path.read_text() + str(cache.path)


def test_an_expired_copy_is_revalidated_in_the_background_with_its_etag(server, cache_dir):
    server.then(ok(V1), NOT_MODIFIED, ok(V2))
    cache = make(server.url, cache_dir, ttl=0)
    assert cache.get() == V1
    assert cache.get() == V1  # served at once while the 304 is fetched
    requests = server.wait_requests(2)
    assert requests[1].headers["if-none-match"] == '"v1-aaaa"'
    time.sleep(0.1)
    cache.get()  # the next revalidation brings the new version
    server.wait_requests(3)
    deadline = time.monotonic() + 5
    while cache.get() != V2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert cache.get() == V2


def test_with_the_server_down_a_new_process_starts_from_the_last_good_copy(server, cache_dir):
    server.then(ok(V1))
    make(server.url, cache_dir).get()
    server.stop()
    started = time.monotonic()
    again = make(server.url, cache_dir)
    assert again.get() == V1
    assert again.source == "disk"
    assert time.monotonic() - started < 0.5


def test_with_nothing_ever_fetched_the_built_in_default_applies(cache_dir):
    cache = make(f"http://127.0.0.1:{free_port()}", cache_dir)
    assert cache.get() == DEFAULT_POLICY
    assert cache.source == "default"


def test_a_hanging_server_never_blocks_the_agent_longer_than_the_timeout(cache_dir):
    hold = threading.Event()
    hanging = RecordingServer().start().then(Action(status=200, body=V1, hold=hold))
    try:
        started = time.monotonic()
        cache = make(hanging.url, cache_dir, timeout=0.5)
        assert cache.get() == DEFAULT_POLICY
        assert time.monotonic() - started < 1.5
    finally:
        hold.set()
        hanging.stop()


def test_an_error_answer_keeps_the_current_copy(server, cache_dir):
    server.then(ok(V1), Action(status=500))
    cache = make(server.url, cache_dir)
    assert cache.get() == V1
    assert cache.refresh() is False
    assert cache.get() == V1 and cache.source == "server"
