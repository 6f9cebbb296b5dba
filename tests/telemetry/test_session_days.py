"""A session's rows are looked up in its own day partitions (issue 17, item 1).

Each session keeps the first and last day its turns and calls expire (first_expires_on,
expires_on). Processing, the session page and the read API filter on those days, and a batch's
task message carries its own day, so PostgreSQL plans, locks and probes the few day partitions
holding them rather than all of them (one per day of retention and table: at 400 days a batch
touching every one ran out of lock slots, "out of shared memory"). The days must always cover
every row: proven here on a session whose events span ten days and arrive in three batches out
of order, with a re-sent batch, a duplicate across days and a call stored before its turn."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from tests.api.conftest import KeyClient
from tests.factories import make_key, make_member, make_user
from toolscope.telemetry.models import IngestBatch, Session, ToolCall, Turn
from toolscope.telemetry.retention import expiry_day
from toolscope.telemetry.services.ingest import ingest_events
from workers import tasks

postgres_only = pytest.mark.skipif("connection.vendor != 'postgresql'")
PARTITION = re.compile(r"\b(telemetry_(?:toolcall|turn|artifact|ingestbatch)_p(\d{8}))\b")
PARTITIONED = re.compile(r'\b(FROM|UPDATE) "telemetry_(toolcall|turn|artifact|ingestbatch)"')
OUTPUT = "collected 12 items\n" + "tests/test_parser.py ....F\n" * 40


def ingest(project, events) -> tuple[int, str]:
    """The batch's id and day (its expires_on), as the task message carries them."""
    outcome = ingest_events(api_key=make_key(project).api_key, raw_events=events)
    assert outcome.counts["rejected"] == 0, outcome.results
    return outcome.batch_id, IngestBatch.objects.get(pk=outcome.batch_id).expires_on.isoformat()


def process(batch):
    """As a worker does."""
    assert tasks.process_batch.apply(args=batch, throw=True).result is True


def send(project, events):
    process(ingest(project, events))
    return events


def turn(session, index, moment):
    return {"type": "turn", "id": f"{session}:t{index}", "session_id": session, "index": index,
            "timestamp": moment.isoformat(), "messages": [{"role": "user", "content": f"step {index}"}]}


def call(session, name, turn_index, moment, output):
    return {"type": "tool_call", "id": f"{session}:{name}", "session_id": session, "turn_index": turn_index,
            "tool_name": "bash", "output": output, "duration_ms": 12.0, "timestamp": moment.isoformat()}


def partitions_planned(sql: str) -> set[str]:
    """The day partitions of tool calls, turns and artifacts PostgreSQL's plan for `sql` looks in."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    return {match[0] for match in PARTITION.findall(plan)}


def days_of_partitions(names: set[str]) -> set[str]:
    return {name.rsplit("_p", 1)[1] for name in names}


def between(first, last) -> set[str]:
    return {f"{first + timedelta(days=n):%Y%m%d}" for n in range((last - first).days + 1)}


def ten_day_session(project):
    """Three batches of one session over ten days, the last bringing a turn its stored call
    waited for and an output repeating one from ten days before. Returns the batches' events."""
    now = timezone.now()
    early, middle = now - timedelta(days=10), now - timedelta(days=3)
    first = [{"type": "session", "id": "s", "timestamp": early.isoformat()},
             turn("s", 0, early), call("s", "c0", 0, early, OUTPUT)]
    second = [call("s", "c1", 1, middle, "ok\n")]  # its turn comes later
    third = [turn("s", 1, middle + timedelta(seconds=5)), call("s", "c2", 1, now, OUTPUT)]
    return [send(project, first), send(project, second), third]


