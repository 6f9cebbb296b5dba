"""A revoked key stops working at once, even on the cached GET /api/v1/policy path."""

from __future__ import annotations

from django.core.cache import cache

from tests.factories import make_key
from toolscope.telemetry.services.api_keys import api_key_revoke


def test_revoking_a_key_stops_it_on_the_cached_policy_path(api_for, project, django_capture_on_commit_callbacks):
    cache.clear()
    created = make_key(project, scopes=["policy:read"])
    client = api_for(created.secret)
    assert client.get("/api/v1/policy?label=production").status_code == 404  # verified, nothing published
    with django_capture_on_commit_callbacks(execute=True):
        api_key_revoke(api_key=created.api_key)
    assert client.get("/api/v1/policy?label=production").status_code == 401
