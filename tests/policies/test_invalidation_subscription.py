"""The invalidation subscription's own failure handling (toolscope/invalidation.py), on the real
Redis: a Redis that accepts the connection but refuses what the subscription needs must not be
retried ten times a second with a traceback in the log each time."""

from __future__ import annotations

import logging

import pytest
from django.core.cache import caches

from tests.policies.wsgi_client import redis_cache  # noqa: F401 - a fixture
from toolscope import invalidation

pytestmark = pytest.mark.usefixtures("redis_cache")


def test_a_subscription_that_never_works_backs_off_and_warns_once(monkeypatch, caplog):
    # As a Redis that refuses EVAL (some managed services): connecting and subscribing succeed,
    # renewing the lease fails at once, every time.
    monkeypatch.setattr(invalidation, "PUBLISH", "return redis.call('NOSUCHCOMMAND')")
    subscription = invalidation.Subscription(caches["default"], prefixes=["apikey:"], drop=lambda names: None,
                                             tick=lambda: None)
    delays: list[float] = []

    def wait(timeout: float | None = None) -> bool:  # records each pause between attempts instead of sleeping
        delays.append(timeout)
        if len(delays) == len(invalidation.RETRY_SECONDS) + 1:
            subscription._stopped.set()
        return subscription._stopped.is_set()

    monkeypatch.setattr(subscription._stopped, "wait", wait)
    with caplog.at_level(logging.DEBUG, logger="toolscope.invalidation"):
        subscription._run()  # in this thread: returns once stopped
    assert delays == [*invalidation.RETRY_SECONDS, invalidation.RETRY_SECONDS[-1]]
    warnings = [record for record in caplog.records if record.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "subscription lost" in warnings[0].getMessage()
    assert subscription.trusted_until == 0.0 and not subscription.leased.is_set()
