"""The OpenAPI 3 description covers the API, and its UIs load from our own static files."""

from __future__ import annotations

import re

import pytest

from tests.api.conftest import KeyClient


@pytest.fixture
def schema(client, db):
    response = client.get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def test_schema_is_openapi_3_and_describes_every_endpoint(schema):
    assert schema["openapi"].startswith("3.")
    for path, method in [("/api/v1/ingest", "post"), ("/api/v1/transcripts", "post"),
                         ("/api/v1/tools", "get"), ("/api/v1/tools", "put")]:
        operation = schema["paths"][path][method]
        assert operation["summary"]
        assert operation["security"] == [{"ApiKey": []}]
    assert schema["components"]["securitySchemes"]["ApiKey"]["scheme"] == "bearer"


def test_ingest_is_documented_with_its_event_types_and_an_example(schema):
    body = schema["paths"]["/api/v1/ingest"]["post"]["requestBody"]["content"]["application/json"]
    kinds = [variant["properties"]["type"]["enum"][0]
             for variant in body["schema"]["properties"]["events"]["items"]["oneOf"]]
    assert kinds == ["session", "turn", "tool_call", "catalog"]
    assert body["examples"]
    responses = schema["paths"]["/api/v1/ingest"]["post"]["responses"]
    assert {"202", "400", "401", "403", "413", "415", "429"} <= set(responses)


@pytest.mark.parametrize("page", ["/api/v1/docs", "/api/v1/redoc"])
def test_docs_pages_load_scripts_from_local_static_files_only(client, db, page):
    html = client.get(page).content.decode()
    scripts = re.findall(r'<script[^>]+src="([^"]+)"', html)
    assert scripts
    assert all(src.startswith("/static/") for src in scripts), scripts
    for src in scripts:
        assert client.get(src).status_code == 200, src


# --- what the description says matches what the endpoints answer ---------------------------

