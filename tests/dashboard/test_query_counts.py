"""Query counts pinned: each selector, and each page for 3 rows as for 30 (no query per row)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from dashboard import selectors
from tests import factories
from tests.admin.builders import make_tool
from tests.dashboard.builders import add_session, build_activity, rebuild, recent
from toolscope.policies.models import ToolVersion

# (selector, queries): run with the keyword arguments _arguments() builds.
SELECTORS = [
    ("projects_for_user", 1), ("overview_kpis", 1), ("token_series", 1), ("tool_usage", 2), ("catalog_rows", 1),
    ("tool_table", 4), ("tool_get", 1), ("tool_seen", 1), ("tool_series", 1), ("tool_call_sample", 1),
    ("tool_errors", 1), ("tool_versions", 1), ("tool_search_texts", 1), ("session_list", 1), ("session_export", 1),
    ("session_facets", 1), ("slice_choices", 1),
    ("session_get", 1), ("session_turns", 1), ("session_calls", 1), ("api_key_list", 1), ("api_key_get", 1),
]


def _arguments(name, activity, member):
    project, session = activity.project, activity.sessions[0]
    window = {"project_id": project.pk, "start": recent(24 * 7), "end": recent(-1)}
    tool = {"project_id": project.pk, "name": "read_file"}
    return {
        "projects_for_user": {"user": member},
        "overview_kpis": window, "token_series": {**window, "bucket": "hour"}, "tool_usage": window,
        "catalog_rows": {"project_id": project.pk}, "tool_table": window,
        "tool_get": tool, "tool_seen": tool, "tool_series": {**tool, **window, "bucket": "day"},
        "tool_call_sample": {**tool, **window}, "tool_errors": {**tool, **window},
        "tool_versions": {"tool_id": selectors.tool_get(**tool).pk}, "tool_search_texts": tool,
        "session_list": window, "session_export": window, "session_facets": window, "slice_choices": window,
        "session_get": {"project_id": project.pk, "client_id": session.client_id},
        "session_turns": {"session": session}, "session_calls": {"session": session},
        "api_key_list": {"project_id": project.pk}, "api_key_get": {"project_id": project.pk, "key_id": 1},
    }[name]


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "queries"), SELECTORS)
def test_selector_query_count(name, queries, activity, member, django_assert_num_queries):
    factories.make_key(activity.project)
    arguments = _arguments(name, activity, member)
    with django_assert_num_queries(queries):
        result = getattr(selectors, name)(**arguments)
        if name == "session_export":
            list(result)
    assert result is not None or name == "api_key_get"


@pytest.mark.django_db
def test_pure_selectors_run_no_query(activity, django_assert_num_queries):
    rows = selectors.tool_table(project_id=activity.project.pk, start=recent(100), end=recent(-1))
    with django_assert_num_queries(0):
        selectors.top_by(rows, "calls")
        selectors.dead_weight(rows)
        selectors.tool_table_arrange(rows, q="", show="", sort="calls", dir="desc")
        selectors.session_transcript(turns=[], calls=[], started_at=recent())


def _count(client, url) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
        if response.streaming:
            b"".join(response.streaming_content)
    assert response.status_code == 200, url
    return len(queries)


def _grow_tools(project, count):
    at = recent()
    for n in range(count):
        name = f"extra_{n:02d}"
        make_tool(project, name)
        session = add_session(project, at=at, tool=name)
        rebuild(project, session.started_at)


@pytest.fixture
def pages(project):
    activity = build_activity(project)
    return {
        "session": reverse("dashboard:session", args=[project.slug, activity.sessions[0].client_id]),
        "overview": reverse("dashboard:overview", args=[project.slug]),
        "tools": reverse("dashboard:tools", args=[project.slug]),
        "tools_csv": reverse("dashboard:tools_csv", args=[project.slug]),
        "sessions": reverse("dashboard:sessions", args=[project.slug]),
        "sessions_csv": reverse("dashboard:sessions_csv", args=[project.slug]),
        "keys": reverse("dashboard:keys", args=[project.slug]),
        "tool": reverse("dashboard:tool", args=[project.slug, "read_file"]),
    }


@pytest.mark.django_db
def test_pages_cost_the_same_for_3_rows_as_for_30(admin_client, project, pages):
    before = {name: _count(admin_client, url) for name, url in pages.items()}
    _grow_tools(project, 27)
    for n in range(27):
        factories.make_key(project, name=f"key {n}")
    tool = selectors.tool_get(project_id=project.pk, name="read_file")
    ToolVersion.objects.bulk_create([ToolVersion(tool=tool, schema_hash=f"v{n}", input_schema={"n": n},
                                                 schema_tokens=n) for n in range(27)])
    after = {name: _count(admin_client, url) for name, url in pages.items()}
    assert after == before
    assert max(after.values()) <= 20


@pytest.mark.django_db
def test_a_session_page_costs_the_same_for_3_calls_as_for_30(viewer_client, project):
    small = add_session(project, at=recent())
    large = add_session(project, at=recent())
    turn = factories.make_turn(large, 2)
    for n in range(27):
        factories.make_tool_call(turn, "bash", started_at=large.started_at + timedelta(seconds=30 + n))
    small_count = _count(viewer_client, reverse("dashboard:session", args=[project.slug, small.client_id]))
    large_count = _count(viewer_client, reverse("dashboard:session", args=[project.slug, large.client_id]))
    assert small_count == large_count <= 20


@pytest.mark.django_db
def test_page_query_counts_are_pinned(viewer_client, pages):
    # session + user + project/membership + the page's selectors + the switcher's projects. Tool
    # usage is two: the hours' sums, and their duration sketches merged. A session's cost is two:
    # its turns from the first (a cache depends on every request before), and the project's prices.
    # The tools table adds one: the priced requests' schema and output dollars it shares out. The
    # overview adds one: the range's agents and models its filter offers.
    expected = {"overview": 9, "tools": 8, "tools_csv": 7, "sessions": 6, "sessions_csv": 4, "keys": 5, "tool": 10,
                "session": 9}
    assert {name: _count(viewer_client, url) for name, url in pages.items()} == expected
