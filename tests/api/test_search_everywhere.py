"""One search, one answer, everywhere (issue 25, item 4): for the same catalog and policy, the
SDK's `ToolSelector.search`, `POST /api/v1/tools/search` (which answers the `tool_search` tool
that `/policy/resolve` sends a non-Python agent) and the simulator rank the same top 8, over the
catalog without the search tool itself; and `/policy/resolve` in `tool_search` mode sends a
search tool when the catalog has none, as the SDK does."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from toolscope_agent import ToolSelector
from toolscope_agent.engine.render import SEARCH_TOOL, SEARCH_TOOL_NAME
from toolscope_agent.engine.search import search_tools
from toolscope_agent.engine.simulation import _Replay

from tests.factories import make_key, make_user
from toolscope.policies.models import Policy, Tool
from toolscope.policies.services.catalog import catalog_upsert
from toolscope.policies.services.publish import policy_publish
from toolscope.policies.services.simulation import catalog_costs

CATALOGS = Path(__file__).resolve().parents[2] / "bench" / "mcp_catalogs"
# The seven captured MCP servers' 77 tools (names are distinct across them), none named tool_search.
CATALOG = [{"name": tool["name"], "description": tool.get("description", ""), "input_schema": tool["inputSchema"]}
           for path in sorted(CATALOGS.glob("*.json")) if not path.name.startswith("queries")
           for tool in json.loads(path.read_text())["tools"]]
# 50 of the benchmark's queries, and a few that share words with the search tool's description.
QUERIES = [entry["query"] for entry in json.loads((CATALOGS / "queries.json").read_text())[:50]] + [
    "find a tool to list the files I need", "search for the best tools for this task",
    "what can I call next", "say what you need in a few words"]


@pytest.fixture
def reader(api_for, project):
    return api_for(make_key(project, scopes=["policy:read"]).secret)


def _published(project, *, always_on=("read_file",), **fields):
    catalog_upsert(project=project, definitions=CATALOG)
    policy = Policy.objects.create(project=project, mode="tool_search", **fields)
    policy.always_on.set(Tool.objects.filter(project=project, name__in=always_on))
    return policy_publish(policy=policy, user=make_user("publisher"), comment="search")


@pytest.mark.django_db
def test_every_search_answers_the_same_top_8(reader, project):
    assert not any(tool["name"] == SEARCH_TOOL_NAME for tool in CATALOG)
    _published(project)
    document = reader.get("/api/v1/policy?label=production").json()
    catalog = reader.get("/api/v1/tools").json()["tools"]
    sdk = ToolSelector(catalog, document)
    # An agent whose catalog has a tool_search of its own searches the same index.
    own = ToolSelector([*catalog, SEARCH_TOOL], document)
    simulated_catalog, costs = catalog_costs(project=project, search_tool=True)
    assert SEARCH_TOOL_NAME in {tool["name"] for tool in simulated_catalog}  # the simulator sends it
    simulator = _Replay(simulated_catalog, document, costs, None, None)
    differing, answered = [], 0
    for query in QUERIES:
        served = [hit["name"] for hit in reader.post(
            "/api/v1/tools/search", {"query": query, "top_k": 8}, format="json").json()["results"]]
        answers = {
            "sdk": [hit.name for hit in sdk.search(query, 8)],
            "sdk with its own tool_search": [hit.name for hit in own.search(query, 8)],
            "engine over a catalog with tool_search": [
                hit.name for hit in search_tools([*catalog, SEARCH_TOOL], query, 8)],
            "simulator": simulator._search(query),
        }
        answered += bool(served)
        assert SEARCH_TOOL_NAME not in served
        differing += [(query, where, answer, served) for where, answer in answers.items() if answer != served]
    assert not differing, (Counter(where for _, where, _, _ in differing), differing[:3])
    assert answered >= 45


@pytest.mark.django_db
@pytest.mark.parametrize(("provider_search", "defer_loading"), [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("output_format", ["openai", "anthropic", "plain"])
def test_resolve_sends_toolscopes_search_tool_when_the_catalog_has_none(reader, project, output_format,
                                                                         provider_search, defer_loading):
    _published(project, provider_search=provider_search, search_defer_loading=defer_loading)
    document = reader.get("/api/v1/policy?label=production").json()
    catalog = reader.get("/api/v1/tools").json()["tools"]
    names = ["read_file", "git_status", "git_diff_unstaged", "fetch", "get_current_time"]
    for advertised in (None, [{"name": name} for name in names]):
        body = reader.post("/api/v1/policy/resolve", {"message": "", "format": output_format, "tools": advertised},
                           format="json").json()
        assert body["mode"] == "tool_search"
        assert body["reasons"] == {"tool_search": "search_tool", "read_file": "always_on"}
        # Exactly what the SDK's selector sends for the same catalog.
        own = catalog if advertised is None else [tool for tool in catalog if tool["name"] in names]
        assert body["tools"] == ToolSelector(own, document).tools("", format=output_format)
        if output_format == "openai":
            search = next(tool["function"] for tool in body["tools"] if tool["function"]["name"] == SEARCH_TOOL_NAME)
            assert search["parameters"] == SEARCH_TOOL["input_schema"]
        elif output_format == "anthropic" and provider_search:
            assert SEARCH_TOOL_NAME not in {tool["name"] for tool in body["tools"]}  # the provider's instead
        else:
            search = next(tool for tool in body["tools"] if tool["name"] == SEARCH_TOOL_NAME)
            assert search["description"] == SEARCH_TOOL["description"]
        if output_format == "anthropic" and defer_loading:  # toolscope's search, every other tool deferred
            assert [tool["name"] for tool in body["tools"] if not tool.get("defer_loading")] == [
                "read_file", SEARCH_TOOL_NAME]
            assert len(body["tools"]) == len(own) + 1
        # The search tool is counted in what is sent, not in what sending everything would cost.
        assert 0 < body["tokens"]["selected"] < body["tokens"]["all"]


@pytest.mark.django_db
def test_rules_with_a_search_always_on_resolve_as_the_recommendation_scored_them(reader, project):
    """A recommended "request rules + tool_search" candidate, applied and published: /policy/resolve
    sends toolscope's search tool (the catalog has none) beside the rules' tools, reads the
    instruction before a follow-up (rule_window 2, through the state it hands back), and searches
    as many as the candidate was scored with."""
    from toolscope.policies.services.recommendations import policy_draft_apply

    catalog_upsert(project=project, definitions=CATALOG)
    policy = Policy.objects.create(project=project, search_learned=True, search_ranker="fuzzy-1")
    selection = {"mode": "context_rules", "always_on": [SEARCH_TOOL_NAME], "sticky_discovered": True,
                 "groups": {"tool-get_current_time": ["get_current_time"]}, "rule_window": 2,
                 "context_rules": [{"name": "learnt: get_current_time", "keywords": ["time"], "regex": None,
                                    "groups": ["tool-get_current_time"]}],
                 "tool_search": {"top_k": 20, "max_top_k": 20, "ranker": "bm25f-2"}}
    policy_draft_apply(policy=policy, selection=selection, outputs={}, user=None)
    policy.refresh_from_db()
    assert (policy.search_always_on, policy.rule_window, policy.search_top_k) == (True, 2, 20)
    # It searches as it was scored: its ranker, no learned history.
    assert (policy.search_ranker, policy.search_learned, policy.search_semantic) == ("bm25f-2", False, False)
    policy_publish(policy=policy, user=make_user("publisher"), comment="recommended")
    document = reader.get("/api/v1/policy?label=production").json()
    assert document["selection"]["always_on"] == [SEARCH_TOOL_NAME] and document["selection"]["rule_window"] == 2

    def resolve(message, state):
        body = reader.post("/api/v1/policy/resolve", {"message": message, "state": state}, format="json").json()
        return sorted(body["reasons"].items()), body["state"]

    reasons, state = resolve("What time is it in Tokyo?", None)
    assert reasons == [("get_current_time", "rule:learnt: get_current_time"), (SEARCH_TOOL_NAME, "always_on")]
    assert state["tasks"] == ["What time is it in Tokyo?"]
    reasons, state = resolve("I mean Osaka.", state)  # a follow-up: the instruction before it still counts
    assert reasons == [("get_current_time", "rule:learnt: get_current_time"), (SEARCH_TOOL_NAME, "always_on")]
    reasons, state = resolve("Now list the files.", state)
    assert reasons == [(SEARCH_TOOL_NAME, "always_on")]
    # The SDK's selector answers the same from the same document and catalog.
    catalog = reader.get("/api/v1/tools").json()["tools"]
    selector = ToolSelector(catalog, document)
    assert [sorted(selector.select(text).reasons) for text in ("What time is it in Tokyo?", "I mean Osaka.",
                                                                "Now list the files.")] == [
        ["get_current_time", SEARCH_TOOL_NAME], ["get_current_time", SEARCH_TOOL_NAME], [SEARCH_TOOL_NAME]]
    hits = reader.post("/api/v1/tools/search", {"query": "current time", "top_k": 20}, format="json").json()
    assert hits["results"][0]["name"] == "get_current_time"


@pytest.mark.django_db
def test_an_append_only_list_is_kept_through_resolve_and_the_sdk(reader, project):
    """Issue 26, item 5: a candidate that keeps its list for the session (`tool_list`), applied and
    published, resolves with the tools sent before kept ("kept"), carried in the state the agent
    hands back, as the SDK's selector keeps them from the same document."""
    from toolscope.policies.services.recommendations import policy_draft_apply

    catalog_upsert(project=project, definitions=CATALOG)
    policy = Policy.objects.create(project=project)
    selection = {"mode": "context_rules", "always_on": [], "sticky_discovered": True, "tool_list": "append_only",
                 "groups": {"time": ["get_current_time"], "files": ["list_directory"]},
                 "context_rules": [{"name": "time", "keywords": ["time"], "regex": None, "groups": ["time"]},
                                   {"name": "files", "keywords": ["files"], "regex": None, "groups": ["files"]}]}
    policy_draft_apply(policy=policy, selection=selection, outputs={}, user=None)
    policy.refresh_from_db()
    assert policy.tool_list == "append_only"
    policy_publish(policy=policy, user=make_user("publisher"))
    document = reader.get("/api/v1/policy?label=production").json()
    assert document["selection"]["tool_list"] == "append_only"
    first = reader.post("/api/v1/policy/resolve", {"message": "What time is it?"}, format="json").json()
    second = reader.post("/api/v1/policy/resolve", {"message": "Now list the files.", "state": first["state"]},
                         format="json").json()
    assert first["reasons"] == {"get_current_time": "rule:time"} and first["state"]["sent"] == ["get_current_time"]
    assert sorted(second["reasons"].items()) == [("get_current_time", "kept"), ("list_directory", "rule:files")]
    selector = ToolSelector(reader.get("/api/v1/tools").json()["tools"], document)
    selector.select("What time is it?")
    assert selector.select("Now list the files.").reasons == second["reasons"]
