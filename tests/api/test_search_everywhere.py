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
           for path in sorted(CATALOGS.glob("*.json")) if path.name != "queries.json"
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
@pytest.mark.parametrize("provider_search", [False, True])
@pytest.mark.parametrize("output_format", ["openai", "anthropic", "plain"])
def test_resolve_sends_toolscopes_search_tool_when_the_catalog_has_none(reader, project, output_format,
                                                                         provider_search):
    _published(project, provider_search=provider_search)
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
        # The search tool is counted in what is sent, not in what sending everything would cost.
        assert 0 < body["tokens"]["selected"] < body["tokens"]["all"]
