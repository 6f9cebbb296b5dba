"""Two workers storing the same events at once (an SDK re-sent a batch whose reply it lost): the
one that loses the race retries and then skips what the other stored; nothing is stored twice."""

from __future__ import annotations

import threading
import time
from datetime import datetime

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from tests import factories
from tests.workers.database import other_connection
from toolscope.telemetry.models import BatchStatus, IngestBatch, ProjectHourly, ToolCall, ToolHourly, Turn
from toolscope.telemetry.retention import expiry_day
from toolscope.telemetry.services.accounting import BatchConflictError
from toolscope.telemetry.services.processing import BatchResult, batch_process
from workers import tasks

pytestmark = pytest.mark.django_db(transaction=True)
WHEN = "2026-11-22T10:00:00+00:00"
EVENTS = [
    {"type": "session", "id": "s1", "session_id": "s1", "action": "start", "timestamp": WHEN},
    {"type": "turn", "id": "t0", "session_id": "s1", "index": 0, "timestamp": WHEN},
    {"type": "tool_call", "id": "c1", "session_id": "s1", "turn_index": 0, "tool_name": "bash",
     "arguments": {}, "output": "ok", "timestamp": WHEN},
    {"type": "tool_call", "id": "c2", "session_id": "s1", "turn_index": 0, "tool_name": "bash",
     "arguments": {}, "output": "done", "timestamp": WHEN},
]


def _wait_until_blocked(admin: psycopg.Connection, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        blocked = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                "AND datname = current_database()").fetchone()[0]
        if blocked:
            return
        time.sleep(0.05)
    pytest.fail("the worker never waited on the other transaction's row")


def _race(batch: IngestBatch, rival_insert: tuple[str, list]) -> BaseException | bool:
    """Process `batch` while another transaction holds `rival_insert` uncommitted: the worker's
    lookup cannot see that row, its insert waits on it; the rival then commits."""
    outcome: list[BaseException | bool] = []
    with other_connection() as rival, other_connection(autocommit=True) as admin:
        rival.execute(*rival_insert)

        def work() -> None:
            try:
                outcome.append(batch_process(batch_id=batch.pk))
            except BaseException as exc:
                outcome.append(exc)
            finally:
                connection.close()

        worker = threading.Thread(target=work)
        worker.start()
        _wait_until_blocked(admin)
        rival.commit()
        worker.join(timeout=30)
    assert len(outcome) == 1
    return outcome[0]


def test_a_call_stored_by_a_concurrent_worker_makes_the_batch_retry_and_skip_it(project):
    other = factories.make_session(project, client_id="elsewhere")
    batch = IngestBatch.objects.create(project=project, payload={"events": EVENTS}, event_count=len(EVENTS))
    outcome = _race(batch, (
        ("INSERT INTO telemetry_toolcall (project_id, session_id, turn_index, client_id, call_id, tool_name,"
        " arguments, output, status, error, retries, approval, started_at, output_hash, duplicate_tokens,"
        " placeholder, created_at, expires_on) VALUES (%s, %s, 0, 'c1', '', 'bash', '{}', 'ok', 'ok', '', 0,"
        " 'not_required', %s, '', 0, '', %s, %s)"),
        [project.pk, other.pk, WHEN, timezone.now(), _expiry(project)],
    ))
    assert isinstance(outcome, BatchConflictError)
    assert isinstance(outcome, tasks.TRANSIENT_ERRORS)  # the task retries it with backoff
    assert set(ToolCall.objects.values_list("client_id", flat=True)) == {"c1"}  # nothing half stored

    assert batch_process(batch_id=batch.pk) is BatchResult.DONE  # the retry
    batch.refresh_from_db()
    assert batch.status == BatchStatus.DONE
    assert sorted(ToolCall.objects.values_list("client_id", "session__client_id")) == [
        ("c1", "elsewhere"), ("c2", "s1")]