def _json_schema(node):
    """An OpenAPI 3.0 schema as JSON Schema: `nullable` becomes a null alternative."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: _json_schema(value) for key, value in node.items() if key != "nullable"}
    if node.get("nullable"):
        return {"anyOf": [converted, {"type": "null"}]}
    return converted


def assert_documented(schema: dict, path: str, method: str, response) -> None:
    import jsonschema

    responses = schema["paths"][path][method]["responses"]
    status = str(response.status_code)
    assert status in responses, f"{method.upper()} {path} answered {status}, documented: {sorted(responses)}"
    documented = responses[status].get("content", {}).get("application/json", {}).get("schema")
    if documented is None:
        assert not response.content
        return
    root = {**_json_schema(documented), "components": _json_schema(schema["components"])}
    jsonschema.validate(response.json(), root)


@pytest.fixture
def keys(project):
    from tests.factories import make_key

    return {scope: KeyClient(make_key(project, scopes=[scope]).secret) for scope in ("ingest", "policy:read")}


def test_every_operation_documents_its_error_answers_as_error(schema):
    error = {"$ref": "#/components/schemas/Error"}
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if not operation.get("security"):
                continue
            expected = {"401", "403", "429", "500", "503"}
            if "requestBody" in operation:
                expected |= {"400", "413", "415"}
            assert expected <= set(operation["responses"]), (path, method)
            for status in expected - {"400"}:
                assert operation["responses"][status]["content"]["application/json"]["schema"] == error
            for status in ("429", "503"):
                assert "Retry-After" in operation["responses"][status]["headers"]


def test_the_catalog_endpoints_are_documented_as_the_objects_they_answer(schema):
    components = schema["components"]["schemas"]
    listed = schema["paths"]["/api/v1/tools"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert components[listed["$ref"].rsplit("/", 1)[1]]["properties"]["tools"]["type"] == "array"
    found = schema["paths"]["/api/v1/tools/search"]["post"]["responses"]["200"]["content"]["application/json"]
    search = components[found["schema"]["$ref"].rsplit("/", 1)[1]]
    assert search["properties"]["results"]["type"] == "array"
    assert set(search["required"]) == {"ranking", "confident", "results"}


def test_the_answers_match_the_description(schema, keys, project, settings):
    ingest, reader = keys["ingest"], keys["policy:read"]
    tool = {"name": "read_file", "description": "Read a file", "input_schema": {"type": "object"}}
    cases = [
        ("/api/v1/tools", "put", ingest.put("/api/v1/tools", {"tools": [tool]}, format="json")),
        ("/api/v1/tools", "put", ingest.put("/api/v1/tools", {"tools": [{"name": ""}]}, format="json")),
        ("/api/v1/tools", "get", reader.get("/api/v1/tools")),
        ("/api/v1/tools", "get", ingest.get("/api/v1/tools")),  # 403
        ("/api/v1/tools", "get", KeyClient(None).get("/api/v1/tools")),  # 401
        ("/api/v1/tools/search", "post", reader.post_json("/api/v1/tools/search", {"query": "file"})),
        ("/api/v1/ingest", "post", ingest.post_json("/api/v1/ingest", {"events": [{"type": "session", "id": "s"}]})),
        ("/api/v1/ingest", "post", ingest.post_json("/api/v1/ingest", {"events": [{"type": "nope", "id": "s"}]})),
        ("/api/v1/ingest", "post", ingest.post_json("/api/v1/ingest", {"events": "x"})),
        ("/api/v1/ingest", "post", ingest.generic("POST", "/api/v1/ingest", b"x", content_type="text/plain")),
        ("/api/v1/transcripts", "post", ingest.post_json("/api/v1/transcripts", {"messages": [
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})),
        ("/api/v1/policy", "get", reader.get("/api/v1/policy")),  # nothing published: 404
        ("/api/v1/policy/resolve", "post", reader.post_json("/api/v1/policy/resolve", {"message": "x"})),
        ("/api/v1/artifacts/{artifact_id}", "get",
         reader.get("/api/v1/artifacts/00000000-0000-0000-0000-000000000000")),
    ]
    settings.INGEST_MAX_BODY_BYTES = 2048
    cases.append(("/api/v1/ingest", "post", ingest.post_json("/api/v1/ingest", {"events": [{"id": "x" * 4000}]})))
    settings.API_RATE_LIMIT_PER_MINUTE = 1
    cases += [("/api/v1/tools", "get", reader.get("/api/v1/tools")) for _ in range(2)]  # 200, then 429
    statuses = set()
    for path, method, response in cases:
        assert_documented(schema, path, method, response)
        statuses.add(response.status_code)
    assert {200, 202, 400, 401, 403, 404, 413, 415, 429} <= statuses


# --- the description agrees with the validation: found by the API fuzzer ---------------------

def _event_schema(schema, kind):
    items = schema["paths"]["/api/v1/ingest"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return next(variant for variant in items["properties"]["events"]["items"]["oneOf"]
                if variant["properties"]["type"]["enum"][0] == kind)


def test_a_catalog_event_is_described_as_it_is_validated(schema, keys):
    # It registers definitions: each needs its input_schema, and a schema_hash is never read.
    tool = _event_schema(schema, "catalog")["properties"]["tools"]["items"]
    assert tool["required"] == ["name", "input_schema"]
    assert "schema_hash" not in tool["properties"]
    event = {"type": "catalog", "id": "c", "tools": [{"name": "read_file"}]}
    result = keys["ingest"].post_json("/api/v1/ingest", {"events": [event]}).json()["results"][0]
    assert (result["status"], result["path"]) == ("rejected", "events[0].tools[0].input_schema")


def test_an_optional_event_field_may_be_null_as_validation_reads_null_as_absent(schema, keys):
    turn = _event_schema(schema, "turn")
    assert not {"id", "type", "session_id", "index"} & {name for name, value in turn["properties"].items()
                                                        if value.get("nullable")}
    assert turn["properties"]["model"]["nullable"] and turn["properties"]["usage"]["nullable"]
    assert turn["properties"]["usage"]["properties"]["input_tokens"]["nullable"]
    status = _event_schema(schema, "tool_call")["properties"]["status"]
    assert status["nullable"] and None in status["enum"]  # OpenAPI 3.0: an enum lists its null
    event = {"type": "tool_call", "id": "c", "session_id": "s", "turn_index": 0, "tool_name": "bash",
             "status": None, "timestamp": None, "usage": None}
    assert keys["ingest"].post_json("/api/v1/ingest", {"events": [event]}).status_code == 202


def test_a_body_is_required_where_the_schema_requires_a_property(schema, keys):
    for path in ("/api/v1/ingest", "/api/v1/transcripts", "/api/v1/tools/search"):
        assert schema["paths"][path]["post"]["requestBody"]["required"] is True, path
    assert keys["ingest"].generic("POST", "/api/v1/ingest", b"", content_type="application/json").status_code == 400


def test_the_policy_label_is_described_with_the_pattern_the_view_checks(schema, keys):
    (label,) = [p for p in schema["paths"]["/api/v1/policy"]["get"]["parameters"] if p["name"] == "label"]
    assert label["schema"]["pattern"] == "^[-a-zA-Z0-9_]{1,64}$"
    assert keys["policy:read"].get("/api/v1/policy?label=").status_code == 400


def test_transcript_fields_are_described_as_the_mapping_reads_them(schema):
    body = schema["paths"]["/api/v1/transcripts"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["anyOf"] == [{"required": ["messages"]}, {"required": ["input"]}]
    properties = body["properties"]
    assert all(properties[name]["nullable"] for name in ("format", "session_id", "tools", "input", "metadata"))
    assert properties["session_id"]["maxLength"] == 160  # room for the ids derived from it
    assert {"type": "string"} in properties["input"]["oneOf"]  # one user message, as OpenAI takes it


def test_the_recommendations_are_documented_with_examples(schema):
    started = schema["paths"]["/api/v1/recommendations"]["post"]
    assert started["summary"] and {"200", "202", "400", "404"} <= set(started["responses"])
    assert started["requestBody"]["content"]["application/json"]["examples"]
    assert {"200", "404"} <= set(schema["paths"]["/api/v1/recommendations/{recommendation_id}"]["get"]["responses"])
    apply = schema["paths"]["/api/v1/recommendations/{recommendation_id}/apply"]["post"]
    assert {"200", "400", "404", "409"} <= set(apply["responses"])
    assert apply["responses"]["409"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
    assert apply["requestBody"]["content"]["application/json"]["examples"]
