"""Retention by time partition (issue 17, item 1): rows carry the day they expire, PostgreSQL keeps
one partition per day and table, expiry drops whole partitions, per-project retention holds, and
ingest never fails for want of a day. SQLite, the embedded default, deletes rows instead."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from types import SimpleNamespace

import pytest
from django.db import connection, transaction
from django.utils import timezone

from tests.factories import make_key
from tests.rollups.test_rollups_sqlite import _run_on_sqlite
from toolscope.telemetry import partitions
from toolscope.telemetry.models import (
    IngestBatch,
    ProjectHourly,
    Session,
    ToolCall,
    ToolHourly,
    Turn,
)
from toolscope.telemetry.retention import expiry_day, today
from toolscope.telemetry.services.ingest import ingest_events
from toolscope.telemetry.services.processing import batch_process
from toolscope.telemetry.services.retention import (
    AHEAD_DAYS,
    lock_headroom,
    partitions_ensure,
    retention_expire,
    retention_overview,
)

postgres_only = pytest.mark.skipif("connection.vendor != 'postgresql'")
TABLES = ("telemetry_ingestbatch", "telemetry_turn", "telemetry_toolcall", "telemetry_artifact")


def midday(day):
    return datetime.combine(day, time(12), tzinfo=UTC)


def send(project, events):
    outcome = ingest_events(api_key=make_key(project).api_key, raw_events=events)
    assert outcome.counts["rejected"] == 0, outcome.results
    batch_process(batch_id=outcome.batch_id)
    return outcome.batch_id


def session_events(session: str, moment: datetime, *, calls: int = 2) -> list[dict]:
    return [
        {"type": "session", "id": session, "timestamp": moment.isoformat()},
        {"type": "turn", "id": f"{session}:t0", "session_id": session, "index": 0, "timestamp": moment.isoformat(),
         "messages": [{"role": "user", "content": "fix the failing test"}]},
        *({"type": "tool_call", "id": f"{session}:c{n}", "session_id": session, "turn_index": 0,
           "tool_name": "bash", "output": f"line {n}\n" * 400, "duration_ms": 5.0 + n,
           "timestamp": (moment + timedelta(seconds=n)).isoformat()} for n in range(calls)),
    ]


def test_the_expiry_day_is_the_rows_day_plus_retention_clamped_to_today_and_its_retention():
    now = datetime(2026, 11, 26, 9, tzinfo=UTC).date()
    assert expiry_day(retention_days=30, moment=datetime(2026, 11, 20, 23, tzinfo=UTC), on=now) == \
        datetime(2026, 12, 20).date()
    # Already past its retention when it arrives: kept until the next expiry, never in a dropped day.
    assert expiry_day(retention_days=7, moment=datetime(2026, 1, 1, tzinfo=UTC), on=now) == now
    # Dated in the future: as if it happened today, so its day has a partition.
    assert expiry_day(retention_days=7, moment=datetime(2031, 1, 1, tzinfo=UTC), on=now) == now + timedelta(days=7)


@postgres_only
def test_the_high_volume_tables_are_partitioned_by_day_with_the_day_in_every_key(db):
    days = {table: {partition.day for partition in partitions.partitions_list(table)} for table in TABLES}
    for table, found in days.items():
        assert today() in found and today() + timedelta(days=30) in found, table
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conrelid::regclass::text, contype, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid::regclass::text = ANY(%s) AND contype IN ('p', 'u')", [list(TABLES)])
        keys = cursor.fetchall()
        cursor.execute("SELECT relname, relkind FROM pg_class WHERE relname = ANY(%s)", [list(TABLES)])
        kinds = dict(cursor.fetchall())
    assert kinds == dict.fromkeys(TABLES, "p")  # partitioned tables
    assert {table for table, _, _ in keys} == set(TABLES)
    assert all(definition.endswith("expires_on)") for _, _, definition in keys), keys
    assert ("telemetry_toolcall", "u", "UNIQUE (project_id, client_id, expires_on)") in keys


@postgres_only
def test_processing_stores_each_row_in_its_days_partition(project):
    moment = timezone.now() - timedelta(days=2)
    send(project, session_events("s1", moment))
    expected = (moment.date() + timedelta(days=project.retention_days))
    with connection.cursor() as cursor:
        for table in ("telemetry_toolcall", "telemetry_turn", "telemetry_ingestbatch"):
            cursor.execute(f"SELECT DISTINCT tableoid::regclass::text, expires_on FROM {table}")
            rows = cursor.fetchall()
            wanted = today() + timedelta(days=project.retention_days) if table == "telemetry_ingestbatch" else expected
            assert rows == [(partitions.partition_name(table, wanted), wanted)], table


@postgres_only
def test_a_project_keeps_its_own_retention_and_expiry_drops_whole_days(project, other_project):
    project.retention_days = 1
    project.save()
    other_project.retention_days = 3
    other_project.save()
    now = timezone.now()
    send(project, session_events("short", now))
    send(other_project, session_events("long", now))
    ToolHourly.objects.create(project=project, hour=(now - timedelta(days=500)).replace(minute=0, second=0,
                                                                                         microsecond=0))
    ProjectHourly.objects.create(project=project, hour=(now - timedelta(days=500)).replace(minute=0, second=0,
                                                                                             microsecond=0))
    # A session expires with its last row (processing keeps the day), then goes without a probe.
    assert dict(Session.objects.values_list("client_id", "expires_on")) == {
        "short": today() + timedelta(days=1), "long": today() + timedelta(days=3)}
    before = {(model.__name__, owner): model.objects.filter(project=owner).count()
              for model in (ToolCall, Turn, IngestBatch) for owner in (project, other_project)}
    assert all(before.values())

    # The day after tomorrow: project's rows (kept 1 day) expired yesterday; other_project's (3) not.
    report = retention_expire(on=today() + timedelta(days=2), concurrently=False)

    assert set(report.partitions_dropped) >= {partitions.partition_name(t, today() + timedelta(days=1))
                                              for t in TABLES}
    assert all(partition.day >= today() + timedelta(days=2) for partition in partitions.partitions_list())
    for model in (ToolCall, Turn, IngestBatch):
        assert not model.objects.filter(project=project).exists(), model
        assert model.objects.filter(project=other_project).count() == before[(model.__name__, other_project)]
    assert list(Session.objects.values_list("client_id", flat=True)) == ["long"]
    assert report.sessions_deleted == 1
    assert report.rollup_rows_deleted == 2  # the 500-day-old hourly rows; today's stay (400 days)
    assert ToolHourly.objects.filter(project=project).exists()


@postgres_only
def test_a_missing_day_is_made_on_demand_so_ingest_and_processing_never_fail(project):
    project.retention_days = 90  # past the days made ahead at install
    project.save()
    far = today() + timedelta(days=90)
    assert far not in {partition.day for partition in partitions.partitions_list("telemetry_toolcall")}
    batch_id = send(project, session_events("s1", timezone.now()))
    assert IngestBatch.objects.get(pk=batch_id).status == "done"
    assert set(ToolCall.objects.values_list("expires_on", flat=True)) == {far}
    days = {partition.day for partition in partitions.partitions_list("telemetry_toolcall")}
    assert far + timedelta(days=AHEAD_DAYS) in days


@postgres_only
def test_partitions_are_made_ahead_through_the_longest_retention(project):
    project.retention_days = 45
    project.save()
    partitions_ensure()
    wanted = {today() + timedelta(days=offset) for offset in range(45 + AHEAD_DAYS + 1)}
    for table in TABLES:
        assert wanted <= {partition.day for partition in partitions.partitions_list(table)}, table
    assert partitions_ensure() == 0  # idempotent


@postgres_only
def test_ingest_is_idempotent_on_partitioned_tables(project):
    events = session_events("s1", timezone.now() - timedelta(days=1), calls=3)
    send(project, events)
    send(project, events)
    assert ToolCall.objects.count() == 3 and Turn.objects.count() == 1


@postgres_only
def test_converting_a_table_keeps_its_rows_keys_indexes_and_identity(db):
    """What migration 0016 does to each table, on one with rows (telemetry/partitions.py)."""
    days = [today() - timedelta(days=3), today() + timedelta(days=5)]
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE conv_sample (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "
                       "project_id integer NOT NULL CHECK (project_id > 0), client_id varchar(20) NOT NULL, "
                       "note text NOT NULL DEFAULT 'x', expires_on date NOT NULL, "
                       "CONSTRAINT conv_sample_client UNIQUE (project_id, client_id))")
        cursor.execute("CREATE INDEX conv_sample_note ON conv_sample (project_id, note)")
        cursor.execute("INSERT INTO conv_sample (project_id, client_id, expires_on) "
                       "SELECT 1, 'c' || n, %s::date + (n %% 3) FROM generate_series(1, 30) AS n", [days[0]])
        editor = SimpleNamespace(connection=connection)
        partitions.table_partition(editor, SimpleNamespace(_meta=SimpleNamespace(db_table="conv_sample")),
                                   days=days)
        cursor.execute("SELECT count(*), max(id) FROM conv_sample")
        assert cursor.fetchone() == (30, 30)
        cursor.execute("INSERT INTO conv_sample (project_id, client_id, expires_on) VALUES (1, 'new', %s) "
                       "RETURNING id", [days[1]])
        assert cursor.fetchone()[0] == 31  # the identity continues
        cursor.execute("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                       "WHERE conrelid = 'conv_sample'::regclass ORDER BY conname")
        constraints = dict(cursor.fetchall())
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'conv_sample_note'")
        index = cursor.fetchone()[0]
    assert constraints["conv_sample_pkey"] == "PRIMARY KEY (id, expires_on)"
    assert constraints["conv_sample_client"] == "UNIQUE (project_id, client_id, expires_on)"
    assert "CHECK ((project_id > 0))" in constraints.values()
    assert "(project_id, note)" in index
    found = {partition.day for partition in partitions.partitions_list("conv_sample")}
    assert found == {days[0], days[0] + timedelta(days=1), days[0] + timedelta(days=2), days[1]}


@postgres_only
def test_the_admin_shows_the_stored_days(project):
    overview = retention_overview()
    assert overview.first == today() - timedelta(days=1)  # made by the migration
    assert overview.days >= 30 and overview.next_expiry == today() + timedelta(days=1)


@pytest.mark.django_db
def test_the_admin_project_page_shows_retention(admin_client, project):
    page = admin_client.get(f"/admin/telemetry/project/{project.pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Days raw data" in text and "retention_days" in text
    assert ("day partitions per table" in text) == (connection.vendor == "postgresql")


SQLITE_SCRIPT = """
import json, django
django.setup()
from datetime import timedelta
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.utils import timezone
from tests import factories
from tests.telemetry.test_retention import send, session_events
from toolscope.telemetry.models import Artifact, IngestBatch, Session, ToolCall, Turn
from toolscope.telemetry.retention import today
from toolscope.telemetry.services.retention import retention_expire
short, long = factories.make_project("short"), factories.make_project("long")
short.retention_days, long.retention_days = 1, 3
short.save(); long.save()
send(short, session_events("a", timezone.now()))
send(long, session_events("b", timezone.now()))
counts = lambda: {m.__name__: sorted(m.objects.values_list("project__slug", flat=True).distinct())
                  for m in (ToolCall, Turn, IngestBatch, Session)}
