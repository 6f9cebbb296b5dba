"""Catalog identity (docs/policy.md): a tool is its (source, name). Two sources' tools of one name
coexist, a changed schema is a new version of its own source's tool, and resolve renders the
definition the asking agent advertises."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.api.conftest import KeyClient
from tests.factories import make_key
from toolscope.policies.models import Policy, Tool, ToolGroup, ToolVersion
from toolscope.policies.services.catalog import catalog_upsert, tool_settings_share
from toolscope.policies.services.documents import policy_document_build
from toolscope.telemetry.demo.catalog import TOOLS_BY_NAME

DEMO_BASH = TOOLS_BY_NAME["bash"]
DEMO = {"name": "bash", "description": DEMO_BASH.description, "input_schema": DEMO_BASH.input_schema,
        "source": DEMO_BASH.source}
# What the new user registered from a test agent: a 3-line bash.
TEST_AGENT = {"name": "bash", "description": "Run it.", "source": "test-agent",
              "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}}}


def _bash(source: str, description: str = "Run a command.") -> dict:
    return {"name": "bash", "description": description, "source": source,
            "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}


@pytest.fixture
def ingest(project) -> KeyClient:
    return KeyClient(make_key(project, scopes=["ingest", "policy:read"], name="registrar").secret)


def _rows(project) -> dict[str, Tool]:
    return {tool.source: tool for tool in Tool.objects.filter(project=project, name="bash")}


@pytest.mark.django_db
def test_a_test_agents_bash_leaves_the_demos_bash_intact_and_both_are_listed(project, ingest):
    assert ingest.put("/api/v1/tools", {"tools": [DEMO]}, format="json").status_code == 200
    demo_hash = _rows(project)["local"].schema_hash

    response = ingest.put("/api/v1/tools", {"tools": [TEST_AGENT]}, format="json")

    assert response.json()["tools"] == [
        {"name": "bash", "source": "test-agent", "schema_hash": _rows(project)["test-agent"].schema_hash,
         "status": "created"}]
    demo = _rows(project)["local"]
    assert (demo.schema_hash, demo.description) == (demo_hash, DEMO_BASH.description)
    assert list(demo.versions.values_list("schema_hash", flat=True)) == [demo_hash]
    listed = ingest.get("/api/v1/tools").json()["tools"]
    assert [(tool["name"], tool["source"], tool["description"]) for tool in listed] == [
        ("bash", "local", DEMO_BASH.description), ("bash", "test-agent", "Run it.")]


@pytest.mark.django_db
def test_a_changed_schema_is_a_new_version_of_that_sources_tool_only(project):
    catalog_upsert(project=project, definitions=[_bash("mcp:shell"), _bash("agent-b")])
    other_before = _rows(project)["agent-b"].schema_hash

    results = catalog_upsert(project=project, definitions=[_bash("mcp:shell", "Run a command, v2.")])

    assert [(r["source"], r["status"]) for r in results] == [("mcp:shell", "updated")]
    rows = _rows(project)
    assert rows["mcp:shell"].description == "Run a command, v2."
    assert rows["mcp:shell"].versions.count() == 2
    assert (rows["agent-b"].schema_hash, rows["agent-b"].versions.count()) == (other_before, 1)


@pytest.mark.django_db
def test_without_a_source_a_known_schema_is_that_tool_and_a_new_one_is_source_empty(project):
    catalog_upsert(project=project, definitions=[_bash("local")])

    same = catalog_upsert(project=project, definitions=[{**_bash(""), "source": ""}])
    assert [(r["source"], r["status"]) for r in same] == [("local", "unchanged")]
    other = catalog_upsert(project=project, definitions=[{**_bash("", "A sourceless bash."), "source": ""}])
    assert [(r["source"], r["status"]) for r in other] == [("", "created")]
    again = catalog_upsert(project=project, definitions=[{**_bash("", "A sourceless bash, v2."), "source": ""}])

    assert [(r["source"], r["status"]) for r in again] == [("", "updated")]
    assert sorted(_rows(project)) == ["", "local"]
    assert _rows(project)["local"].description == "Run a command."


@pytest.mark.django_db
def test_a_new_source_of_a_known_name_joins_its_policy_sets_and_settings(project):
    catalog_upsert(project=project, definitions=[DEMO])
    demo = _rows(project)["local"]
    Tool.objects.filter(pk=demo.pk).update(requires_approval=True, scope="write", redact=["env"])
    policy = Policy.objects.create(project=project, mode="context_rules")
    policy.always_on.set([demo])
    policy.allowed.set([demo])
    ToolGroup.objects.create(policy=policy, name="shell").tools.set([demo])

    catalog_upsert(project=project, definitions=[TEST_AGENT])

    newcomer = _rows(project)["test-agent"]
    assert (newcomer.requires_approval, newcomer.scope, newcomer.redact) == (True, "write", ["env"])
    assert set(policy.always_on.all()) == set(policy.allowed.all()) == {demo, newcomer}
    assert set(policy.groups.get().tools.all()) == {demo, newcomer}
    document = policy_document_build(policy=policy)
    assert document["selection"]["always_on"] == document["selection"]["allowed"] == ["bash"]
    assert document["selection"]["groups"] == {"shell": ["bash"]}
    assert document["tools"]["bash"]["requires_approval"] is True


@pytest.mark.django_db
def test_settings_saved_on_one_source_are_shared_by_every_source_of_the_name(project):
    catalog_upsert(project=project, definitions=[_bash("a"), _bash("b"), {**_bash("a"), "name": "grep"}])
    tool = _rows(project)["a"]
    tool.requires_approval, tool.max_result_tokens = True, 500

    assert tool_settings_share(tool=tool) == 1

    assert _rows(project)["b"].requires_approval is True
    assert _rows(project)["b"].max_result_tokens == 500
    assert Tool.objects.get(project=project, name="grep").requires_approval is False


@pytest.mark.django_db
def test_registering_costs_the_same_queries_for_three_tools_as_for_thirty(project):
    def definitions(count: int, source: str) -> list[dict]:
        return [{**_bash(source), "name": f"tool_{i}"} for i in range(count)]

    catalog_upsert(project=project, definitions=definitions(30, "a"))  # warm the token cache
    counts = []
    for count in (3, 30):
        with CaptureQueriesContext(connection) as queries:
            catalog_upsert(project=project, definitions=definitions(count, "b") + definitions(count, "a"))
        counts.append(len(queries))
    assert counts[0] == counts[1]
    assert ToolVersion.objects.filter(tool__project=project).count() == 60


READ_FILE = {"name": "read_file", "description": "Read a file.", "source": "local",
             "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}


@pytest.fixture
def two_bashes(project, publish):
    """The demo's bash (local), then a test agent's (most recently seen), under a published
    policy that sends every tool."""
    catalog_upsert(project=project, definitions=[DEMO, READ_FILE])
    catalog_upsert(project=project, definitions=[TEST_AGENT])
    publish(Policy.objects.create(project=project, mode="all"))
    return _rows(project)


def _resolved_bash(agent: KeyClient, **body) -> dict:
    response = agent.post("/api/v1/policy/resolve", {"format": "plain", **body}, format="json")
    assert response.status_code == 200, response.content
    tools = response.json()["tools"]
    assert [tool["name"] for tool in tools].count("bash") == 1
    return next(tool for tool in tools if tool["name"] == "bash")


@pytest.mark.django_db
def test_resolve_serves_the_definition_the_agent_advertises(agent, two_bashes):
    advertised = [{"name": "bash", "schema_hash": two_bashes["local"].schema_hash},
                  {"name": "read_file", "schema_hash": "0" * 64}]
    response = agent.post("/api/v1/policy/resolve", {"format": "plain", "tools": advertised}, format="json")

    tools = response.json()["tools"]
    assert [tool["name"] for tool in tools] == ["bash", "read_file"]
    assert tools[0]["description"] == DEMO_BASH.description
    assert tools[0]["input_schema"] == DEMO_BASH.input_schema


@pytest.mark.django_db
def test_resolve_serves_the_named_sources_definition(agent, two_bashes):
    assert _resolved_bash(agent, source="local")["description"] == DEMO_BASH.description
    assert _resolved_bash(agent, source="test-agent")["description"] == "Run it."
    assert _resolved_bash(agent, tools=[{"name": "bash", "source": "local"}])["description"] == DEMO_BASH.description


@pytest.mark.django_db
def test_resolve_without_a_hint_serves_the_most_recently_seen_definition(agent, two_bashes):
    assert _resolved_bash(agent)["description"] == "Run it."
    catalog_upsert(project=two_bashes["local"].project, definitions=[DEMO])  # the demo advertises again
    assert _resolved_bash(agent)["description"] == DEMO_BASH.description


@pytest.mark.django_db
def test_resolve_renders_a_full_advertised_definition_as_sent(agent, two_bashes):
    mine = {"name": "bash", "description": "My own bash.", "input_schema": {"type": "object"}}
    assert _resolved_bash(agent, tools=[mine])["description"] == "My own bash."
