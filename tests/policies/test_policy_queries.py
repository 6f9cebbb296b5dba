"""A warm GET /api/v1/policy runs no database query: not for the key, not for the document."""

from __future__ import annotations

import pytest

URL = "/api/v1/policy"


@pytest.fixture
def version(policy, publish):
    return publish(policy)


def test_a_warm_304_runs_no_query(agent, version, django_assert_num_queries):
    agent.get(URL, HTTP_IF_NONE_MATCH=version.etag)  # verifies the key, loads the document
    with django_assert_num_queries(0):
        response = agent.get(URL, HTTP_IF_NONE_MATCH=version.etag)
    assert response.status_code == 304


def test_a_warm_200_runs_no_query(agent, version, django_assert_num_queries):
    agent.get(URL)
    with django_assert_num_queries(0):
        response = agent.get(URL)
    assert response.status_code == 200
    assert response["ETag"] == version.etag


def test_a_warm_404_runs_no_query(agent, policy, django_assert_num_queries):
    agent.get(URL)
    with django_assert_num_queries(0):
        assert agent.get(URL).status_code == 404


def test_a_cold_request_runs_a_handful(agent, version, django_assert_max_num_queries):
    # Key lookup and its last-use update, then the label with its version.
    with django_assert_max_num_queries(3):
        assert agent.get(URL).status_code == 200


def test_the_rate_limit_keeps_counting_on_the_warm_path(agent, version, settings, django_assert_num_queries):
    settings.API_RATE_LIMIT_PER_MINUTE = 2
    agent.get(URL)
    with django_assert_num_queries(0):
        assert agent.get(URL).status_code == 200
        assert agent.get(URL).status_code == 429


@pytest.fixture
def cache_trips(monkeypatch):
    """The cache operations a request makes, counted the way a Redis client would send them."""
    from django.core.cache.backends.locmem import LocMemCache

    trips, depth = [], [0]

    def counted(name, method):
        def wrapper(self, *args, **kwargs):
            if depth[0] == 0:  # get_many calls get() per key inside; that is still one trip
                trips.append(name)
            depth[0] += 1
            try:
                return method(self, *args, **kwargs)
            finally:
                depth[0] -= 1

        return wrapper

    for name in ("get", "get_many", "set", "add", "incr", "delete"):
        monkeypatch.setattr(LocMemCache, name, counted(name, getattr(LocMemCache, name)))
    return trips


def test_a_warm_304_reads_the_cache_once(agent, version, cache_trips, settings):
    settings.API_RATE_LIMIT_PER_MINUTE = 0  # the rate limit counts in the cache on its own
    for _ in range(3):  # a miss, then the entries this process builds its instance from
        agent.get(URL, HTTP_IF_NONE_MATCH=version.etag)
    cache_trips.clear()
    assert agent.get(URL, HTTP_IF_NONE_MATCH=version.etag).status_code == 304
    assert cache_trips == ["get_many"]
