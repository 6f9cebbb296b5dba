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
@pytest.mark.parametrize("output_format", ["openai", "anthropic", "openai_responses", "plain"])
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


# --- Limits: rules match in linear time, inputs are bounded ---------------------------------------

# Each takes Python's backtracking `re` longer than any test run on a long message without "!",
# "=" or "b" (O(n^6)): a regression to `re` on the server hangs these tests instead of passing.
CATASTROPHIC = [r"\w*\w*\w*\w*\w*!", r".*.*.*.*=", r"a*a*a*a*a*b"]


def _backdate_regex(version, regex: str) -> None:
    """Put a rule with `regex` into a published version's stored document, as a version published
    before publishing refused such patterns still carries it (publishing now refuses it)."""
    document = version.document
    document["selection"]["context_rules"].append({"name": "legacy", "keywords": [], "regex": regex,
                                                   "groups": ["testing"]})
    type(version).objects.filter(pk=version.pk).update(document=document)


def test_the_server_matches_rule_regexes_with_re2():
    from toolscope_agent.engine import selection

    assert selection.REGEX_ENGINE == "re2"
    assert type(selection.rule_regex(r"\w*\w*!")).__module__.startswith("re2")


@pytest.mark.django_db
@pytest.mark.parametrize("regex", CATASTROPHIC)
@pytest.mark.parametrize("length", [400, 100_000])
def test_a_catastrophic_regex_of_an_old_version_answers_a_long_message(reader, published, regex, length):
    _backdate_regex(published, regex)
    response = reader.post("/api/v1/policy/resolve", {"message": "a" * length}, format="json")
    assert response.status_code == 200
    assert "run_tests" not in response.json()["reasons"]


@pytest.mark.django_db
def test_a_rule_regex_sees_the_end_of_a_message_at_the_length_limit(reader, published):
    _backdate_regex(published, r"a*a*a*a*a*b")
    response = reader.post("/api/v1/policy/resolve", {"message": "a" * 99_999 + "b"}, format="json")
    assert response.status_code == 200
    assert response.json()["reasons"]["run_tests"] == "rule:legacy"


@pytest.mark.django_db
def test_a_message_over_the_limit_is_a_json_400_naming_the_field(reader, published):
    response = reader.post("/api/v1/policy/resolve", {"message": "a" * 100_001}, format="json")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["field"] == "message"
    assert body["errors"] == {"message": "Ensure this field has no more than 100000 characters."}


@pytest.mark.django_db
def test_a_search_query_over_the_limit_is_a_json_400_naming_the_field(reader, published):
    response = reader.post("/api/v1/tools/search", {"query": "git " * 1001}, format="json")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["field"] == "query"


@pytest.mark.django_db
def test_a_label_over_64_characters_is_a_json_400_naming_the_field(reader, published):
    response = reader.post("/api/v1/policy/resolve", {"message": "hi", "label": "x" * 65}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "label"


@pytest.mark.django_db
def test_the_openapi_schema_documents_the_length_limits(client):
    schema = client.get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    properties = {name: schema["components"]["schemas"][name]["properties"] for name in ("ResolveInput", "SearchInput")}
    assert properties["ResolveInput"]["message"]["maxLength"] == 100_000
    assert properties["ResolveInput"]["label"]["maxLength"] == 64
    assert properties["SearchInput"]["query"]["maxLength"] == 4000


# Found by the API fuzzer (tests/e2e/test_fuzz_api.py): DRF's CharField and IntegerField took
# 0 for a string and "8" for an integer, against the OpenAPI description.
@pytest.mark.django_db
@pytest.mark.parametrize(("url", "body", "field"), [
    ("/api/v1/policy/resolve", {"message": 0}, "message"),
    ("/api/v1/policy/resolve", {"message": "hi", "label": 7}, "label"),
    ("/api/v1/tools/search", {"query": 0}, "query"),
    ("/api/v1/tools/search", {"query": "git", "top_k": "8"}, "top_k"),
    ("/api/v1/tools/search", {"query": "git", "top_k": True}, "top_k"),
])
def test_a_value_of_another_json_type_is_a_400_naming_the_field(reader, published, url, body, field):
    response = reader.post(url, body, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["field"] == field


@pytest.mark.django_db
def test_a_message_is_measured_as_sent_not_trimmed(reader, published):
    # The description's maxLength counts every character; CharField stripped white space first.
    response = reader.post("/api/v1/policy/resolve", {"message": "a" + " " * 100_000}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "message"


@pytest.mark.django_db
@pytest.mark.parametrize(("top_k", "same_as"), [(1.0, 1), (25899107514527162368, 20)])
def test_top_k_is_any_json_integer_and_clamped(reader, published, top_k, same_as):
    # 1.0 is the integer 1 in JSON Schema; past 2**64 the JSON parser reads a float (was a 400).
    def search(k):
        return reader.post("/api/v1/tools/search", {"query": "git", "top_k": k}, format="json")

    response = search(top_k)
    assert response.status_code == 200, response.json()
    assert response.json() == search(same_as).json()


@pytest.mark.django_db
def test_an_advertised_tool_is_described_as_it_is_validated(reader, published, client):
    # Found by the API fuzzer: a blank name or schema_hash was refused, and the description allowed it.
    schema = client.get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    tool = schema["components"]["schemas"]["AdvertisedToolInput"]["properties"]
    assert (tool["name"]["minLength"], tool["schema_hash"]["minLength"]) == (1, 1)
    response = reader.post("/api/v1/policy/resolve", {"tools": [{"name": " "}]}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "tools[0].name"
