"""A rollup is queued once however many batches finish before it runs (workers.tasks)."""

from __future__ import annotations

import json
import time
import uuid

import kombu.exceptions
import pytest
import redis
from django.core.cache import cache
from django.utils import timezone

from workers import tasks


@pytest.fixture
def queue(settings):
    settings.INGEST_QUEUE = f"test_rollups_{uuid.uuid4().hex[:8]}"
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    cache.delete_many([tasks.ROLLUP_QUEUED_KEY, tasks.ROLLUP_LAST_KEY])
    yield lambda: broker.llen(settings.INGEST_QUEUE)
    broker.delete(settings.INGEST_QUEUE)
    cache.delete_many([tasks.ROLLUP_QUEUED_KEY, tasks.ROLLUP_LAST_KEY])


def test_batches_finishing_while_a_rollup_waits_queue_no_other(db, queue):
    for _ in range(5):
        tasks.rollup_request()
    assert queue() == 1


def test_once_the_rollup_starts_the_next_batch_queues_another(db, queue):
    tasks.rollup_request()
    tasks.rollup_dirty.apply(task_id=cache.get(tasks.ROLLUP_QUEUED_KEY))  # the queued rollup runs (in-process)
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


def test_the_next_rollup_is_spaced_after_a_slow_one(settings):
    settings.ROLLUP_MIN_INTERVAL_SECONDS = 2
    cache.delete(tasks.ROLLUP_LAST_KEY)
    now = time.time()
    assert tasks.rollup_delay(now) == 0  # none ran yet
    cache.set(tasks.ROLLUP_LAST_KEY, (now - 1, 4.0))
    assert tasks.rollup_delay(now) == 11  # 3 x 4 s from its start
    cache.set(tasks.ROLLUP_LAST_KEY, (now - 1, 0.1))
    assert tasks.rollup_delay(now) == 1  # the minimum interval, 2 s from its start
    cache.set(tasks.ROLLUP_LAST_KEY, (now, 100.0))
    assert tasks.rollup_delay(now) == tasks.ROLLUP_MAX_DELAY_SECONDS < tasks.ROLLUP_QUEUED_SECONDS
    cache.set(tasks.ROLLUP_LAST_KEY, (now - 60, 4.0))
    assert tasks.rollup_delay(now) == 0
    cache.delete(tasks.ROLLUP_LAST_KEY)


def test_a_rollup_records_its_run_and_the_next_one_is_queued_with_a_countdown(db, queue, settings):
    settings.ROLLUP_MIN_INTERVAL_SECONDS = 5
    tasks.rollup_dirty.apply()
    started, seconds, running = cache.get(tasks.ROLLUP_LAST_KEY)
    assert 0 <= time.time() - started < 60 and seconds >= 0 and running is False
    tasks.rollup_request()
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    message = json.loads(broker.lindex(settings.INGEST_QUEUE, 0))
    assert message["headers"]["task"] == "workers.rollup_dirty"
    assert message["headers"]["eta"] is not None  # held by the worker until ~5 s after the last start


def test_a_rollup_queued_while_one_runs_is_spaced_from_that_ones_start(db, queue, settings, monkeypatch):
    """With two worker processes, a batch finishing while a slow rollup runs must not start a
    second one beside it: the running one's start is recorded when it starts."""
    settings.ROLLUP_MIN_INTERVAL_SECONDS = 0
    cache.set(tasks.ROLLUP_LAST_KEY, (time.time() - 3600, 4.0))  # the last one, long ago, ran 4 s
    delays = []

    def refresh_while_a_batch_finishes(**kwargs):
        delays.append(tasks.rollup_delay())
        return 0

    monkeypatch.setattr(tasks, "rollups_refresh", refresh_while_a_batch_finishes)
    tasks.rollup_dirty.apply()
    assert 11 <= delays[0] <= 12  # 3 x 4 s from this one's start


def test_another_rollup_gives_way_to_the_queued_one_and_to_a_recent_one(db, queue, settings, monkeypatch):
    """Beat's periodic rollup (or a duplicate message) must not run beside or right after the
    queued one: that made rollups of seconds run back to back under load."""
    settings.ROLLUP_MIN_INTERVAL_SECONDS = 2
    runs = []
    monkeypatch.setattr(tasks, "rollups_refresh", lambda **kwargs: runs.append(1) or 0)
    tasks.rollup_request()
    queued = cache.get(tasks.ROLLUP_QUEUED_KEY)
    tasks.rollup_dirty.apply()  # beat's, while one is queued
    assert (runs, cache.get(tasks.ROLLUP_QUEUED_KEY)) == ([], queued)
    tasks.rollup_dirty.apply(task_id=queued)  # the queued one
    assert runs == [1] and cache.get(tasks.ROLLUP_QUEUED_KEY) is None
    tasks.rollup_dirty.apply()  # beat's, right after it
    assert runs == [1]
    cache.set(tasks.ROLLUP_LAST_KEY, (time.time() - 60, 1.0))
    tasks.rollup_dirty.apply()  # beat's, a minute later: the safety net runs
    assert runs == [1, 1]


def test_the_queued_rollup_due_while_the_last_still_runs_waits_for_it(db, queue, settings, monkeypatch):
    """Queued right after a slow rollup started (spaced by that one's previous, short run), the
    next one is due before it ends: it retries later instead of scanning the same hours beside it."""
    from celery.exceptions import Retry

    settings.ROLLUP_MIN_INTERVAL_SECONDS = 0
    runs = []
    monkeypatch.setattr(tasks, "rollups_refresh", lambda **kwargs: runs.append(1) or 0)
    monkeypatch.setattr(tasks.rollup_dirty, "apply_async", lambda *args, **kwargs: None)  # the retry's message
    cache.set(tasks.ROLLUP_LAST_KEY, (time.time() - 2, 0.1, True))  # started 2 s ago, still running
    cache.set(tasks.ROLLUP_QUEUED_KEY, "the-queued-one")
    assert 3.9 < tasks.rollup_delay() <= 4  # 3 x the 2 s it has run so far, from its start
    tasks.rollup_dirty.push_request(id="the-queued-one", is_eager=False)
    try:
        with pytest.raises(Retry):
            tasks.rollup_dirty.run()
    finally:
        tasks.rollup_dirty.pop_request()
    assert runs == [] and cache.get(tasks.ROLLUP_QUEUED_KEY) == "the-queued-one"
    cache.set(tasks.ROLLUP_LAST_KEY, (time.time() - 2, 0.1, False))  # it finished
    tasks.rollup_dirty.apply(task_id="the-queued-one")
    assert runs == [1]


def test_a_rollup_that_gives_way_to_a_recent_one_leaves_no_mark_stranded(db, queue, settings, project):
    """A queued rollup whose flag expired while it waited (or one of another process, with a
    per-process cache) finds that one ran just now: it queues the next one rather than return
    with marks nobody will refresh (beat may not run; no batch may follow)."""
    from toolscope.telemetry.services.rollups import dirty_hours_mark

    settings.ROLLUP_MIN_INTERVAL_SECONDS = 30
    cache.set(tasks.ROLLUP_LAST_KEY, (time.time() - 1, 0.1, False))
    tasks.rollup_dirty.apply()  # nothing marked: gives way, queues nothing
    assert queue() == 0
    dirty_hours_mark(project_id=project.pk, timestamps=[timezone.now()], full=False)
    tasks.rollup_dirty.apply()
    assert queue() == 1 and cache.get(tasks.ROLLUP_QUEUED_KEY) is not None

