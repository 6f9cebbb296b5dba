"""A rollup is queued once however many batches finish before it runs (workers.tasks)."""

from __future__ import annotations

import uuid

import kombu.exceptions
import pytest
import redis
from django.core.cache import cache

from workers import tasks


@pytest.fixture
def queue(settings):
    settings.INGEST_QUEUE = f"test_rollups_{uuid.uuid4().hex[:8]}"
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    cache.delete(tasks.ROLLUP_QUEUED_KEY)
    yield lambda: broker.llen(settings.INGEST_QUEUE)
    broker.delete(settings.INGEST_QUEUE)
    cache.delete(tasks.ROLLUP_QUEUED_KEY)


def test_batches_finishing_while_a_rollup_waits_queue_no_other(db, queue):
    for _ in range(5):
        tasks.rollup_request()
    assert queue() == 1


def test_once_the_rollup_starts_the_next_batch_queues_another(db, queue):
    tasks.rollup_request()
    tasks.rollup_dirty.apply()  # the queued rollup runs (here, in-process)
    tasks.rollup_request()
    assert queue() == 2



def test_a_rollup_that_could_not_be_queued_leaves_no_flag_behind(db, queue, monkeypatch):
    def broker_down(*args, **kwargs):
        raise kombu.exceptions.OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(tasks.rollup_dirty, "apply_async", broker_down)
    tasks.rollup_request()  # logged, not raised: the batch is done, beat's rollup catches up
    monkeypatch.undo()
    tasks.rollup_request()  # the next batch queues one at once
    assert queue() == 1
