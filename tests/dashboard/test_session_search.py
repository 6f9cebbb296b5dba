"""Issue 28, item 6: finding a session. Search by id, task text, metadata and tag; sort by time,
tokens, dollars, errors and turns with keyset pages; the first page of the newest refreshes itself."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.api.conftest import KeyClient
from tests.factories import make_key
from toolscope.telemetry.models import Session, Turn
from toolscope.telemetry.services.ingest import ingest_events
from toolscope.telemetry.services.processing import batch_process

DAY = "2026-11-20"
RANGE = {"range": "custom", "start": "2026-11-19", "end": "2026-11-21"}


def _session(project, sid: str, *, hour: int, task: str, turns: int, input_tokens: int, errors: int = 0,
             model: str = "gpt-4o", metadata: dict | None = None) -> None:
    at = f"{DAY}T{hour:02d}:00:00Z"
    events = [{"type": "session", "id": f"{sid}-start", "session_id": sid, "action": "start", "agent_name": "coder",
               "model": model, "metadata": metadata or {}, "timestamp": at}]
    for index in range(turns):
        events.append({"type": "turn", "id": f"{sid}-t{index}", "session_id": sid, "index": index, "model": model,
                       "timestamp": f"{DAY}T{hour:02d}:0{index}:00Z", "task_message": task,
                       "usage": {"input_tokens": input_tokens, "output_tokens": 10}})
    for n in range(errors):
        events.append({"type": "tool_call", "id": f"{sid}-c{n}", "session_id": sid, "turn_index": 0,
                       "tool_name": "bash", "status": "error", "output": "boom", "timestamp": at})
    outcome = ingest_events(api_key=make_key(project).api_key, raw_events=events)
    assert outcome.counts["rejected"] == 0, outcome.results
    batch_process(batch_id=outcome.batch_id)


@pytest.fixture
def sessions(project):
    _session(project, "run-alpha", hour=9, task="Fix the flaky login test", turns=3, input_tokens=1_000, errors=2,
             metadata={"tags": ["nightly", "auth"], "branch": "feature/login"})
    _session(project, "run-beta", hour=10, task="Write the release notes", turns=1, input_tokens=9_000)
    _session(project, "run-gamma", hour=11, task="Refactor the billing module", turns=2, input_tokens=500, errors=1,
             model="unpriced-model-x", metadata={"tags": ["weekly"]})
    return project


def _ids(client, project, **params) -> list[str]:
    response = client.get(reverse("dashboard:sessions", args=[project.slug]), {**RANGE, **params})
    assert response.status_code == 200
    return [row["client_id"] for row in response.context["page"].rows]


def test_a_session_keeps_its_tokens_and_dollars(sessions):
    alpha = Session.objects.get(client_id="run-alpha")
    turns = Turn.objects.filter(session=alpha)
    assert alpha.total_tokens == 3 * (1_000 + 10)
    assert alpha.cost_nanos == sum(turn.cost_nanos for turn in turns) > 0
    assert Session.objects.get(client_id="run-gamma").cost_nanos is None  # no price for its model


@pytest.mark.parametrize(("q", "found"), [
    ("BETA", ["run-beta"]),  # the id, any case
    ("flaky login", ["run-alpha"]),  # a turn's task text
    ("feature/login", ["run-alpha"]),  # a metadata value
    ("nightly", ["run-alpha"]),  # a tag
    ("weekly", ["run-gamma"]),
    ("the", ["run-gamma", "run-beta", "run-alpha"]),
    ("nothing like it", []),
])
def test_search_finds_sessions_by_id_task_metadata_and_tag(viewer_client, sessions, q, found):
    assert _ids(viewer_client, sessions, q=q) == found


def test_search_never_crosses_projects(viewer_client, sessions, other_project):
    _session(other_project, "run-secret", hour=9, task="Fix the flaky login test", turns=1, input_tokens=5)
    assert _ids(viewer_client, sessions, q="flaky") == ["run-alpha"]


@pytest.mark.parametrize(("sort", "order"), [
    ("time", ["run-gamma", "run-beta", "run-alpha"]),
    ("tokens", ["run-beta", "run-alpha", "run-gamma"]),
    ("cost", ["run-beta", "run-alpha", "run-gamma"]),  # unpriced last
    ("errors", ["run-alpha", "run-gamma", "run-beta"]),
    ("turns", ["run-alpha", "run-gamma", "run-beta"]),
])
def test_the_list_sorts_largest_first(viewer_client, sessions, sort, order):
    assert _ids(viewer_client, sessions, sort=sort) == order


def test_sorted_pages_follow_each_other_without_gaps_or_repeats(sessions, monkeypatch):
    from dashboard.forms import cursor_format
    from dashboard.views import session_list

    monkeypatch.setattr(session_list.selectors, "PAGE_SIZE", 1)
    from django.test import Client

    from tests.factories import make_member
    client = Client()
    client.force_login(make_member(sessions).user)
    seen, after = [], None
    while True:
        response = client.get(reverse("dashboard:sessions", args=[sessions.slug]),
                              {**RANGE, "sort": "tokens", **({"after": after} if after else {})})
        seen += [row["client_id"] for row in response.context["page"].rows]
        if response.context["next_after"] is None:
            break
        after = response.context["next_after"]
        assert after == cursor_format(*response.context["page"].next_after)
    assert seen == ["run-beta", "run-alpha", "run-gamma"]


def test_the_page_shows_tokens_and_dollars_and_only_the_newest_first_page_is_live(viewer_client, sessions):
    url = reverse("dashboard:sessions", args=[sessions.slug])
    now = timezone.now()
    live = viewer_client.get(url, {"range": "custom", "start": "2026-11-19",
                                   "end": (now + timezone.timedelta(days=1)).date().isoformat()})
    html = live.content.decode()
    assert 'data-live="10"' in html and "dashboard/live.js" in html
    alpha = Session.objects.get(client_id="run-alpha")
    assert f"<td class=\"n\">{alpha.total_tokens:,}</td>" in html
    assert f"${Decimal(alpha.cost_nanos) / 1_000_000_000:.4f}" in html
    assert 'data-live="10"' not in viewer_client.get(url, {**RANGE}).content.decode()  # a range in the past
    assert 'data-live="10"' not in viewer_client.get(url, {"sort": "tokens"}).content.decode()


def test_the_csv_follows_the_search_and_sort_with_tokens_and_dollars(viewer_client, sessions):
    response = viewer_client.get(reverse("dashboard:sessions_csv", args=[sessions.slug]),
                                 {**RANGE, "q": "the", "sort": "tokens"})
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert lines[0].endswith("via,total_tokens,usd")
    assert [line.split(",")[0] for line in lines[1:]] == ["run-beta", "run-alpha", "run-gamma"]
    assert lines[-1].endswith(",")  # gamma: unpriced, no dollars


def test_the_read_api_searches_too(sessions):
    key = make_key(sessions, scopes=["read"]).secret
    body = KeyClient(key).get("/api/v1/sessions", {"start": "2026-11-19T00:00:00Z", "q": "nightly"}).json()
    (row,) = body["results"]
    assert row["client_id"] == "run-alpha" and row["total_tokens"] == 3_030
    assert Decimal(row["usd"]) == Decimal(Session.objects.get(client_id="run-alpha").cost_nanos) / 1_000_000_000
