"""POST /api/v1/policy/resolve and /api/v1/tools/search, and the promise behind them: the server
and the SDK's ToolSelector give identical selections for the same inputs (one engine)."""

from __future__ import annotations

import pytest
from toolscope_agent import ToolSelector
from toolscope_agent.engine.selection import SessionState

from tests.factories import make_key, make_user
from toolscope.policies.models import ContextRule, Policy, Tool, ToolGroup
from toolscope.policies.services.catalog import catalog_upsert
from toolscope.policies.services.publish import policy_publish

CATALOG = [
    {"name": name, "description": description, "input_schema": {"type": "object", "properties": {
        "path": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["path"]}}
    for name, description in [
        ("read_file", "Read a file from the workspace."), ("edit_file", "Replace text in a file."),
        ("bash", "Run a shell command."), ("git_status", "Show the working tree status."),
        ("git_diff", "Show changes between commits."), ("git_commit", "Record changes to the repository."),
        ("run_tests", "Run the project's test suite."), ("web_search", "Search the web."),
        ("web_fetch", "Fetch a URL."), ("tool_search", "Find tools by what they do."),
    ]
]
MESSAGES = ["fix the failing test in tests/test_api.py", "commit the change with git", "look up the docs",
            "latest release notes", ""]
STATES = [None, {"discovered": ["web_fetch"], "activated": ["web_fetch"], "loaded": ["git_diff"], "turns": 2}]


@pytest.fixture
def published(project):
    catalog_upsert(project=project, definitions=CATALOG)
    tools = {tool.name: tool for tool in Tool.objects.filter(project=project)}
    policy = Policy.objects.create(project=project, mode="context_rules")
    policy.always_on.set([tools[name] for name in ("read_file", "edit_file", "bash", "tool_search")])
    git = ToolGroup.objects.create(policy=policy, name="git")
    git.tools.set([tools[name] for name in ("git_status", "git_diff", "git_commit")])
    testing = ToolGroup.objects.create(policy=policy, name="testing")
    testing.tools.set([tools["run_tests"]])
    ContextRule.objects.create(policy=policy, position=0, name="tests", keywords=["test"]).groups.set([testing])
    ContextRule.objects.create(policy=policy, position=1, name="git", regex=r"\bgit\b|commit").groups.set([git])
    return policy_publish(policy=policy, user=make_user("publisher"), comment="first")


@pytest.fixture
def reader(api_for, project):
    return api_for(make_key(project, scopes=["policy:read"]).secret)


@pytest.mark.django_db
@pytest.mark.parametrize("output_format", ["openai", "anthropic", "plain"])
def test_the_server_and_the_sdk_select_the_same_tools(reader, published, output_format):
    document = reader.get("/api/v1/policy?label=production").json()
    catalog = reader.get("/api/v1/tools").json()["tools"]
    for message in MESSAGES:
        for state in STATES:
            server = reader.post("/api/v1/policy/resolve",
                                 {"message": message, "state": state, "format": output_format}, format="json").json()
            selector = ToolSelector(catalog, document, state=SessionState.from_dict(state))
            assert server["tools"] == selector.tools(message, format=output_format), (message, state)
            assert server["reasons"] == selector.select(message).reasons


@pytest.mark.django_db
def test_resolve_reports_the_tokens_saved_against_sending_everything(reader, published):
    body = reader.post("/api/v1/policy/resolve", {"message": "fix the failing test"}, format="json").json()
    assert [tool["function"]["name"] for tool in body["tools"]] == [
        "bash", "edit_file", "read_file", "run_tests", "tool_search"]
    assert body["version"] == published.number and body["mode"] == "context_rules"
    tokens = body["tokens"]
    assert 0 < tokens["selected"] < tokens["all"]
    assert tokens["saved"] == tokens["all"] - tokens["selected"]


@pytest.mark.django_db
def test_resolve_without_a_published_version_is_404(reader, project):
    response = reader.post("/api/v1/policy/resolve", {"message": "hi"}, format="json")
    assert response.status_code == 404
    assert "label" in response.json()["detail"]


@pytest.mark.django_db
def test_search_ranks_tools_and_summarises_parameters(reader, published):
    results = reader.post("/api/v1/tools/search", {"query": "git diff", "top_k": 3}, format="json").json()["results"]
    assert results[0]["name"] == "git_diff"
    assert len(results) <= 3
    assert results[0]["parameters"] == "{path: string, limit?: integer}"


@pytest.mark.django_db
def test_another_projects_key_resolves_its_own_catalog_only(api_for, other_project, published):
    outsider = api_for(make_key(other_project, scopes=["policy:read"]).secret)
    assert outsider.post("/api/v1/policy/resolve", {"message": "x"}, format="json").status_code == 404
    assert outsider.post("/api/v1/tools/search", {"query": "git"}, format="json").json()["results"] == []
