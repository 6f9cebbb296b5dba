"""PUT and GET /api/v1/tools: bulk upsert with schema history."""

from __future__ import annotations

import pytest

from tests.factories import make_key
from toolscope.policies.models import Tool, ToolVersion

URL = "/api/v1/tools"
READ_FILE = {"name": "read_file", "description": "Read a file",
             "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}


@pytest.fixture
def client(api_for, project):
    return api_for(make_key(project, scopes=["ingest", "policy:read"]).secret)


def put(client, tools):
    return client.put(URL, {"tools": tools}, format="json")


@pytest.mark.django_db
def test_new_tools_are_created_and_unchanged_ones_reported(client):
    first = put(client, [READ_FILE])
    assert first.status_code == 200
    assert first.json()["tools"][0]["status"] == "created"
    again = put(client, [READ_FILE])
    assert again.json()["tools"][0]["status"] == "unchanged"
    assert Tool.objects.count() == 1 and ToolVersion.objects.count() == 1


@pytest.mark.django_db
def test_a_changed_schema_gets_a_new_hash_and_history_is_kept(client):
    old_hash = put(client, [READ_FILE]).json()["tools"][0]["schema_hash"]
    changed = {**READ_FILE, "input_schema": {"type": "object", "properties": {"path": {"type": "string"},
                                                                             "offset": {"type": "integer"}}}}
    result = put(client, [changed]).json()["tools"][0]
    assert result["status"] == "updated" and result["schema_hash"] != old_hash
    tool = Tool.objects.get()
    assert tool.schema_hash == result["schema_hash"]
    assert set(tool.versions.values_list("schema_hash", flat=True)) == {old_hash, result["schema_hash"]}


@pytest.mark.django_db
def test_operator_settings_survive_an_upsert(client, project):
    put(client, [READ_FILE])
    Tool.objects.filter(name="read_file").update(requires_approval=True, redact=["path"])
    put(client, [{**READ_FILE, "description": "Read any file"}])
    tool = Tool.objects.get()
    assert tool.requires_approval and tool.redact == ["path"] and tool.description == "Read any file"


@pytest.mark.django_db
def test_provider_shaped_definitions_are_normalised(client):
    openai = {"type": "function", "function": {"name": "grep", "description": "Search",
                                               "parameters": {"type": "object"}}}
    mcp = {"name": "github_list_issues", "description": "List issues", "inputSchema": {"type": "object"}}
    response = client.put(URL, {"tools": [openai, mcp]}, format="json")
    assert response.status_code == 200, response.json()
    stored = {tool.name: tool.input_schema for tool in Tool.objects.all()}
    assert stored == {"grep": {"type": "object"}, "github_list_issues": {"type": "object"}}


@pytest.mark.django_db
def test_a_definition_without_a_name_is_400_naming_the_field(client):
    response = put(client, [READ_FILE, {"description": "anonymous"}])
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == "tools[1].name"
    assert body["detail"].startswith("tools[1].name: ")


@pytest.mark.django_db
def test_get_lists_the_catalog_with_settings(client):
    put(client, [READ_FILE])
    tools = client.get(URL).json()["tools"]
    assert tools[0]["name"] == "read_file"
    assert tools[0]["settings"]["scope"] == "read_only"
    assert len(tools[0]["schema_hash"]) == 64


@pytest.mark.django_db
def test_put_needs_the_ingest_scope(api_for, project):
    reader = api_for(make_key(project, scopes=["policy:read"]).secret)
    assert put(reader, [READ_FILE]).status_code == 403
    assert reader.get(URL).status_code == 200


@pytest.mark.django_db
def test_nul_in_a_schema_is_replaced_as_in_catalog_events(client):
    # PostgreSQL's jsonb refuses \u0000; this was a 500.
    schema = {"type": "object", "properties": {"p\u0000ath": {"type": "string", "description": "a\u0000b"}}}
    response = put(client, [{"name": "read_file", "input_schema": schema}])
    assert response.status_code == 200, response.json()
    stored = Tool.objects.get().input_schema["properties"]
    assert stored == {"p\ufffdath": {"type": "string", "description": "a\ufffdb"}}


@pytest.mark.django_db
def test_a_schema_nested_too_deep_is_400_naming_it(client):
    schema = {"type": "object"}
    for _ in range(70):
        schema = {"type": "object", "properties": {"x": schema}}
    response = put(client, [READ_FILE, {"name": "deep", "input_schema": schema}])
    assert response.status_code == 400
    assert response.json()["field"] == "tools[1].input_schema"
    assert "nested deeper" in response.json()["detail"]
    assert not Tool.objects.exists()


@pytest.mark.django_db
def test_nul_in_a_tool_name_is_400(client):
    response = put(client, [{"name": "read\u0000file"}])
    assert response.status_code == 400
    assert response.json()["field"] == "tools[0].name"
