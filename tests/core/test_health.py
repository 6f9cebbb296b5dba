"""/healthz says the process is up; /readyz says whether its dependencies answer and whether a
worker has reported in lately."""

import time

import pytest
from django.core.cache import cache
from django.test import override_settings

from toolscope import health
from toolscope.heartbeat import HEARTBEAT_KEY, heartbeat_record

STALE = 90


@pytest.fixture
def heartbeats(settings):
    """A web process past its start-up grace, no heartbeat recorded yet."""
    settings.WORKER_HEARTBEAT_STALE_SECONDS = STALE
    cache.delete(HEARTBEAT_KEY)
    original = health._STARTED
    health._STARTED = time.monotonic() - 10 * STALE
    yield
    health._STARTED = original
    cache.delete(HEARTBEAT_KEY)


def heartbeat_seconds_ago(seconds: float) -> None:
    cache.set(HEARTBEAT_KEY, time.time() - seconds, timeout=None)


def test_healthz_answers_without_touching_dependencies(client, db, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_reports_database_broker_and_a_fresh_worker_heartbeat(client, db, heartbeats):
    heartbeat_record()
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ready"
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["database"]["vendor"] == "postgresql"
    assert body["checks"]["broker"]["ok"] is True
    assert body["checks"]["broker"]["mode"] == "broker"
    assert body["checks"]["worker"]["ok"] is True
    assert body["checks"]["worker"]["last_heartbeat_seconds_ago"] < STALE
    assert body["checks"]["worker"]["stale_after_seconds"] == STALE


# Port 1 on loopback refuses connections at once.
@override_settings(CELERY_TASK_ALWAYS_EAGER=False, CELERY_BROKER_URL="redis://127.0.0.1:1/0")
def test_readyz_is_unavailable_when_the_broker_is_unreachable(client, db, heartbeats):
    heartbeat_record()
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 503
    assert body["status"] == "unavailable"
    assert body["failing"] == ["broker"]
    assert body["checks"]["broker"]["ok"] is False
    assert "error" in body["checks"]["broker"]
    assert body["checks"]["database"]["ok"] is True


def test_a_heartbeat_older_than_the_limit_makes_readyz_unavailable_and_names_the_worker(client, db, heartbeats):
    heartbeat_seconds_ago(STALE + 30)
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 503, body
    assert body["status"] == "unavailable"
    assert body["failing"] == ["worker"]
    worker = body["checks"]["worker"]
    assert worker["ok"] is False
    assert worker["last_heartbeat_seconds_ago"] >= STALE + 30
    assert worker["stale_after_seconds"] == STALE
    assert "heartbeat" in worker["error"]
    assert "batches" in worker  # what the workers left behind stays visible while they are away


def test_a_heartbeat_within_the_limit_is_ready(client, db, heartbeats):
    heartbeat_seconds_ago(STALE - 30)
    response = client.get("/readyz")
    assert response.status_code == 200, response.json()
    assert response.json()["checks"]["worker"]["ok"] is True


def test_no_heartbeat_ever_after_the_start_up_grace_is_unavailable(client, db, heartbeats):
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 503, body
    assert body["failing"] == ["worker"]
    assert body["checks"]["worker"]["last_heartbeat_seconds_ago"] is None
    assert "no worker heartbeat yet" in body["checks"]["worker"]["error"]


def test_a_freshly_started_web_process_without_a_heartbeat_is_ready_while_starting(client, db, heartbeats):
    health._STARTED = time.monotonic()
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["checks"]["worker"]["starting"] is True
    assert body["checks"]["worker"]["last_heartbeat_seconds_ago"] is None


def test_a_fresh_process_still_reports_a_stale_heartbeat_from_before(client, db, heartbeats):
    # A web restart while the workers are down must not hide them behind the start-up grace.
    health._STARTED = time.monotonic()
    heartbeat_seconds_ago(STALE + 30)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["failing"] == ["worker"]


@override_settings(CELERY_TASK_ALWAYS_EAGER=True)
def test_the_embedded_default_has_no_worker_to_wait_for(client, db, heartbeats):
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["checks"]["worker"]["mode"] == "eager"
    assert body["checks"]["broker"]["mode"] == "eager"
