"""The rollup task only rebuilds hours marked for repair: processing keeps the rollups itself,
duration sketches included, and queues nothing after a batch (workers.tasks)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
import redis

from tests import factories
from tests.factories import make_key
from toolscope.telemetry.models import DirtyHour, ToolHourly
from toolscope.telemetry.services.ingest import ingest_events
from toolscope.telemetry.services.rollups import dirty_hours_mark
from workers import tasks

HOUR = datetime(2026, 11, 24, 9, tzinfo=UTC)


@pytest.fixture
def queue(settings):
    """A fresh ingest queue on the real broker, and how many messages it holds."""
    settings.INGEST_QUEUE = f"test_rollups_{uuid.uuid4().hex[:8]}"
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    yield lambda: broker.llen(settings.INGEST_QUEUE)
    broker.delete(settings.INGEST_QUEUE)


def test_a_processed_batch_has_its_percentiles_and_queues_no_rollup(db, queue, project):
    outcome = ingest_events(api_key=make_key(project).api_key, raw_events=[
        {"type": "tool_call", "id": f"c{n}", "session_id": "s1", "turn_index": 0, "tool_name": "bash",
         "output": "ok", "duration_ms": 10.0 * (n + 1), "timestamp": (HOUR + timedelta(minutes=n)).isoformat()}
        for n in range(5)])
    assert tasks.process_batch.apply(args=(outcome.batch_id,)).get() is True
    assert ToolHourly.objects.get().duration_p50_ms == pytest.approx(30.0, rel=0.01)
    assert queue() == 0 and not DirtyHour.objects.exists()


def test_the_rollup_task_rebuilds_the_marked_hours(db, project):
    session = factories.make_session(project)
    factories.make_tool_call(factories.make_turn(session), "grep", started_at=HOUR + timedelta(minutes=3),
                             duration_ms=42.0)
    assert not ToolHourly.objects.exists()  # made directly: no processing, no rollup
    dirty_hours_mark(project_id=project.pk, timestamps=[HOUR + timedelta(minutes=3)])
    assert tasks.rollup_dirty.apply().get() == 1
    row = ToolHourly.objects.get()
    assert (row.tool_name, row.calls, row.duration_p50_ms) == ("grep", 1, pytest.approx(42.0, rel=0.01))
    assert tasks.rollup_dirty.apply().get() == 0 and not DirtyHour.objects.exists()
