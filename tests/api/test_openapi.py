"""The OpenAPI 3 description covers the API, and its UIs load from our own static files."""

from __future__ import annotations

import re

import pytest


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
