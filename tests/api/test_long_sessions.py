"""Long sessions (issue 24, item 5): a transcript of thousands of tool calls is one request,
stored as batches of at most INGEST_MAX_EVENTS in one transaction and processed into one session
whatever order its batches run in, up to TRANSCRIPT_MAX_CALLS; a session's detail is read in
pages (read API and dashboard page). Speed is measured in bench/session_detail.py."""

from __future__ import annotations

import json
import random

import pytest
from django.db.models import F
from django.urls import reverse

from tests.api.conftest import KeyClient
from tests.factories import make_key, make_member, make_project, make_user
from tests.long_sessions import FORMATS, bulk_session, long_transcript
from toolscope.telemetry.models import IngestBatch, ProjectHourly, Session, ToolCall, ToolHourly, Turn
from toolscope.telemetry.services import processing
from toolscope.telemetry.services.processing import batch_process

URL = "/api/v1/transcripts"


def _call_ids(body: dict) -> set[str]:
    """The provider's call ids of a long_transcript body, read from the body itself."""
    if "input" in body:
        return {item["call_id"] for item in body["input"] if item["type"] == "function_call"}
    if body.get("system") is not None:  # anthropic
        return {block["id"] for m in body["messages"] if m["role"] == "assistant" for block in m["content"]
                if block["type"] == "tool_use"}
    return {call["id"] for m in body["messages"] for call in m.get("tool_calls") or ()}


def _process(batch_ids: list[int]) -> None:
    for batch_id in batch_ids:
        batch_process(batch_id=batch_id)
    assert set(IngestBatch.objects.filter(pk__in=batch_ids).values_list("status", flat=True)) == {"done"}


def _assert_stored_whole(answer: dict, body: dict, calls: int) -> Session:
    """The answer lists every batch, each within the batch limit, holding every accepted event;
    processed, they are one session with every call, each in its turn."""
    assert answer["rejected"] == 0 and answer["duplicates"] == 0
    batches = list(IngestBatch.objects.filter(pk__in=answer["batch_ids"]).order_by("pk"))
    assert [b.pk for b in batches] == answer["batch_ids"] and answer["batch_id"] == answer["batch_ids"][0]
    assert len(batches) > 1 and all(b.event_count <= 1_000 for b in batches)
    assert sum(b.event_count for b in batches) == answer["accepted"] == len(answer["results"])
    _process(answer["batch_ids"])
    session = Session.objects.get(client_id=answer["session_id"])
    stored = ToolCall.objects.filter(session=session)
    assert set(stored.values_list("call_id", flat=True)) == _call_ids(body)
    assert stored.count() == calls == session.tool_call_count
    assert not stored.filter(turn__isnull=True).exists()
    assert not stored.exclude(turn__index=F("turn_index")).exists()
    assert session.turn_count == Turn.objects.filter(session=session).count() == answer["accepted"] - calls - 2
    # Every twentieth call repeats an earlier output of its tool; the end event was applied.
    assert stored.filter(duplicate_of__isnull=False).count() == calls // 20
    assert session.ended_at is not None and session.agent_name == "coder"
    return session


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_2500_call_transcript_is_one_request_and_one_session(api, fmt):
    body = long_transcript(fmt, 2_500, session_id=f"long-{fmt}")
    response = api.post_json(URL, body)
    assert response.status_code == 202, response.json()
    answer = response.json()
    assert answer["format"] == fmt and answer["session_id"] == f"long-{fmt}"
    session = _assert_stored_whole(answer, body, 2_500)
    errors = 2_500 // 50 if fmt == "anthropic" else 0  # only Anthropic flags them
    assert session.error_count == errors


@pytest.mark.django_db
def test_10000_calls_the_default_bound_are_accepted_and_10001_are_413_naming_it(api):
    body = long_transcript("anthropic", 10_000)
    response = api.post_json(URL, body, gzipped=True)
    assert response.status_code == 202, response.json()
    _assert_stored_whole(response.json(), body, 10_000)

    IngestBatch.objects.all().delete()
    over = api.post_json(URL, long_transcript("anthropic", 10_001, session_id="over"), gzipped=True)
    assert over.status_code == 413 and over.json()["code"] == "payload_too_large"
    assert "10,001 tool calls" in over.json()["detail"] and "10,000" in over.json()["detail"]
    assert "TRANSCRIPT_MAX_CALLS" in over.json()["detail"]
    assert not IngestBatch.objects.exists()


