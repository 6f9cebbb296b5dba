"""Batch lifecycle: attempts, failure after N, retry from the admin, the sweeper, the metrics."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.admin.conftest import admin_url
from toolscope.telemetry.models import BatchStatus, IngestBatch, QuarantinedEvent, Session, Turn
from toolscope.telemetry.services.batches import batches_retry, batches_sweep, worker_metrics
from toolscope.telemetry.services.processing import BatchResult, batch_process
from workers import tasks

GOOD = {"events": [{"type": "session", "id": "s1", "session_id": "s1", "action": "start",
                    "timestamp": "2026-11-22T10:00:00+00:00"}]}
# Passes ingest validation's shape but not processing: a turn without its required index.
BROKEN = {"events": [{"type": "turn", "id": "t1", "session_id": "s1", "timestamp": "2026-11-22T10:00:00+00:00"}]}


def make_batch(project, payload=GOOD, **fields) -> IngestBatch:
    fields.setdefault("event_count", len(payload["events"]))
    return IngestBatch.objects.create(project=project, payload=payload, **fields)


@pytest.fixture
def enqueued(monkeypatch):
    sent = []

    def enqueue(*, batch_id, day):
        # The message carries the batch's day: the worker looks it up in that partition alone.
        assert day == IngestBatch.objects.get(pk=batch_id).expires_on
        sent.append(batch_id)

    monkeypatch.setattr("toolscope.telemetry.services.batches.batch_enqueue", enqueue)
    return sent


def test_processing_marks_done_and_counts_the_attempt(project):
    batch = make_batch(project)
    assert batch_process(batch_id=batch.pk) is BatchResult.DONE
    batch.refresh_from_db()
    assert (batch.status, batch.attempts, batch.error) == (BatchStatus.DONE, 1, "")
    assert batch.finished_at is not None


def test_a_done_batch_is_not_processed_again(project):
    batch = make_batch(project)
    batch_process(batch_id=batch.pk)
    Session.objects.all().delete()
    assert batch_process(batch_id=batch.pk) is BatchResult.SKIPPED
    assert not Session.objects.exists()


def test_an_event_processing_fails_on_is_quarantined_and_the_rest_of_its_batch_commits(project):
    batch = make_batch(project, {"events": [*GOOD["events"], *BROKEN["events"]]})
    assert tasks.process_batch.apply(args=[batch.pk]).result is True
    batch.refresh_from_db()
    assert (batch.status, batch.attempts, batch.error) == (BatchStatus.DONE, 1, "")
    assert Session.objects.filter(client_id="s1").exists()
    quarantined = QuarantinedEvent.objects.get()
    assert (quarantined.batch_id, quarantined.event_type, quarantined.client_id) == (batch.pk, "turn", "t1")
    assert quarantined.event == BROKEN["events"][0]
    assert quarantined.reason.startswith("KeyError at ")


# A failure that is no event's fault: the stored payload itself is not a batch.
CORRUPT = {"not events": [{"type": "turn", "id": "secret-value-1234"}]}


def test_a_failing_batch_is_retried_then_failed_after_max_attempts(project):
    batch = IngestBatch.objects.create(project=project, payload=CORRUPT, event_count=1)
    for attempt in range(1, tasks.MAX_ATTEMPTS):
        with pytest.raises(Exception):  # noqa: B017,PT011 - the task asks Celery to retry
            tasks.process_batch.apply(args=[batch.pk], throw=True)
        batch.refresh_from_db()
        assert (batch.status, batch.attempts) == (BatchStatus.PENDING, attempt)
    assert tasks.process_batch.apply(args=[batch.pk]).result is False
    batch.refresh_from_db()
    assert batch.status == BatchStatus.FAILED
    assert batch.attempts == tasks.MAX_ATTEMPTS
    assert batch.error.startswith("KeyError at processing.py:")
    assert "events" not in batch.error  # the class and the place, never the values


def test_retrying_a_failed_batch_resets_it_and_enqueues_it(project, django_capture_on_commit_callbacks, enqueued):
    failed = make_batch(project, status=BatchStatus.FAILED, attempts=5, error="boom")
    done = make_batch(project, status=BatchStatus.DONE)
    with django_capture_on_commit_callbacks(execute=True):
        assert batches_retry(batch_ids=[failed.pk, done.pk]) == 1
    failed.refresh_from_db()
    assert (failed.status, failed.attempts, failed.error) == (BatchStatus.PENDING, 0, "")
    assert enqueued == [failed.pk]


def test_the_admin_retry_action_retries_failed_batches(project, superuser, client, enqueued,
                                                      django_capture_on_commit_callbacks):
    failed = make_batch(project, status=BatchStatus.FAILED, attempts=5, error="boom")
    client.force_login(superuser)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(admin_url(IngestBatch, "changelist"),
                               {"action": "retry_batches", "_selected_action": [failed.pk]}, follow=True)
    assert "1 failed batch(es) queued again" in response.content.decode()
    assert enqueued == [failed.pk]


def test_the_sweeper_re_enqueues_only_stale_batches(project, enqueued):
    now = timezone.now()
    lost = make_batch(project)
    IngestBatch.objects.filter(pk=lost.pk).update(received_at=now - timedelta(minutes=5))
    fresh = make_batch(project)
    dead_worker = make_batch(project, status=BatchStatus.PROCESSING, started_at=now - timedelta(minutes=30))
    busy_worker = make_batch(project, status=BatchStatus.PROCESSING, started_at=now)
    make_batch(project, status=BatchStatus.DONE)
    swept = batches_sweep(pending_after=timedelta(minutes=1), processing_after=timedelta(minutes=10))
    assert sorted(swept) == sorted([lost.pk, dead_worker.pk])
    assert sorted(enqueued) == sorted(swept)
    assert fresh.pk not in swept and busy_worker.pk not in swept


def test_worker_metrics_report_lag_throughput_and_failures(project, client):
    old = make_batch(project)
    IngestBatch.objects.filter(pk=old.pk).update(received_at=timezone.now() - timedelta(seconds=90))
    make_batch(project, status=BatchStatus.DONE, finished_at=timezone.now(), event_count=600)
    make_batch(project, status=BatchStatus.FAILED)
    metrics = worker_metrics()
    assert 89 <= metrics["oldest_pending_seconds"] <= 120
    assert metrics["events_per_second"] == 2.0  # 600 events over the 300 s window
    assert metrics["failed_batches"] == 1
    readyz = client.get("/readyz").json()
    assert readyz["checks"]["worker"]["batches"]["failed_batches"] == 1


def test_quarantined_events_are_listed_counted_and_retried_from_the_admin(
        project, superuser, client, django_capture_on_commit_callbacks, monkeypatch):
    batch = make_batch(project, {"events": [*GOOD["events"], *BROKEN["events"]]})
    batch_process(batch_id=batch.pk)
    quarantined = QuarantinedEvent.objects.get()
    assert worker_metrics()["quarantined_events"] == 1
    assert client.get("/readyz").json()["checks"]["worker"]["batches"]["quarantined_events"] == 1
    client.force_login(superuser)
    listing = client.get(admin_url(QuarantinedEvent, "changelist")).content.decode()
    assert "t1" in listing and "KeyError" in listing
    assert "quarantined events: 1" in client.get(admin_url(IngestBatch, "changelist")).content.decode()

    # The cause is fixed (here: the event is repaired as a deploy's new code would read it).
    QuarantinedEvent.objects.filter(pk=quarantined.pk).update(event={**BROKEN["events"][0], "index": 0})
    sent = []
    monkeypatch.setattr("toolscope.telemetry.services.ingest.batch_enqueue",
                        lambda *, batch_id, day: sent.append(batch_id))
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(admin_url(QuarantinedEvent, "changelist"),
                               {"action": "retry_events", "_selected_action": [quarantined.pk]}, follow=True)
    assert "1 event(s) sent to the workers again" in response.content.decode()
    assert not QuarantinedEvent.objects.exists()
    retry = IngestBatch.objects.get(pk=sent[0])
    assert retry.payload == {"events": [{**BROKEN["events"][0], "index": 0}]}
    assert batch_process(batch_id=retry.pk) is BatchResult.DONE
    assert Turn.objects.filter(client_id="t1", index=0).exists()
