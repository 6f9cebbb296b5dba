"""tool_search's learned history on the server: learned from recorded sessions, served with the
policy (its revision in the ETag), and used by /tools/search as the agent's selector uses it."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from toolscope_agent.selector import ToolSelector

from tests.factories import make_session, make_tool_call, make_turn
from toolscope.policies.models import SearchHistory
from toolscope.policies.services.search_history import search_history_refresh, search_history_refresh_active

URL = "/api/v1/policy"


def record(project, task: str, *calls: tuple[str, dict]) -> None:
    turn = make_turn(make_session(project), task_message=task)
    for name, arguments in calls:
        make_tool_call(turn, name, arguments=arguments)


@pytest.fixture
def refresh(django_capture_on_commit_callbacks):
    def _refresh(project):
        with django_capture_on_commit_callbacks(execute=True):
            return search_history_refresh(project=project)
    return _refresh


def test_refresh_learns_task_messages_and_search_queries_in_a_few_queries(
        project, django_assert_num_queries, django_capture_on_commit_callbacks):
    record(project, "Rotate the signing keys", ("tool_search", {"query": "key rotation"}), ("web_fetch", {}))
    record(project, "Show what changed", ("git_diff", {}))
    with django_assert_num_queries(7), django_capture_on_commit_callbacks(execute=True):
        history = search_history_refresh(project=project)
    assert history.tools == {"git_diff": ["Show what changed"],
                             "web_fetch": ["Rotate the signing keys", "key rotation"]}
    assert history.sessions == 2 and len(history.revision) == 16


def test_query_count_does_not_grow_with_sessions(project, django_assert_num_queries, refresh):
    for i in range(30):
        record(project, f"task {i}", ("bash", {}), ("read_file", {}))
    refresh(project)
    with django_assert_num_queries(7):  # three reads, then the locked row and its update
        search_history_refresh(project=project)


def test_history_is_served_with_a_learned_policy_and_its_revision_changes_the_etag(
        project, policy, publish, agent, refresh):
    version = publish(policy)
    assert version.document["selection"]["tool_search"] == {
        "top_k": 8, "max_top_k": 20, "provider_search": False, "ranker": "bm25f-2", "learned": True,
        "semantic": None}
    assert "search_history" not in agent.get(URL).json()  # nothing learned yet
    record(project, "Rotate the signing keys", ("web_fetch", {}))
    history = refresh(project)
    response = agent.get(URL)
    body = response.json()
    assert body["search_history"] == {"revision": history.revision, "tools": {"web_fetch": ["Rotate the signing keys"]}}
    assert response["ETag"] == body["etag"] == version.etag[:-1] + f'-h{history.revision}"'
    assert agent.get(URL, HTTP_IF_NONE_MATCH=response["ETag"]).status_code == 304
    record(project, "Deploy to staging", ("bash", {}))
    refresh(project)
    changed = agent.get(URL, HTTP_IF_NONE_MATCH=response["ETag"])
    assert changed.status_code == 200 and "bash" in changed.json()["search_history"]["tools"]


def test_a_policy_without_learning_gets_no_history(project, policy, publish, agent, refresh):
    policy.search_learned = False
    policy.save()
    version = publish(policy)
    record(project, "Rotate the signing keys", ("web_fetch", {}))
    refresh(project)
    response = agent.get(URL)
    assert "search_history" not in response.json() and response["ETag"] == version.etag


def test_the_selector_searches_with_the_served_history(project, policy, publish, agent, tools, refresh):
    publish(policy)
    record(project, "Rotate the signing keys", ("web_fetch", {}))
    refresh(project)
    catalog = [{"name": name, "description": "A tool.", "input_schema": {}} for name in tools]
    document = agent.get(URL).json()
    assert [hit.name for hit in ToolSelector(catalog, document).search("signing keys") if hit.matched] == ["web_fetch"]
    plain = {**document, "search_history": None}
    assert not any(hit.matched for hit in ToolSelector(catalog, plain).search("signing keys"))


def test_tools_search_ranks_as_the_labels_version(project, policy, publish, agent, refresh):
    record(project, "Rotate the signing keys", ("web_fetch", {}))
    refresh(project)
    url = "/api/v1/tools/search"
    before = agent.post(url, {"query": "signing keys"}, content_type="application/json").json()
    assert (before["ranking"], before["confident"]) == ("bm25f-2", False)
    assert before["results"] and not any(hit["matched"] for hit in before["results"])
    publish(policy)
    answer = agent.post(url, {"query": "signing keys"}, content_type="application/json").json()
    assert [hit["name"] for hit in answer["results"] if hit["matched"]] == ["web_fetch"]
    assert answer["ranking"] == "bm25f-2" and answer["confident"] and answer["results"][0]["name"] == "web_fetch"


def test_a_version_published_before_rankers_keeps_the_legacy_ranking(project, policy, publish, agent):
    version = publish(policy)
    version.document["selection"]["tool_search"] = {"top_k": 8, "max_top_k": 20, "provider_search": False}
    type(version).objects.filter(pk=version.pk).update(document=version.document)  # as stored before versions
    cache.clear()
    url = "/api/v1/tools/search"
    # fuzzy-1's score of an exact name is over 14; bm25f-2's is the exact bonus plus BM25F.
    answer = agent.post(url, {"query": "git_status"}, content_type="application/json").json()
    legacy = answer["results"]
    assert answer["ranking"] == "fuzzy-1" and legacy[0]["name"] == "git_status" and legacy[0]["score"] > 14
    assert {hit["name"] for hit in legacy} >= {"git_status", "git_diff"}


def test_refresh_active_covers_projects_with_recent_sessions_only(project, other_project):
    record(project, "Show what changed", ("git_diff", {}))
    assert search_history_refresh_active() == 1
    assert SearchHistory.objects.filter(project=project).exists()
    assert not SearchHistory.objects.filter(project=other_project).exists()


def test_each_project_learns_only_from_its_own_sessions(project, other_project, refresh):
    record(project, "Show what changed", ("git_diff", {}))
    record(other_project, "Secret plans of another tenant", ("git_diff", {}))
    assert refresh(project).tools == {"git_diff": ["Show what changed"]}