@pytest.mark.django_db
def test_the_bound_is_a_setting_and_counts_model_requests_too(api, settings):
    settings.TRANSCRIPT_MAX_CALLS = 30
    assert api.post_json(URL, long_transcript("openai_chat", 30)).status_code == 202
    response = api.post_json(URL, long_transcript("openai_chat", 31, session_id="31"))
    assert response.status_code == 413 and "31 tool calls; the limit is 30" in response.json()["detail"]
    chat = {"session_id": "talk", "messages": [m for n in range(31) for m in (
        {"role": "user", "content": f"question {n}"}, {"role": "assistant", "content": f"answer {n}"})]}
    response = api.post_json(URL, chat)
    assert response.status_code == 413 and "31 model requests (turns)" in response.json()["detail"]
    assert IngestBatch.objects.count() == 1


@pytest.mark.django_db
def test_a_transcript_body_has_its_own_size_limit(api, settings):
    settings.INGEST_MAX_BODY_BYTES = 20_000
    settings.TRANSCRIPT_MAX_BODY_BYTES = 200_000
    body = long_transcript("openai_chat", 60)
    size = len(json.dumps(body))
    assert settings.INGEST_MAX_BODY_BYTES < size < settings.TRANSCRIPT_MAX_BODY_BYTES
    assert api.post_json(URL, body).status_code == 202
    events = {"events": [{"type": "session", "id": "big", "metadata": {"note": "x" * size}}]}
    assert api.post_json("/api/v1/ingest", events).status_code == 413

    settings.TRANSCRIPT_MAX_BODY_BYTES = size - 1
    for gzipped in (False, True):
        response = api.post_json(URL, {**body, "session_id": "long-run-2"}, gzipped=gzipped)
        assert response.status_code == 413
        assert f"{(size - 1) / 1_000_000:g} MB" in response.json()["detail"]
    assert IngestBatch.objects.count() == 1


@pytest.mark.django_db
def test_a_failure_while_storing_the_batches_stores_none_and_enqueues_none(
        api, settings, monkeypatch, django_capture_on_commit_callbacks):
    settings.INGEST_MAX_EVENTS = 50
    create = IngestBatch.objects.create
    stored = []

    def failing_third(**kwargs):
        if len(stored) == 2:
            raise RuntimeError("the disk filled up")
        stored.append(create(**kwargs))
        return stored[-1]

    monkeypatch.setattr(IngestBatch.objects, "create", failing_third)
    api.raise_request_exception = False
    with django_capture_on_commit_callbacks() as callbacks:
        response = api.post_json(URL, long_transcript("anthropic", 100))
    assert response.status_code == 500
    assert len(stored) == 2 and not IngestBatch.objects.exists()
    assert callbacks == []


def _snapshot(project) -> dict:
    """Everything processing derives for the project's one session, without its ids."""
    session = Session.objects.get(project=project)
    turns = list(Turn.objects.filter(session=session).order_by("index").values(
        "client_id", "index", "time_known", "system_prompt_tokens", "new_message_tokens", "schema_tokens",
        "message_tokens", "call_tokens", "tool_output_tokens", "estimated_input_tokens", "window_share",
        "near_window", "advertised_set__tools", "advertised_set__schema_tokens"))
    calls = list(ToolCall.objects.filter(session=session).order_by("client_id").values(
        "client_id", "turn__client_id", "turn_index", "status", "error_rule", "output_tokens", "argument_tokens",
        "duplicate_of__client_id", "duplicate_tokens", "placeholder", "placeholder_tokens"))
    # Not its end: each project's copy ended when it was received.
    summary = {name: getattr(session, name) for name in (
        "client_id", "agent_name", "model", "metadata", "started_at", "turn_count", "tool_call_count",
        "error_count", "duplicate_tokens", "max_window_share", "near_window")}
    assert session.ended_at > session.started_at

    def rollup(model) -> list:
        rows = model.objects.filter(project=project).values()
        return sorted((sorted((k, v) for k, v in row.items() if k not in ("id", "project_id")) for row in rows),
                      key=repr)

    return {"session": summary, "turns": turns, "calls": calls, "tools": rollup(ToolHourly),
            "hours": rollup(ProjectHourly)}


