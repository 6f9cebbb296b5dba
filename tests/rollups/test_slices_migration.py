"""Migration 0026 gives the hourly rollups their slice (agent, model): each stored call takes its
turn's model; rows made before it hold every slice under ("", ""), so the hours whose raw rows are
still kept are marked for the rollup task to rebuild by slice, and older hours (past raw
retention, nothing to rebuild from) are left as they are."""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

BEFORE = [("telemetry", "0025_session_totals")]
AFTER = [("telemetry", "0026_rollup_slices")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_kept_hours_are_marked_for_a_rebuild_by_slice_older_ones_left():
    apps = migrate(BEFORE)
    project = apps.get_model("telemetry", "Project").objects.create(slug="m", name="m", retention_days=30)
    hourly = apps.get_model("telemetry", "ProjectHourly")
    now = timezone.now().astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    recent, old = now - timedelta(days=2), now - timedelta(days=40)
    for hour in (recent, old):
        hourly.objects.create(project=project, hour=hour, sessions=3, turns=9)
    session = apps.get_model("telemetry", "Session").objects.create(project=project, client_id="s", started_at=now)
    expires = (now + timedelta(days=30)).date()
    turn = apps.get_model("telemetry", "Turn").objects.create(
        project=project, session=session, client_id="t", index=0, model="gpt-4o", started_at=now, expires_on=expires)
    calls = apps.get_model("telemetry", "ToolCall").objects
    for client_id, linked in (("linked", turn), ("unlinked", None)):
        calls.create(project=project, session=session, turn=linked, turn_index=0, client_id=client_id,
                     tool_name="bash", started_at=now, expires_on=expires)
    try:
        apps = migrate(AFTER)
        models = dict(apps.get_model("telemetry", "ToolCall").objects.values_list("client_id", "model"))
        assert models == {"linked": "gpt-4o", "unlinked": ""}
        marks = set(apps.get_model("telemetry", "DirtyHour").objects.values_list("project_id", "hour"))
        assert marks == {(project.pk, recent)}
        rows = apps.get_model("telemetry", "ProjectHourly").objects.values_list("hour", "agent_name", "model", "turns")
        assert sorted(rows) == [(old, "", "", 9), (recent, "", "", 9)]  # totals kept until rebuilt
    finally:
        migrate(migrate_latest())


def migrate_latest():
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()
