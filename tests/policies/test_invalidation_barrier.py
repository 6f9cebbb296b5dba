"""The invalidation barrier (toolscope/invalidation.py) on the real Redis, with subscriptions in
this process: a subscriber that cannot answer is waited out until its lease ends, once, and never
longer than that lease."""

from __future__ import annotations

import logging
import time

import pytest
import redis
from django.core.cache import caches
from django.db import transaction

from tests.admin.conftest import admin_url
from tests.factories import make_key
from tests.policies.wsgi_client import redis_cache  # noqa: F401 - a fixture
from toolscope import invalidation
from toolscope.cache import PooledRedisCache
from toolscope.invalidation import LEASE_MS, invalidate_and_wait
from toolscope.outage_log import OutageLog
from toolscope.policies.models import PolicyLabel
from toolscope.telemetry.models import ApiKey

pytestmark = pytest.mark.usefixtures("redis_cache")


@pytest.fixture
def subscribe():
    started: list[invalidation.Subscription] = []

    def _subscribe() -> invalidation.Subscription:
        subscription = invalidation.Subscription(caches["default"], prefixes=["apikey:"], drop=lambda names: None,
                                                 tick=lambda: None)
        subscription.start()
        started.append(subscription)
        assert subscription.leased.wait(10), "no lease"
        return subscription

    yield _subscribe
    for subscription in started:
        subscription.close()


def _client():
    return caches["default"]._cache.get_client(write=True)


