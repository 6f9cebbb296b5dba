"""Recommendations on the Simulate tab: candidates learnt on older sessions and scored on newer
ones, the Pareto curve, and a point applied to the draft in one click (editors), audited."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from tests.admin.builders import make_policy, make_tool
from tests.factories import make_session, make_tool_call, make_turn
from toolscope.policies.models import PolicyAuditEntry

NAMES = ["read_file", "edit_file", "git_status", "git_diff", "git_commit", "deploy", "query_db", "tool_search"]


@pytest.fixture(autouse=True)
def _clean_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def recorded(project):
    tools = {name: make_tool(project, name, schema_tokens=100) for name in NAMES}
    policy = make_policy(project, always_on=list(tools.values()))
    start = timezone.now() - timedelta(days=2)
    for n in range(24):
        session = make_session(project, started_at=start + timedelta(minutes=n))
        if n % 3 == 0:
            turn = make_turn(session, 0, advertised=NAMES, task_message="commit the fix", schema_tokens=800)
            calls = ["read_file", "git_status", "git_diff", "git_commit"]
        else:
            turn = make_turn(session, 0, advertised=NAMES, task_message="fix the bug", schema_tokens=800)
            calls = ["read_file", "edit_file"]
        for name in calls:
            make_tool_call(turn, name, output_tokens=9000 if name == "edit_file" else 300)
    return policy


WINDOW = {"recommend-days": 7, "recommend-limit": 100}


def page(client, project, **params):
    query = {**WINDOW, **params}
    return client.get(reverse("dashboard:policy_simulations", args=[project.slug]), query)


def test_the_recommendation_learns_on_older_sessions_and_scores_on_newer_ones(viewer_client, project, recorded):
    response = page(viewer_client, project)
    found = response.context["recommendations"]
    assert (found["sessions"], found["fit"], found["held_out"]) == (24, 12, 12)
    assert found["recommended"] == "always-on top 2 + 1 rules"
    best = next(row for row in found["candidates"] if row["name"] == found["recommended"])
    # Held out: 8 "fix" sessions send read + edit (200), 4 "commit" ones also the git group (500);
    # 12 x 800 advertised.
    assert best["miss_rate"] == 0.0 and best["saved_share"] == (9600 - (8 * 200 + 4 * 500)) / 9600
    assert response.context["curve"] and b"data-apply" not in response.content  # a viewer cannot apply


def test_an_editor_applies_a_point_to_the_draft(editor_client, project, recorded):
    page(editor_client, project)
    url = reverse("dashboard:policy_recommendation_apply", args=[project.slug])
    response = editor_client.post(url, {"name": "always-on top 2 + 1 rules", **WINDOW})
    assert response.status_code == 302
    recorded.refresh_from_db()
    assert recorded.mode == "context_rules"
    assert sorted(recorded.always_on.values_list("name", flat=True)) == ["edit_file", "read_file"]
    group = recorded.groups.get()
    assert sorted(group.tools.values_list("name", flat=True)) == ["git_commit", "git_diff", "git_status"]
    rule = recorded.context_rules.get()
    assert rule.keywords == ["commit"] and list(rule.groups.all()) == [group]
    assert list(recorded.compaction_rules.values_list("tools", "max_tokens")) == [("edit_file", 2000)]
    assert PolicyAuditEntry.objects.filter(project=project, action="draft_changed").count() == 1


def test_a_viewer_cannot_apply_and_an_unknown_point_is_refused(viewer_client, editor_client, project, recorded):
    url = reverse("dashboard:policy_recommendation_apply", args=[project.slug])
    assert viewer_client.post(url, {"name": "always-on top 2", **WINDOW}).status_code == 403
    assert editor_client.post(url, {"name": "no such point", **WINDOW}).status_code == 409


def test_too_few_sessions_say_so(viewer_client, project):
    make_policy(project)
    response = page(viewer_client, project)
    assert response.context["recommendations"]["sessions"] == 0 and b"Too few sessions" in response.content


def test_a_large_catalog_without_a_search_tool_gets_tool_search_candidates(project, recorded):
    from toolscope_agent.engine.recommend import LARGE_CATALOG

    from toolscope.policies.services.recommendations import policy_recommendations

    assert "tool_search + top 0" in {row["name"] for row in policy_recommendations(project=project, days=7)["candidates"]}
    cache.clear()
    project.tools.filter(name="tool_search").delete()  # a small catalog without one: none
    assert not any(row["name"].startswith("tool_search") for row in policy_recommendations(project=project, days=7)["candidates"])
    cache.clear()
    for n in range(LARGE_CATALOG):
        make_tool(project, f"extra_{n}", schema_tokens=100)
    found = {row["name"]: row for row in policy_recommendations(project=project, days=7)["candidates"]}
    search = found["tool_search + top 2"]
    assert search["selection"]["always_on"] == ["read_file", "edit_file", "tool_search"]
    # Toolscope's search tool is priced: it saves less than the same always-on set without it.
    assert 0 < search["saved_share"] < found["always-on top 2"]["saved_share"]
