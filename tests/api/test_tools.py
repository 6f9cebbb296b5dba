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


# Found by the API fuzzer (tests/e2e/test_fuzz_api.py): values of the wrong JSON type were
# accepted (0 as a name) or silently dropped (a list as the schema, an object as the description),
# against the OpenAPI description.
@pytest.mark.django_db
@pytest.mark.parametrize(("tool", "field"), [
    ({"name": 0}, "tools[0].name"),
    ({"name": "read_file", "description": {}}, "tools[0].description"),
    ({"name": "read_file", "description": {"text": "Read"}}, "tools[0].description"),
    ({"name": "read_file", "input_schema": [None, None]}, "tools[0].input_schema"),
    ({"name": "read_file", "source": {}}, "tools[0].source"),
    ({"type": "function", "function": {"name": "read_file", "parameters": "{}"}}, "tools[0].function.parameters"),
])
def test_a_field_of_another_json_type_is_400_naming_it(client, tool, field):
    response = put(client, [tool])
    assert response.status_code == 400, response.json()
    assert response.json()["field"] == field
    assert not Tool.objects.exists()


@pytest.mark.django_db
def test_null_is_the_same_as_absent_as_in_events(client):
    response = put(client, [{"name": "read_file", "description": None, "input_schema": None, "source": None}])
    assert response.status_code == 200, response.json()
    assert (Tool.objects.get().description, Tool.objects.get().input_schema) == ("", {})


@pytest.mark.django_db
def test_nul_in_a_description_is_replaced_as_in_catalog_events(client):
    response = put(client, [{**READ_FILE, "description": "Read\u0000 a file"}])
    assert response.status_code == 200, response.json()
    assert Tool.objects.get().description == "Read\ufffd a file"


@pytest.mark.django_db
def test_a_name_is_kept_as_sent_and_a_blank_one_is_400(client):
    assert put(client, [{"name": "   "}]).json()["field"] == "tools[0].name"
    assert put(client, [{**READ_FILE, "name": " read_file"}]).status_code == 200
    assert list(Tool.objects.values_list("name", flat=True)) == [" read_file"]


@pytest.mark.django_db
def test_the_description_states_the_list_limits(client):
    schema = client.get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    tools = schema["components"]["schemas"]["ToolsPut"]["properties"]["tools"]
    assert (tools["minItems"], tools["maxItems"]) == (1, 2000)
    assert put(client, []).json()["field"] == "tools"
