"""Under a backlog, a batch's first attempt takes the project's other pending batches with it
(processing.batch_process): one transaction, each batch done once, failures kept apart."""

from __future__ import annotations

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from tests.workers.database import other_connection
from toolscope.telemetry.models import BatchStatus, IngestBatch, QuarantinedEvent, Session, ToolCall
from toolscope.telemetry.services import processing
from toolscope.telemetry.services.processing import BatchResult, batch_process
from workers import tasks

WHEN = "2026-11-22T10:00:00+00:00"


def session_batch(project, session: str, *, calls: int = 1, **session_fields) -> IngestBatch:
    events = [{"type": "session", "id": f"{session}:start:{len(session_fields)}", "session_id": session,
               "action": "start", "timestamp": WHEN, **session_fields}]
    events += [{"type": "tool_call", "id": f"{session}:c{i}:{IngestBatch.objects.count()}", "session_id": session,
                "turn_index": 0, "tool_name": "bash", "arguments": {}, "output": f"out {i}", "timestamp": WHEN}
               for i in range(calls)]
    return IngestBatch.objects.create(project=project, payload={"events": events}, event_count=len(events))


def statuses(*batches) -> list[tuple[str, int]]:
    return [IngestBatch.objects.values_list("status", "attempts").get(pk=b.pk) for b in batches]


def test_the_first_attempt_takes_the_projects_pending_batches_along(project, other_project):
    first, second, third = (session_batch(project, f"s{i}", calls=2) for i in range(3))
    elsewhere = session_batch(other_project, "x")
    assert batch_process(batch_id=first.pk) is BatchResult.DONE
    assert statuses(first, second, third) == [(BatchStatus.DONE, 1)] * 3
    assert statuses(elsewhere) == [(BatchStatus.PENDING, 0)]  # another project's work stays apart
    assert ToolCall.objects.filter(project=project).count() == 6
    assert batch_process(batch_id=second.pk) is BatchResult.SKIPPED  # its own task finds it done


def test_a_retry_goes_alone_and_a_retried_batch_is_nobody_s_partner(project):
    retried = session_batch(project, "a")
    IngestBatch.objects.filter(pk=retried.pk).update(attempts=1)  # failed once, pending again
    fresh = session_batch(project, "b")
    batch_process(batch_id=retried.pk)
    assert statuses(retried, fresh) == [(BatchStatus.DONE, 2), (BatchStatus.PENDING, 0)]
    other = session_batch(project, "c")
    IngestBatch.objects.filter(pk=other.pk).update(attempts=2)
    batch_process(batch_id=fresh.pk)
    assert statuses(fresh, other) == [(BatchStatus.DONE, 1), (BatchStatus.PENDING, 2)]


def test_the_events_apply_in_the_order_the_batches_were_received(project):
    older = session_batch(project, "s", agent_name="old")
    newer = session_batch(project, "s", agent_name="new", model="m")
    batch_process(batch_id=newer.pk)  # the newer batch's task runs first and takes the older one
    assert statuses(older, newer) == [(BatchStatus.DONE, 1)] * 2
    assert Session.objects.get(client_id="s").agent_name == "new"


def test_merging_stops_at_the_event_cap(project, monkeypatch):
    monkeypatch.setattr(processing, "MERGE_MAX_EVENTS", 6)
    first, second, third = (session_batch(project, f"s{i}", calls=2) for i in range(3))  # 3 events each
    batch_process(batch_id=first.pk)
    assert statuses(first, second, third) == [(BatchStatus.DONE, 1), (BatchStatus.DONE, 1), (BatchStatus.PENDING, 0)]


@pytest.mark.django_db(transaction=True)
def test_a_batch_another_worker_holds_is_skipped_not_waited_for(project):
    first, held = session_batch(project, "a"), session_batch(project, "b")
    with other_connection() as other_worker:
        other_worker.execute("SELECT id FROM telemetry_ingestbatch WHERE id = %s FOR UPDATE", [held.pk])
        batch_process(batch_id=first.pk)  # returns without waiting on the held row
        other_worker.rollback()
    assert statuses(first, held) == [(BatchStatus.DONE, 1), (BatchStatus.PENDING, 0)]


def test_a_time_limit_fails_the_merged_attempt_whole_and_the_retry_goes_alone(project, monkeypatch):
    """A time limit is nobody's event's fault: no quarantine, nothing of the group stored; the
    batch's retry runs without the batches it had taken along, which their own tasks process."""
    slow, partner = session_batch(project, "slow"), session_batch(project, "partner")
    apply = processing.events_apply
    calls = []

    def timing_out(*, project, events):
        calls.append(len(events))
        if len(calls) == 1:
            raise SoftTimeLimitExceeded()
        apply(project=project, events=events)

    monkeypatch.setattr(processing, "events_apply", timing_out)
    with pytest.raises(Exception):  # noqa: B017,PT011 - the task asks Celery to retry
        tasks.process_batch.apply(args=[slow.pk], throw=True)
    assert calls == [4]  # both batches' events in one attempt, not split in search of a culprit
    assert statuses(slow, partner) == [(BatchStatus.PENDING, 1), (BatchStatus.PENDING, 0)]
    assert IngestBatch.objects.get(pk=slow.pk).error.startswith("SoftTimeLimitExceeded at ")
    assert not QuarantinedEvent.objects.exists() and not ToolCall.objects.exists()

    assert batch_process(batch_id=slow.pk) is BatchResult.DONE  # the retry
    assert calls[1:] == [2]  # alone
    assert statuses(slow, partner) == [(BatchStatus.DONE, 2), (BatchStatus.PENDING, 0)]