def _expiry(project):
    """The day processing gives the event's rows (part of the key on PostgreSQL's partitioned tables:
    the same event stored by another worker has the same timestamp, so the same day)."""
    return expiry_day(retention_days=project.retention_days, moment=datetime.fromisoformat(WHEN))


def test_a_turn_stored_by_a_concurrent_worker_makes_the_batch_retry_and_skip_it(project):
    other = factories.make_session(project, client_id="elsewhere")
    batch = IngestBatch.objects.create(project=project, payload={"events": EVENTS}, event_count=len(EVENTS))
    outcome = _race(batch, (
        ("INSERT INTO telemetry_turn (project_id, session_id, client_id, index, model, started_at, task_message,"
        " messages, near_window, created_at, expires_on) VALUES (%s, %s, 't0', 0, '', %s, '', '[]', false, %s, %s)"),
        [project.pk, other.pk, WHEN, timezone.now(), _expiry(project)],
    ))
    assert isinstance(outcome, BatchConflictError)
    assert not ToolCall.objects.exists()  # nothing half stored

    assert batch_process(batch_id=batch.pk) is BatchResult.DONE
    assert list(Turn.objects.values_list("client_id", "session__client_id")) == [("t0", "elsewhere")]
    # The calls' turn (index 0 of s1) was never stored: they wait for it unlinked.
    assert sorted(ToolCall.objects.values_list("client_id", "turn_id")) == [("c1", None), ("c2", None)]


def test_a_batch_waits_while_another_worker_holds_its_session(project):
    """Two batches of one session are accounted one after the other (their deltas to the rollups
    are computed from each other's results, never from the same "before")."""
    session = factories.make_session(project, client_id="s1")
    batch = IngestBatch.objects.create(project=project, payload={"events": EVENTS}, event_count=len(EVENTS))
    outcome = _race(batch, ("SELECT id FROM telemetry_session WHERE id = %s FOR UPDATE", [session.pk]))
    assert outcome is BatchResult.DONE
    assert ToolHourly.objects.get(tool_name="bash").calls == 2


def test_a_batch_waits_for_a_rebuild_of_its_hour_and_adds_on_top(project):
    """A rebuild holds its hours exclusively: the batch's deltas land after it, on what it wrote."""
    batch = IngestBatch.objects.create(project=project, payload={"events": EVENTS}, event_count=len(EVENTS))
    hour_key = int(datetime.fromisoformat(WHEN).timestamp()) // 3600
    outcome = _race(batch, ("SELECT pg_advisory_xact_lock(%s::integer, %s::integer)", [project.pk, hour_key]))
    assert outcome is BatchResult.DONE
    row = ToolHourly.objects.get(tool_name="bash")
    assert (row.calls, row.times_called) == (2, 1)
    assert ProjectHourly.objects.get().sessions == 1


def test_a_session_inserted_by_a_concurrent_worker_makes_the_batch_retry(project):
    batch = IngestBatch.objects.create(project=project, payload={"events": EVENTS}, event_count=len(EVENTS))
    outcome = _race(batch, (
        ("INSERT INTO telemetry_session (project_id, client_id, agent_name, model, started_at, metadata, turn_count,"
         " tool_call_count, error_count, duplicate_tokens, near_window, created_at)"
         " VALUES (%s, 's1', '', '', %s, '{}', 0, 0, 0, 0, false, %s)"),
        [project.pk, timezone.now(), timezone.now()],
    ))
    assert isinstance(outcome, BatchConflictError)
    assert not ToolCall.objects.exists()
    assert batch_process(batch_id=batch.pk) is BatchResult.DONE
    assert ToolHourly.objects.get(tool_name="bash").calls == 2
    # The retry found the session stored and moved its start to the batch's earlier event: the
    # session counts in that hour (the rival's hour, never counted, stays clamped at nothing).
    assert list(ProjectHourly.objects.values_list("hour", "sessions")) == [(datetime.fromisoformat(WHEN), 1)]