@postgres_only
def test_processing_keeps_the_sessions_days_and_looks_in_them_alone(project):
    first, _, third = ten_day_session(project)
    session = Session.objects.get(client_id="s")
    expected = (expiry_day(retention_days=project.retention_days, moment=timezone.now() - timedelta(days=10)),
                expiry_day(retention_days=project.retention_days, moment=timezone.now() - timedelta(days=3)))
    assert (session.first_expires_on, session.expires_on) == expected

    batch = ingest(project, third)
    with CaptureQueriesContext(connection) as queries:
        process(batch)
    session.refresh_from_db()
    first_day, last_day = session.first_expires_on, session.expires_on
    assert first_day == expected[0]
    assert last_day == expiry_day(retention_days=project.retention_days, moment=timezone.now())
    looked_in = set()
    for query in queries.captured_queries:
        if PARTITIONED.search(query["sql"]) and not query["sql"].startswith(("INSERT", "COPY")):
            looked_in |= partitions_planned(query["sql"])
    assert {name.split("_p")[0] for name in looked_in} == {
        "telemetry_toolcall", "telemetry_turn", "telemetry_artifact", "telemetry_ingestbatch"}
    # The batch's own day (today plus the retention) is the last of the session's days.
    assert days_of_partitions(looked_in) <= between(first_day, last_day)
    # Every partition the tables have is many more: 38 days at the default retention.
    assert len(between(first_day, last_day)) < 38

    # What the lookups found: the stored call got its turn, the repeat its first occurrence.
    calls = {c.client_id: c for c in ToolCall.objects.filter(session=session)}
    turns = {t.index: t for t in Turn.objects.filter(session=session)}
    assert calls["s:c1"].turn_id == turns[1].pk
    assert calls["s:c2"].duplicate_of_id == calls["s:c0"].pk
    assert {c.expires_on for c in calls.values()} | {t.expires_on for t in turns.values()} <= {
        first_day + timedelta(days=n) for n in range((last_day - first_day).days + 1)}

    # Re-sent ten days later, the first batch is found in its session's days: nothing doubles.
    send(project, first)
    assert ToolCall.objects.filter(session=session).count() == 3
    assert Turn.objects.filter(session=session).count() == 2
    session.refresh_from_db()
    assert session.tool_call_count == 3 and session.turn_count == 2


@postgres_only
def test_a_session_whose_days_are_unknown_is_looked_up_everywhere_and_gets_them(project):
    *_, third = ten_day_session(project)
    # As a session stored before its first day was kept (migration 0018) looks.
    Session.objects.filter(client_id="s").update(first_expires_on=None)
    send(project, third)
    session = Session.objects.get(client_id="s")
    calls = {c.client_id: c for c in ToolCall.objects.filter(session=session)}
    assert calls["s:c2"].duplicate_of_id == calls["s:c0"].pk
    assert session.first_expires_on == min(c.expires_on for c in calls.values())
    assert session.tool_call_count == 3


@postgres_only
def test_the_session_page_and_the_read_api_look_in_the_sessions_days_alone(project):
    ten_day_session(project)
    session = Session.objects.get(client_id="s")
    viewer = Client()
    viewer.force_login(make_member(project, make_user()).user)
    reader = KeyClient(make_key(project, scopes=["read"]).secret)
    with CaptureQueriesContext(connection) as queries:
        page = viewer.get(reverse("dashboard:session", args=[project.slug, "s"]))
        body = reader.get(reverse("api:session", args=["s"])).json()
    assert page.status_code == 200
    assert [c["client_id"] for c in page.context["calls"]] == ["s:c0", "s:c1"]
    assert [c["id"] for c in body["calls"]] == ["s:c0", "s:c1"]
    assert [t["index"] for t in body["turns"]] == [0]
    looked_in = set()
    for query in queries.captured_queries:
        if re.search(r'FROM "telemetry_(toolcall|turn)"', query["sql"]):
            looked_in |= partitions_planned(query["sql"])
    assert looked_in
    assert days_of_partitions(looked_in) <= between(session.first_expires_on, session.expires_on)


@pytest.mark.django_db
def test_a_row_saved_one_by_one_widens_its_sessions_days(project):
    ten_day_session(project)
    session = Session.objects.get(client_id="s")
    later = timezone.now() + timedelta(days=2)
    stored = Turn.objects.create(project=project, session=session, client_id="s:t9", index=9, started_at=later)
    session.refresh_from_db()
    assert session.expires_on == stored.expires_on
    earlier = ToolCall.objects.create(project=project, session=session, client_id="s:c9", turn_index=9,
                                      tool_name="bash", started_at=timezone.now() - timedelta(days=20))
    session.refresh_from_db()
    assert session.first_expires_on == earlier.expires_on


@pytest.mark.django_db
def test_a_task_message_without_the_batchs_day_still_processes_it(project):
    """Messages queued before the day was added to them carry the batch id alone."""
    outcome = ingest_events(api_key=make_key(project).api_key, raw_events=[
        {"type": "session", "id": "old", "timestamp": timezone.now().isoformat()},
        turn("old", 0, timezone.now())])
    assert tasks.process_batch.apply(args=(outcome.batch_id,), throw=True).result is True
    assert IngestBatch.objects.get(pk=outcome.batch_id).status == "done"
    assert Turn.objects.filter(session__client_id="old").count() == 1