@pytest.mark.django_db
def test_a_transcripts_batches_give_the_same_session_whatever_order_they_run_in(project, settings, monkeypatch):
    """In order, in reverse (the end event first; each batch alone) and shuffled with the
    workers' merging of pending batches: the same turns, calls, links, budgets and rollups."""
    settings.INGEST_MAX_EVENTS = 150
    body = long_transcript("anthropic", 600)
    projects = [project, make_project("reverse"), make_project("shuffled")]
    sent = []
    for target in projects:
        answer = KeyClient(make_key(target, scopes=["ingest"]).secret).post_json(URL, body).json()
        assert len(answer["batch_ids"]) >= 6
        sent.append(answer["batch_ids"])
    with monkeypatch.context() as alone:
        alone.setattr(processing, "MERGE_MAX_EVENTS", 0)
        _process(sent[0])
        _process(sent[1][::-1])
    _process(random.Random(5).sample(sent[2], len(sent[2])))
    expected = _snapshot(project)
    assert expected["turns"][-1]["tool_output_tokens"] > 0 and expected["session"]["duplicate_tokens"] > 0
    assert _snapshot(projects[1]) == expected
    assert _snapshot(projects[2]) == expected


@pytest.mark.django_db
def test_a_batch_carries_each_tool_definition_once_and_names_it_after(api, settings):
    settings.INGEST_MAX_EVENTS = 40
    answer = api.post_json(URL, long_transcript("openai_responses", 60)).json()
    for batch in IngestBatch.objects.filter(pk__in=answer["batch_ids"]):
        turns = [event for event in batch.payload["events"] if event["type"] == "turn"]
        full = [turn for turn in turns if "input_schema" in turn["tools"][0]]
        assert turns and full == turns[:1]  # the first turn of every batch carries the definitions
        assert all(set(tool) == {"name", "schema_hash"} for turn in turns[1:] for tool in turn["tools"])
        # A turn stays in the batch of its calls.
        assert batch.payload["events"][0]["type"] != "tool_call"
    _process(answer["batch_ids"])
    sets = set(Turn.objects.values_list("advertised_set_id", flat=True))
    assert len(sets) == 1 and Turn.objects.filter(schema_tokens__gt=0).count() == Turn.objects.count()


# --- paging the session's detail ------------------------------------------------------------


@pytest.fixture
def long_session(project):
    """1,000 turns of 2 calls, turn 500 with 700 more: 3,700 rows to page through."""
    return bulk_session(project, client_id="long/1", turns=1_000, calls_per_turn=2, crowded=(500, 700))


@pytest.fixture
def reader(project):
    return KeyClient(make_key(project, scopes=["read"]).secret)


def _detail(reader, client_id, **params):
    return reader.get(reverse("api:session", args=[client_id]), params)


def _in_session_order(session) -> list[tuple[str, str]]:
    """Each turn followed by its calls in (started_at, id) order."""
    calls: dict[int, list[tuple[str, str]]] = {}
    for call in ToolCall.objects.filter(session=session).order_by("turn_index", "started_at", "pk"):
        calls.setdefault(call.turn_index, []).append(("call", call.client_id))
    return [item for turn in Turn.objects.filter(session=session).order_by("index")
            for item in [("turn", f"{turn.index}"), *calls.get(turn.index, [])]]


