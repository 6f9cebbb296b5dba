"""The cached API-key check: a hit needs no query, a revoked key stops working once forgotten."""

from __future__ import annotations

import hashlib

import pytest
from django.core.cache import cache

from api import keycache
from api.keycache import api_key_cache_forget, api_key_cache_key, api_key_verify_cached
from tests.factories import make_key
from tests.policies.wsgi_client import redis_cache  # noqa: F401 - a fixture
from toolscope.telemetry.models import ApiKey
from toolscope.telemetry.services.api_keys import api_key_revoke

URL = "/api/v1/policy"


@pytest.fixture
def created(project):
    return make_key(project, scopes=["policy:read"])


def test_the_cache_entry_is_named_from_what_the_row_stores(created):
    # The revoking side knows only the row: prefix + secret_hash must name the same entry.
    secret = created.secret.split("_", 2)[2]
    assert created.api_key.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert api_key_cache_key(prefix=created.api_key.prefix, secret_hash=created.api_key.secret_hash) == (
        f"apikey:{created.api_key.prefix}:{created.api_key.secret_hash}"
    )


def test_a_hit_returns_the_key_its_project_and_scopes_without_a_query(created, project, django_assert_num_queries):
    api_key_verify_cached(raw=created.secret)
    with django_assert_num_queries(0):
        cached = api_key_verify_cached(raw=created.secret)
    assert (cached.pk, cached.project_id, cached.project.slug) == (created.api_key.pk, project.pk, "acme")
    assert cached.has_scope("policy:read")
    assert not cached.has_scope("ingest")


def test_a_wrong_secret_with_a_cached_prefix_is_refused(created):
    api_key_verify_cached(raw=created.secret)
    assert api_key_verify_cached(raw=created.secret[:-2] + "xx") is None


@pytest.mark.parametrize("raw", ["", "ts_", "ts_abc", "ts__secret", "sk_abc_def", "ts_abc_"])
def test_malformed_keys_are_refused(raw, db):
    assert api_key_verify_cached(raw=raw) is None


def test_a_revoked_key_gets_a_401_once_its_entry_is_forgotten(agent, agent_key, policy, publish):
    publish(policy)
    assert agent.get(URL).status_code == 200  # the key is now cached
    api_key_revoke(api_key=agent_key.api_key)
    api_key_cache_forget(api_key=agent_key.api_key)  # what revoking calls once it commits
    response = agent.get(URL)
    assert response.status_code == 401
    assert response.json()["detail"] == "The API key is unknown or revoked."





@pytest.fixture(params=["redis", "locmem"])
def any_cache(request):
    if request.param == "redis":
        request.getfixturevalue("redis_cache")  # production's cache on the real Redis; else the tests' locmem


def test_a_fill_that_read_the_key_before_its_revocation_committed_does_not_cache_it(
    any_cache, created, monkeypatch, django_capture_on_commit_callbacks
):
    # A request reads the row (valid), the revocation commits and drops the entry everywhere,
    # then the request stores what it read: it must not land.
    read = keycache.api_key_verify

    def read_then_revoked(*, raw):
        row = read(raw=raw)
        with django_capture_on_commit_callbacks(execute=True):
            api_key_revoke(api_key=ApiKey.objects.get(pk=row.pk))
        return row

    monkeypatch.setattr(keycache, "api_key_verify", read_then_revoked)
    assert api_key_verify_cached(raw=created.secret) is not None  # that request began before the revocation
    monkeypatch.undo()
    assert cache.get(api_key_cache_key(prefix=created.api_key.prefix, secret_hash=created.api_key.secret_hash)) is None
    assert api_key_verify_cached(raw=created.secret) is None


def test_a_fill_before_any_change_is_kept(any_cache, created, django_assert_num_queries):
    api_key_verify_cached(raw=created.secret)
    with django_assert_num_queries(0):
        assert api_key_verify_cached(raw=created.secret).pk == created.api_key.pk
