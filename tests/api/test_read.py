"""The read API (scope `read`): sessions with the dashboard's filters and keyset pages, one session
with every figure its dashboard page shows, tools and overview over a range, a batch's status and
each event's outcome; tenancy and scopes as everywhere."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from dashboard import selectors
from tests.api.conftest import KeyClient
from tests.factories import make_key, make_session, make_tool_call, make_turn
from toolscope.telemetry.models import IngestBatch, Session
from toolscope.telemetry.services.processing import batch_process
from toolscope.telemetry.services.rollups import hour_floor, rollups_rebuild

NOW = timezone.now()


@pytest.fixture
def reader(project):
    return KeyClient(make_key(project, scopes=["read"]).secret)


@pytest.fixture
def sessions(project, other_project):
    """Five sessions of this project an hour apart (s0 oldest), one with an error and one through
    the gateway, and one of another project."""
    made = []
    for n in range(5):
        session = make_session(project, client_id=f"s{n}", agent_name="coder" if n % 2 else "reviewer",
                               model="gpt-4o", started_at=NOW - timedelta(hours=5 - n))
        turn = make_turn(session, 0, advertised=["read_file", "bash"], task_message="fix it", schema_tokens=300)
        make_tool_call(turn, "read_file", output_tokens=120, started_at=session.started_at)
        made.append(session)
    Session.objects.filter(client_id="s2").update(error_count=1, metadata={"gateway": "toolscope-mcp"})
    make_session(other_project, client_id="theirs", started_at=NOW - timedelta(hours=1))
    return made


def get(client, name, *args, **params):
    return client.get(reverse(f"api:{name}", args=args), params)


def window(**extra):
    return {"start": (NOW - timedelta(days=1)).isoformat(), "end": (NOW + timedelta(minutes=1)).isoformat(), **extra}


def test_sessions_are_listed_newest_first_in_keyset_pages(reader, sessions):
    first = get(reader, "sessions", **window(limit=2)).json()
    assert [row["client_id"] for row in first["results"]] == ["s4", "s3"] and first["next_cursor"]
    second = get(reader, "sessions", **window(limit=2, cursor=first["next_cursor"])).json()
    third = get(reader, "sessions", **window(limit=2, cursor=second["next_cursor"])).json()
    assert [row["client_id"] for row in second["results"] + third["results"]] == ["s2", "s1", "s0"]
    assert third["next_cursor"] is None
    assert set(first["results"][0]) >= {"agent_name", "model", "started_at", "turn_count", "tool_call_count",
                                        "error_count", "duplicate_tokens", "max_window_share", "via"}


@pytest.mark.parametrize(("params", "expected"), [
    ({"agent": "coder"}, ["s3", "s1"]),
    ({"errors": "yes"}, ["s2"]),
    ({"errors": "no"}, ["s4", "s3", "s1", "s0"]),
    ({"gateway": "true"}, ["s2"]),
])
def test_sessions_are_filtered_as_on_the_dashboard(reader, sessions, params, expected):
    assert [row["client_id"] for row in get(reader, "sessions", **window(**params)).json()["results"]] == expected


@pytest.mark.parametrize(("params", "field"), [
    ({"start": "yesterday"}, "start"), ({"start": ""}, "start"), ({"limit": 0}, "limit"),
    ({"errors": "maybe"}, "errors"), ({"errors": ""}, "errors"), ({"gateway": ""}, "gateway"),
    ({"cursor": "not-a-cursor"}, "cursor"),
])
def test_a_bad_parameter_is_a_400_naming_it(reader, sessions, params, field):
    response = get(reader, "sessions", **params)
    assert response.status_code == 400 and response.json()["field"] == field


def test_another_projects_rows_are_never_read(reader, sessions, other_project):
    listed = [row["client_id"] for row in get(reader, "sessions", **window()).json()["results"]]
    assert "theirs" not in listed
    assert get(reader, "session", "theirs").status_code == 404
    theirs = KeyClient(make_key(other_project, scopes=["read"]).secret)
    assert [row["client_id"] for row in get(theirs, "sessions", **window()).json()["results"]] == ["theirs"]
    assert get(theirs, "session", "s1").status_code == 404


@pytest.mark.parametrize("scopes", [["ingest"], ["policy:read"]])
def test_the_read_scope_is_required(project, sessions, scopes):
    client = KeyClient(make_key(project, scopes=scopes).secret)
    for name, args in (("sessions", ()), ("session", ("s1",)), ("overview", ()), ("tools-stats", ()),
                       ("batch", (1,))):
        response = get(client, name, *args)
        assert response.status_code == 403 and "read" in response.json()["detail"], name
    assert get(KeyClient(None), "sessions").status_code == 401


def test_a_session_reads_every_figure_its_dashboard_page_shows(reader, project, sessions):
    from django.test import Client

    from tests.factories import make_member, make_user

    viewer_client = Client()
    viewer_client.force_login(make_member(project, make_user()).user)
    session = sessions[1]
    turn = session.turns.get()
    first = make_tool_call(turn, "bash", output_tokens=900, status="error", error="exit 1")
    repeat = make_tool_call(turn, "bash", output_tokens=900, duplicate_of=first, duplicate_tokens=900)
    session.turns.update(model="gpt-4o")
    body = get(reader, "session", "s1").json()
    page = viewer_client.get(reverse("dashboard:session", args=[project.slug, "s1"])).context
    assert body["session"]["client_id"] == "s1" and body["session"]["agent_name"] == "coder"
    # Every turn column the page's budget chart and table use, with the same values.
    # Dollars are decimal strings in the API (gpt-4o is priced: these turns report no usage, so the
    # cache model's prediction is billed).
    shown_turns = [{key: value for key, value in row.items() if key not in ("id", "cost")} for row in page["turns"]]
    assert [{key: turn[key] for key in row} for turn, row in zip(body["turns"], shown_turns, strict=True)] == [
        {**row, "started_at": row["started_at"].isoformat().replace("+00:00", "Z"), "usd": str(row["usd"]),
         "schema_usd": str(row["schema_usd"])} for row in shown_turns]
    assert body["cost"]["usd"] == str(page["cost"]["total"]) and body["cost"]["price_sources"][0].startswith("genai")
    assert body["turns"][0]["schema_tokens"] == 300 and "unattributed_tokens" in body["turns"][0]
    calls = {call["id"]: call for call in body["calls"]}
    assert [call["tool_name"] for call in body["calls"]] == ["read_file", "bash", "bash"]
    assert calls[first.client_id]["status"] == "error" and calls[first.client_id]["error"] == "exit 1"
    assert calls[repeat.client_id]["duplicate_of"] == first.client_id
    assert calls[repeat.client_id]["duplicate_tokens"] == 900
    assert [call["output_tokens"] for call in body["calls"]] == [row["output_tokens"] for row in page["calls"]]


def test_overview_and_tools_read_what_the_dashboard_reads(reader, project, sessions):
    rollups_rebuild(project_id=project.pk, hours=[hour_floor(s.started_at) for s in sessions])
    start, end = NOW - timedelta(days=1), NOW + timedelta(minutes=1)
    overview = get(reader, "overview", **window()).json()
    kpis = {kpi["key"]: kpi for kpi in overview["kpis"]}
    expected = {kpi.key: kpi for kpi in selectors.overview_kpis(project_id=project.pk, start=start, end=end)}
    assert kpis.keys() == expected.keys()
    assert all(kpis[key]["current"] == expected[key].current for key in expected)
    assert kpis["sessions"]["current"] == 5 and kpis["tool_calls"]["current"] == 5
    coder = {kpi["key"]: kpi["current"] for kpi in get(reader, "overview", **window(), agent="coder").json()["kpis"]}
    assert (coder["sessions"], coder["tool_calls"]) == (2, 2)  # s1 and s3
    refused = get(reader, "overview", **window(), model="o\x003")
    assert refused.status_code == 400 and refused.json()["field"] == "model"  # as the schema's pattern says
    sliced = get(reader, "overview", **window(), agent="coder", model="o3").json()["kpis"]
    assert {kpi["key"]: kpi["current"] for kpi in sliced}["sessions"] == 0
    tools = {row["name"]: row for row in get(reader, "tools-stats", **window()).json()["results"]}
    assert tools["read_file"]["calls"] == 5 and tools["read_file"]["output_tokens"] == 600


def test_a_batch_reports_its_status_and_each_event_s_outcome(project, api, reader, other_project):
    events = [{"type": "session", "id": "b-1"},
              {"type": "tool_call", "id": "b-1:c0", "session_id": "b-1", "turn_index": 0, "tool_name": "bash",
               "status": "ok", "output": "done"}]
    batch_id = api.post_json("/api/v1/ingest", {"events": events}).json()["batch_id"]
    pending = get(reader, "batch", batch_id).json()
    assert pending["status"] == "pending" and [e["outcome"] for e in pending["events"]] == ["pending"] * 2
    batch_process(batch_id=batch_id)
    done = get(reader, "batch", batch_id).json()
    assert done["status"] == "done" and done["event_count"] == 2 and done["quarantined"] == 0
    assert [(e["id"], e["type"], e["outcome"]) for e in done["events"]] == [
        ("b-1", "session", "stored"), ("b-1:c0", "tool_call", "stored")]
    # An event the database refuses (as an older server let through) is quarantined, with why.
    poisoned = IngestBatch.objects.create(project=project, event_count=2, payload={"events": [
        {**events[1], "id": "b-1:c1", "timestamp": NOW.isoformat()},
        {**events[1], "id": "b-1:c2", "output": "a\x00b", "timestamp": NOW.isoformat()}]})
    batch_process(batch_id=poisoned.pk)
    outcomes = {e["id"]: e for e in get(reader, "batch", poisoned.pk).json()["events"]}
    assert outcomes["b-1:c1"]["outcome"] == "stored"
    assert outcomes["b-1:c2"]["outcome"] == "quarantined" and outcomes["b-1:c2"]["reason"]
    theirs = KeyClient(make_key(other_project, scopes=["read"]).secret)
    assert get(theirs, "batch", batch_id).status_code == 404


def test_any_cursor_of_the_documented_shape_is_a_page(reader, sessions):
    """Past the newest row (or beyond any id) a cursor reads from the top; it never fails."""
    for cursor in ("99999999999999999999_99999999999999999999", "0_0"):
        response = get(reader, "sessions", **window(cursor=cursor))
        assert response.status_code == 200
    assert get(reader, "sessions", **window(cursor="0_0")).json()["results"] == []
    top = get(reader, "sessions", **window(cursor="99999999999999999999_99999999999999999999")).json()
    assert [row["client_id"] for row in top["results"]] == ["s4", "s3", "s2", "s1", "s0"]


def test_a_range_far_in_the_past_or_future_is_read_not_failed(reader, sessions):
    for params in ({"start": "0320-08-27T12:11:02-17:21"}, {"end": "9999-12-31T23:59:59Z"},
                   {"start": "0001-01-01T00:00:00Z", "end": "9999-12-31T23:59:59Z"}):
        for name in ("overview", "tools-stats", "sessions"):
            assert get(reader, name, **params).status_code == 200, (name, params)


def test_the_sdk_reads_sessions_page_by_page_a_session_and_a_batch(live_server, transactional_db):
    from toolscope_agent import Client

    from tests.factories import make_project

    project = make_project("sdk-reads")
    for n in range(5):
        session = make_session(project, client_id=f"run/{n}", started_at=NOW - timedelta(hours=5 - n))
        make_tool_call(make_turn(session, 0, schema_tokens=10), "bash", started_at=session.started_at)
    writer = make_key(project, scopes=["ingest"]).secret
    batch_id = KeyClient(writer).post_json("/api/v1/ingest", {"events": [{"type": "session", "id": "new"}]}).json()[
        "batch_id"]
    with Client(live_server.url, make_key(project, scopes=["read"]).secret) as client:
        listed = [row["client_id"] for row in client.sessions(start=NOW - timedelta(days=1), limit=2)]
        detail = client.session_detail("run/3")
        batch = client.batch(batch_id)
    assert listed == ["run/4", "run/3", "run/2", "run/1", "run/0"]  # three pages of two
    assert detail["session"]["client_id"] == "run/3" and detail["calls"][0]["tool_name"] == "bash"
    assert batch["status"] == "pending" and batch["events"] == [{"id": "new", "type": "session",
                                                                 "outcome": "pending"}]