before = counts()
report = retention_expire(on=today() + timedelta(days=2))
print(json.dumps({"before": before, "after": counts(), "deleted": report.raw_rows_deleted,
                  "sessions": report.sessions_deleted}))
"""


def test_on_sqlite_expired_rows_are_deleted_per_project(tmp_path):
    result = _run_on_sqlite(SQLITE_SCRIPT, tmp_path)
    assert result["before"] == {name: ["long", "short"] for name in ("ToolCall", "Turn", "IngestBatch", "Session")}
    assert result["after"] == {name: ["long"] for name in ("ToolCall", "Turn", "IngestBatch", "Session")}
    assert result["deleted"] >= 4 and result["sessions"] == 1


@pytest.mark.django_db(transaction=True)  # DETACH ... CONCURRENTLY, as beat runs it: outside a transaction
def test_the_retention_command_runs_what_beat_runs(project):
    from io import StringIO

    from django.core.management import call_command

    from toolscope.settings import CELERY_BEAT_SCHEDULE

    assert CELERY_BEAT_SCHEDULE["retention-maintain"]["task"] == "workers.retention_maintain"
    project.retention_days = 50
    project.save()
    out = StringIO()
    call_command("retention", stdout=out)
    text = out.getvalue()
    assert "partitions made:" in text and "rows deleted:" in text
    if connection.vendor == "postgresql":
        assert f"{today() + timedelta(days=50 + AHEAD_DAYS)}" in text  # the last day made ahead


@pytest.mark.django_db
def test_the_admin_refuses_rollups_kept_shorter_than_raw_data(project, rf):
    from django.contrib.admin import site

    form_class = site._registry[type(project)].get_form(rf.get("/"), project, change=True)
    data = {"slug": project.slug, "name": project.name, "encoding": project.encoding,
            "context_window": project.context_window, "tool_error_patterns": "[]"}
    too_long = form_class(data={**data, "retention_days": 401, "rollup_retention_days": 500}, instance=project)
    assert not too_long.is_valid() and "retention_days" in too_long.errors
    short = form_class(data={**data, "retention_days": 90, "rollup_retention_days": 30}, instance=project)
    assert not short.is_valid() and "rollup_retention_days" in short.errors
    assert form_class(data={**data, "retention_days": 90, "rollup_retention_days": 365}, instance=project).is_valid()


@postgres_only
def test_the_locks_a_whole_table_query_takes_are_counted_and_a_small_lock_table_is_told(
        project, caplog, monkeypatch):
    """A query that cannot name its days locks every day partition and index of the table until
    it ends: at 400 days, ~4,500 locks, and PostgreSQL's default lock table (64 x 100 slots)
    fills with two such queries, failing every statement of every client."""
    demand = partitions.lock_demand()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM telemetry_toolcall WHERE tool_name = 'bash'")
        cursor.execute("SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND relation IS NOT NULL "
                       "AND relation::regclass::text LIKE 'telemetry_toolcall%%'")
        held = cursor.fetchone()[0]
    assert demand.whole_table <= held <= demand.whole_table + 10  # the parent and its indexes besides

    at_400_days = partitions.LockDemand(per_transaction=64, connections=100, whole_table=408 * 11)
    warning = lock_headroom(at_400_days)
    assert "holds 1 queries" in warning and "set max_locks_per_transaction to 360 or more" in warning
    assert lock_headroom(partitions.LockDemand(per_transaction=1024, connections=100, whole_table=408 * 11)) is None
    # The production recipe's PostgreSQL has room at the longest retention a project may have.
    from tests.deploy import recipe
    from toolscope.telemetry.retention import MAX_RETENTION_DAYS

    command = recipe.as_argv(recipe.raw_compose()["services"]["postgres"]["command"])
    setting = int(next(arg.split("=")[1] for arg in command if arg.startswith("max_locks_per_transaction=")))
    per_day = demand.whole_table / len(partitions.partitions_list("telemetry_toolcall", sizes=False))
    longest = round(per_day * (MAX_RETENTION_DAYS + AHEAD_DAYS + 1))
    assert lock_headroom(partitions.LockDemand(setting, demand.connections, longest)) is None
    assert lock_headroom(partitions.LockDemand(64, demand.connections, longest))  # PostgreSQL's default

    # Beat's step says so in its log when the day partitions outgrow this server's table (here:
    # asking for room for more queries than its 38 days leave).
    with caplog.at_level("WARNING", logger="toolscope.telemetry.services.retention"):
        partitions_ensure()
        assert "out of shared memory" not in caplog.text
        monkeypatch.setattr("toolscope.telemetry.services.retention.WHOLE_TABLE_QUERIES",
                            demand.slots // demand.whole_table + 1)
        partitions_ensure()
    assert "out of shared memory" in caplog.text and "max_locks_per_transaction" in caplog.text
