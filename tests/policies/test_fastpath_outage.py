"""While Redis is down every warm poll fails over to Django; the log says so once a minute, not
once per poll with a traceback."""

from __future__ import annotations

import logging

from django.test import RequestFactory

from api.fastpath import PolicyRevalidation, policy_revalidation


def test_while_the_cache_is_down_polls_warn_once_then_once_a_minute(settings, agent_key, caplog):
    settings.CACHES = {"default": {"BACKEND": "toolscope.cache.PooledRedisCache",
                                   "LOCATION": "redis://127.0.0.1:1/0", "KEY_PREFIX": "down"}}  # nothing listens
    settings.POLICY_POLL_MEMORY = False  # no subscription thread: only the polls' own round trips fail
    layer = policy_revalidation(lambda environ, start_response: [b"django"])
    assert isinstance(layer, PolicyRevalidation)
    now = [1000.0]
    layer.unavailable.clock = lambda: now[0]
    environ = RequestFactory().get("/api/v1/policy?label=production", HTTP_AUTHORIZATION=f"Bearer {agent_key.secret}",
                                   HTTP_IF_NONE_MATCH='"etag"').environ

    def poll() -> None:
        assert layer(dict(environ), lambda status, headers, exc_info=None: None) == [b"django"]

    with caplog.at_level(logging.WARNING, logger="api.fastpath"):
        for _ in range(20):
            poll()
            now[0] += 1  # 20 polls over 20 s: one warning
        now[0] += 45  # a minute after the first warning
        poll()
    warnings = [record for record in caplog.records if record.name == "api.fastpath"]
    assert len(warnings) == 2
    assert warnings[0].exc_info is not None and "cache unavailable" in warnings[0].getMessage()
    assert warnings[1].exc_info is None and "(20 times in the last 60 s" in warnings[1].getMessage()