@pytest.mark.django_db
def test_the_read_api_pages_a_long_session_in_order_with_totals(reader, long_session):
    first = _detail(reader, "long/1").json()
    assert len(first["turns"]) + len(first["calls"]) == 500  # the default page size
    assert first["totals"] == {"turns": 1_000, "calls": 2_700} and first["session"]["tool_call_count"] == 2_700
    seen, pages, cursor = [], 0, None
    while True:
        page = _detail(reader, "long/1", limit=400, **({"cursor": cursor} if cursor else {})).json()
        pages += 1
        items = sorted([((t["index"], 0), ("turn", f"{t['index']}")) for t in page["turns"]]
                       + [((c["turn_index"], 1), ("call", c["id"])) for c in page["calls"]], key=lambda i: i[0])
        assert 0 < len(items) <= 400
        seen += [item for _, item in items]
        # A repeat's first occurrence is named wherever it is.
        assert all(c["duplicate_of"] == "long/1:c0.0" for c in page["calls"] if c["duplicate_tokens"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 10  # 3,700 rows in pages of 400
    assert seen == _in_session_order(long_session)


@pytest.mark.django_db
def test_a_page_can_start_at_a_turn_and_ends_past_the_session(reader, long_session):
    page = _detail(reader, "long/1", turn=500, limit=100).json()
    assert [t["index"] for t in page["turns"]] == [500]
    assert len(page["calls"]) == 99 and {c["turn_index"] for c in page["calls"]} == {500}
    # Turn 500 has 702 calls: the next page holds its other 603, then turn 501 and its calls.
    rest = _detail(reader, "long/1", cursor=page["next_cursor"], limit=606).json()
    assert [c["turn_index"] for c in rest["calls"]] == [500] * 603 + [501] * 2
    assert [t["index"] for t in rest["turns"]] == [501]
    # With both, the cursor wins: the same page.
    assert _detail(reader, "long/1", cursor=page["next_cursor"], turn=3, limit=606).json() == rest
    end = _detail(reader, "long/1", cursor="99999_1_99999999999999999999_99999999999999999999").json()
    assert end["turns"] == end["calls"] == [] and end["next_cursor"] is None


@pytest.mark.django_db
@pytest.mark.parametrize(("params", "field"), [
    ({"limit": 0}, "limit"), ({"limit": 2_001}, "limit"), ({"cursor": "12_3"}, "cursor"),
    ({"cursor": "1_2_3_4"}, "cursor"), ({"turn": -1}, "turn"), ({"turn": "x"}, "turn"),
])
def test_a_bad_paging_parameter_is_a_400_naming_it(reader, long_session, params, field):
    response = _detail(reader, "long/1", **params)
    assert response.status_code == 400 and response.json()["field"] == field


@pytest.fixture
def viewer(project):
    from django.test import Client

    client = Client()
    client.force_login(make_member(project, make_user()).user)
    return client


@pytest.mark.django_db
def test_the_session_page_shows_one_page_and_links_the_next(viewer, project, long_session):
    url = reverse("dashboard:session", args=[project.slug, "long/1"])
    response = viewer.get(url)
    context = response.context
    assert len(context["turns"]) + len(context["calls"]) == 200
    html = response.content.decode()
    assert "of 1,000 turns and 2,700 calls" in html and "Next 200" in html
    assert len(html) < 1_000_000
    seen = [c["client_id"] for c in context["calls"]]
    next_cursor = context["paging"]["next"]
    for _ in range(30):
        response = viewer.get(url, {"after": next_cursor})
        seen += [c["client_id"] for c in response.context["calls"]]
        next_cursor = response.context["paging"]["next"]
        if next_cursor is None:
            break
    assert next_cursor is None and "End of the session." in response.content.decode()
    assert seen == [item for kind, item in _in_session_order(long_session) if kind == "call"]


@pytest.mark.django_db
def test_a_repeat_links_to_its_first_occurrence_on_another_page(viewer, project, long_session):
    url = reverse("dashboard:session", args=[project.slug, "long/1"])
    page = viewer.get(url, {"turn": 900})
    first = ToolCall.objects.get(client_id="long/1:c0.0")
    assert page.context["elsewhere"] == {first.pk: 0}
    assert f'href="?turn=0#call-{first.pk}"' in page.content.decode()
    assert f'id="call-{first.pk}"' in viewer.get(url, {"turn": 0}).content.decode()


@pytest.mark.django_db
def test_a_short_session_is_one_page_without_paging_controls(viewer, project):
    bulk_session(project, client_id="short", turns=10, calls_per_turn=2)
    response = viewer.get(reverse("dashboard:session", args=[project.slug, "short"]))
    assert response.context["paging"]["whole"] and len(response.context["calls"]) == 20
    assert "Next 200" not in response.content.decode() and 'id="pages"' not in response.content.decode()


def test_the_sdk_reads_every_page_of_a_session_joined(live_server, transactional_db):
    from toolscope_agent import Client

    project = make_project("sdk-long")
    session = bulk_session(project, client_id="run/long", turns=30, calls_per_turn=2)
    with Client(live_server.url, make_key(project, scopes=["read"]).secret) as client:
        detail = client.session_detail("run/long", limit=7)  # 13 pages
    assert [t["index"] for t in detail["turns"]] == list(range(30))
    assert [("call", c["id"]) for c in detail["calls"]] == [
        item for item in _in_session_order(session) if item[0] == "call"]
    assert detail["totals"] == {"turns": 30, "calls": 60} and detail["next_cursor"] is None
