"""The sessions list (filters, keyset pages) and a session's page."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from dashboard import selectors
from tests import factories
from tests.dashboard.builders import add_session, recent
from toolscope.telemetry.models import ToolCall


@pytest.fixture
def sessions(project):
    """Four sessions an hour apart, newest first: a, b, c, d."""
    at = recent(10)
    return {
        "a": add_session(project, at=at + timedelta(hours=3), agent="coder", model="gpt-4o", errors=1),
        "b": add_session(project, at=at + timedelta(hours=2), agent="reviewer", model="gpt-4o", near_window=True),
        "c": add_session(project, at=at + timedelta(hours=1), agent="coder", model="claude", errors=2,
                         near_window=True),
        "d": add_session(project, at=at, agent="reviewer", model="claude"),
    }


def _listed(client, project, **params):
    response = client.get(reverse("dashboard:sessions", args=[project.slug]), params)
    assert response.status_code == 200
    return response, [row["client_id"] for row in response.context["page"].rows]


def _ids(sessions, names):
    return [sessions[name].client_id for name in names]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, "abcd"),
        ({"agent": "coder"}, "ac"),
        ({"model": "claude"}, "cd"),
        ({"errors": "yes"}, "ac"),
        ({"errors": "no"}, "bd"),
        ({"near_window": "on"}, "bc"),
        ({"agent": "coder", "errors": "yes", "near_window": "on"}, "c"),
        ({"agent": "nobody"}, ""),
    ],
)
def test_filters(viewer_client, project, sessions, params, expected):
    _, listed = _listed(viewer_client, project, **params)
    assert listed == _ids(sessions, expected)


@pytest.mark.django_db
def test_the_time_range_filters_sessions(viewer_client, project, sessions):
    old = add_session(project, at=recent(24 * 20))
    _, listed = _listed(viewer_client, project, range="30d")
    assert old.client_id in listed
    _, listed = _listed(viewer_client, project)
    assert old.client_id not in listed
    day = old.started_at.date().isoformat()
    _, listed = _listed(viewer_client, project, range="custom", start=day, end=day)
    assert listed == [old.client_id]


@pytest.mark.django_db
def test_facets_offer_the_ranges_agents_and_models(viewer_client, project, sessions):
    response, _ = _listed(viewer_client, project)
    assert response.context["facets"] == {"agents": ["coder", "reviewer"], "models": ["claude", "gpt-4o"]}


@pytest.mark.django_db
def test_pages_follow_each_other_through_next_links(viewer_client, project):
    at = recent(30)
    made = [factories.make_session(project, started_at=at + timedelta(minutes=n)) for n in range(53)]
    newest_first = [s.client_id for s in reversed(made)]
    response, first = _listed(viewer_client, project)
    assert first == newest_first[:50]
    cursor = response.context["next_after"]
    assert 'href="?after=' in response.content.decode()
    response, second = _listed(viewer_client, project, after=cursor)
    assert second == newest_first[50:]
    assert response.context["next_after"] is None
    assert "Newest" in response.content.decode()


@pytest.mark.django_db
def test_sessions_started_at_the_same_instant_are_paged_without_loss(project):
    at = recent(5)
    made = [factories.make_session(project, started_at=at) for _ in range(5)]
    window = {"project_id": project.pk, "start": at - timedelta(hours=1), "end": at + timedelta(hours=1)}
    seen, after = [], None
    while True:
        page = selectors.session_list(**window, after=after, limit=2)
        seen += [row["id"] for row in page.rows]
        if page.next_after is None:
            break
        after = page.next_after
    assert seen == sorted((s.pk for s in made), reverse=True)


@pytest.mark.django_db
def test_the_list_never_counts_all_sessions(viewer_client, project, sessions):
    with CaptureQueriesContext(connection) as queries:
        viewer_client.get(reverse("dashboard:sessions", args=[project.slug]))
    assert not any("COUNT(" in query["sql"].upper() for query in queries.captured_queries)


@pytest.mark.django_db
def test_a_bad_cursor_is_the_first_page(viewer_client, project, sessions):
    _, listed = _listed(viewer_client, project, after="not-a-cursor")
    assert listed == _ids(sessions, "abcd")


@pytest.mark.django_db
def test_session_page_shows_budget_timeline_and_transcript(viewer_client, project, sessions):
    session = sessions["a"]
    response = viewer_client.get(reverse("dashboard:session", args=[project.slug, session.client_id]))
    assert response.status_code == 200
    turns = response.context["transcript"]
    assert [turn["index"] for turn in turns] == [0, 1]
    assert [len(turn["calls"]) for turn in turns] == [2, 1]
    first, compacted = turns[0]["calls"]
    duplicate = turns[1]["calls"][0]
    html = response.content.decode()
    # The duplicate links to its first occurrence; the compacted output to its artifact.
    assert duplicate["duplicate_of_id"] == first["id"]
    assert f'href="#call-{first["id"]}"' in html and f'id="call-{first["id"]}"' in html
    assert f'id="artifact-{compacted["artifact_id"]}"' in html
    assert "500 → 20 tokens" in html
    assert "Fix the test" in html
    assert html.count("<details><summary>Output") == 3
    assert {"budget", "timeline"} <= response.context["charts"].keys()


@pytest.mark.django_db
def test_calls_of_an_unrecorded_turn_are_still_shown(viewer_client, project, sessions):
    session = sessions["d"]
    ToolCall.objects.create(project=project, session=session, turn_index=7, client_id="orphan", tool_name="bash",
                            started_at=session.started_at)
    response = viewer_client.get(reverse("dashboard:session", args=[project.slug, session.client_id]))
    stand_in = response.context["transcript"][-1]
    assert (stand_in["index"], stand_in["missing"], stand_in["calls"][0]["tool_name"]) == (7, True, "bash")


@pytest.mark.django_db
def test_unknown_session_is_404(viewer_client, project):
    assert viewer_client.get(reverse("dashboard:session", args=[project.slug, "nope"])).status_code == 404


@pytest.mark.django_db
def test_session_ids_with_a_slash_have_pages(viewer_client, project):
    session = add_session(project, at=recent())
    session.client_id = "run/42"
    session.save()
    assert viewer_client.get(reverse("dashboard:session", args=[project.slug, "run/42"])).status_code == 200
    assert viewer_client.get(reverse("dashboard:session_turns_csv", args=[project.slug, "run/42"])).status_code == 200


def test_sessions_through_the_mcp_gateway_are_marked_and_filtered(viewer_client, project, sessions):
    from toolscope.telemetry.models import Session

    Session.objects.filter(pk=sessions["b"].pk).update(metadata={"gateway": "toolscope-mcp", "transport": "stdio"})
    Session.objects.filter(pk=sessions["c"].pk).update(metadata={"gateway": "something else"})
    response, listed = _listed(viewer_client, project, gateway="on")
    assert listed == _ids(sessions, ["b"])
    assert 'title="Recorded by toolscope-mcp, the MCP gateway">gateway</span>' in response.content.decode()
    response, listed = _listed(viewer_client, project)
    assert len(listed) == 4 and response.content.decode().count(">gateway</span>") == 1
    csv = b"".join(viewer_client.get(reverse("dashboard:sessions_csv", args=[project.slug]),
                                     {"gateway": "on"}).streaming_content).decode().splitlines()
    header = csv[0].split(",")
    assert len(csv) == 2 and csv[1].split(",")[header.index("via")] == "toolscope-mcp"


def test_sessions_through_the_proxy_are_marked_and_filtered(viewer_client, project, sessions):
    from toolscope.telemetry.models import Session

    Session.objects.filter(pk=sessions["a"].pk).update(metadata={"gateway": "toolscope-proxy", "proxy_mode": "enforce"})
    Session.objects.filter(pk=sessions["b"].pk).update(metadata={"gateway": "toolscope-mcp"})
    response, listed = _listed(viewer_client, project, proxy="on")
    assert listed == _ids(sessions, ["a"])
    assert 'title="Recorded by toolscope-proxy, the model-API proxy">proxy</span>' in response.content.decode()
    page = viewer_client.get(reverse("dashboard:session", args=[project.slug, sessions["a"].client_id]))
    assert b"Recorded through toolscope-proxy, the model-API proxy, in enforce mode" in page.content


def test_a_session_recorded_from_otel_without_content_says_its_figures_are_partial(viewer_client, project, sessions):
    from toolscope.telemetry.models import Session

    url = reverse("dashboard:session", args=[project.slug, sessions["a"].client_id])
    assert b"data-partial" not in viewer_client.get(url).content
    Session.objects.filter(pk=sessions["a"].pk).update(
        metadata={"source": "otlp", "conventions": "gen_ai", "content_captured": False})
    assert b"schema and message tokens are partial" in viewer_client.get(url).content
    Session.objects.filter(pk=sessions["a"].pk).update(
        metadata={"gateway": "toolscope-mcp", "client": {"name": "cursor", "version": "1.2"}})
    assert b"Recorded through toolscope-mcp, the MCP gateway, for cursor." in viewer_client.get(url).content