def _lease_left_ms(subscription: invalidation.Subscription) -> int:
    """How long Redis still counts the subscriber's lease."""
    client = _client()
    entry = client.hget(caches["default"].make_key(invalidation.REGISTRY), subscription.id)
    seconds, micros = client.time()
    return int(entry.split()[1]) - (seconds * 1000 + micros // 1000)


def test_a_hung_process_is_waited_out_once_not_at_every_barrier(subscribe):
    subscribe()
    hung = subscribe()
    with hung.handling:  # subscribed, but its thread handles nothing: no acknowledgement, no renewal
        assert invalidate_and_wait(names=["apikey:a"]) is False  # waits until its lease has ended
        started = time.monotonic()
        for name in ("apikey:b", "apikey:c", "apikey:d"):
            assert invalidate_and_wait(names=[name]) is False
        # Its lease is over: the live subscriber's acknowledgement is all these barriers wait for.
        assert time.monotonic() - started < LEASE_MS / 1000 / 2


def test_a_barrier_waits_no_longer_than_the_lease_of_a_process_that_does_not_answer(subscribe):
    hung = subscribe()
    with hung.handling:
        while (left := _lease_left_ms(hung)) > LEASE_MS / 2:  # until Redis counts it at most 1 s more
            time.sleep(0.01)
        started = time.monotonic()
        invalidate_and_wait(names=["apikey:a"])
        assert time.monotonic() - started < left / 1000 + 0.3  # not the whole LEASE_MS + MARGIN


def test_a_process_hung_for_minutes_keeps_its_entry_and_does_not_hold_barriers(subscribe):
    # As a process subscribed long ago whose thread hung: its connection still receives messages,
    # its entry's lease ended minutes ago. Publishing must not forget it (it would then count as
    # a subscriber nobody accounts for, and every barrier would wait the whole deadline).
    cache = caches["default"]
    registry = cache.make_key(invalidation.REGISTRY)
    connection = redis.Redis(connection_pool=cache._cache._get_connection_pool(True)).pubsub()
    connection.subscribe(invalidation.channel(cache))
    try:
        assert connection.get_message(timeout=5)["type"] == "subscribe"
        seconds, _ = _client().time()
        _client().hset(registry, "hung", f"0 {(seconds - 120) * 1000}")
        started = time.monotonic()
        assert invalidate_and_wait(names=["apikey:a"]) is False
        assert time.monotonic() - started < LEASE_MS / 1000 / 2
        assert _client().hget(registry, "hung") is not None
    finally:
        connection.close()


def _barriers() -> int:
    """Barriers published so far (no subscription runs here, so nothing else publishes)."""
    seq = _client().hget(caches["default"].make_key(invalidation.REGISTRY), "seq")
    return int(seq or 0)


def test_revoking_many_keys_in_the_admin_waits_one_barrier(root_client, project, django_capture_on_commit_callbacks):
    keys = [make_key(project, scopes=["policy:read"]).api_key for _ in range(3)]
    with django_capture_on_commit_callbacks(execute=True):
        response = root_client.post(admin_url(ApiKey, "changelist"),
                                    {"action": "revoke_keys", "_selected_action": [key.pk for key in keys]})
    assert response.status_code == 302
    assert ApiKey.objects.filter(revoked_at__isnull=True).count() == 0
    assert _barriers() == 1


def test_deleting_a_project_with_many_keys_waits_one_barrier(project, django_capture_on_commit_callbacks):
    for _ in range(3):
        make_key(project, scopes=["policy:read"])
    with django_capture_on_commit_callbacks(execute=True):
        project.delete()
    assert not ApiKey.objects.exists()
    assert _barriers() == 1


def test_rolling_back_many_labels_in_the_admin_waits_one_barrier(root_client, policy, tools, publish, move,
                                                                django_capture_on_commit_callbacks):
    first = publish(policy)
    move(first, "canary")
    policy.always_on.add(tools["git_diff"])
    second = publish(policy)
    move(second, "canary")
    labels = PolicyLabel.objects.filter(version=second)
    assert labels.count() == 2
    before = _barriers()
    with django_capture_on_commit_callbacks(execute=True):
        response = root_client.post(admin_url(PolicyLabel, "changelist"),
                                    {"action": "roll_back", "_selected_action": [label.pk for label in labels]})
    assert response.status_code == 302
    assert set(PolicyLabel.objects.values_list("version", flat=True)) == {first.pk}
    assert _barriers() == before + 1


def test_changes_in_one_transaction_are_all_made_before_their_one_barrier(db, monkeypatch,
                                                                         django_capture_on_commit_callbacks):
    made: list[str] = []
    monkeypatch.setattr(invalidation, "invalidate_and_wait", lambda names: made.append(f"barrier {names}"))
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        for name in ("a", "b"):
            invalidation.invalidate_on_commit(change=lambda name=name: made.append(name), names=[name])
        assert made == []
    assert made == ["a", "b", "barrier ['a', 'b']"]


def test_deployments_on_other_database_numbers_of_one_redis_have_channels_of_their_own(subscribe, settings):
    # Pub/sub ignores the database number: with one channel name, a deployment on db N would
    # count the other's processes as receivers and take their acknowledgements for its own.
    subscribe()
    ours = caches["default"]
    location, prefix = settings.CACHES["default"]["LOCATION"], settings.CACHES["default"]["KEY_PREFIX"]
    db = int(location.rsplit("/", 1)[1])
    theirs = PooledRedisCache(f"{location.rsplit('/', 1)[0]}/{db + 1}", {"KEY_PREFIX": prefix})  # never connected
    assert invalidation.channel(theirs) != invalidation.channel(ours)
    numsub = dict(_client().pubsub_numsub(invalidation.channel(ours), invalidation.channel(theirs)))
    assert numsub == {invalidation.channel(ours).encode(): 1, invalidation.channel(theirs).encode(): 0}


def test_a_barrier_that_cannot_be_published_waits_out_every_lease_and_says_so_once(monkeypatch, caplog):
    # As Redis refusing the script (OOM, a timeout after it ran): other processes may still hold
    # leases they renew, so returning at once could leave one answering from memory.
    monkeypatch.setattr(invalidation, "PUBLISH", "return redis.call('NOSUCHCOMMAND')")
    monkeypatch.setattr(invalidation, "LEASE_MS", 300)  # no subscription runs here
    monkeypatch.setattr(invalidation, "_unpublished", OutageLog(invalidation.logger, "could not be published"))
    with caplog.at_level(logging.WARNING, logger="toolscope.invalidation"):
        for name in ("apikey:a", "apikey:b"):
            started = time.monotonic()
            assert invalidate_and_wait(names=[name]) is False
            assert time.monotonic() - started >= 0.3 + invalidation.MARGIN
    assert len([record for record in caplog.records if record.name == "toolscope.invalidation"]) == 1
